#define BOOST_TEST_MODULE crash
#include <boost/test/unit_test.hpp>
