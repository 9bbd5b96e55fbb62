#define BOOST_TEST_MODULE agentctl_slurm
#include <boost/test/unit_test.hpp>
