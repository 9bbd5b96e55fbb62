#define BOOST_TEST_MODULE agentctl
// Our own main(): a run whose skips must show in meson ends with its skip status (skips.hpp).
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "../support/skips.hpp"

SKIP_OBSERVER;

int main(int argc, char* argv[]) {
    return test_support::exit_status(boost::unit_test::unit_test_main(&init_unit_test, argc, argv));
}
