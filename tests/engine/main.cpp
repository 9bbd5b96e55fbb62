#define BOOST_TEST_MODULE agentctl
#include <boost/test/unit_test.hpp>

#include "../support/skips.hpp"

SKIP_OBSERVER;
