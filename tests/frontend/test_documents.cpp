#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_CASE(placeholder_test_documents) { BOOST_TEST(true); }
