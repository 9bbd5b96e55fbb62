#define BOOST_TEST_MODULE agentctl_worker
#include <boost/test/unit_test.hpp>
