#define BOOST_TEST_MODULE agentctl_extension
#include <boost/test/unit_test.hpp>

#include "../support/skips.hpp"

SKIP_OBSERVER;
