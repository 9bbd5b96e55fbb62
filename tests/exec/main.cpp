#define BOOST_TEST_MODULE exec
#include <boost/test/unit_test.hpp>

#include "../support/skips.hpp"

SKIP_OBSERVER;
