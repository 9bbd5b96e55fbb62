#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_CASE(placeholder_test_template) { BOOST_TEST(true); }
