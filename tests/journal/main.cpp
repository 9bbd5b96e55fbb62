// The journal tests, and the child modes the crash tests start: the binary runs itself as
// `test_journal --journal-child MODE ARGS...` (before Boost.Test sees the arguments).
#define BOOST_TEST_MODULE journal
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cstring>

namespace journal_test {
int child_main(int argc, char** argv);
}

int main(int argc, char** argv) {
    if (argc >= 3 && std::strcmp(argv[1], "--journal-child") == 0)
        return journal_test::child_main(argc - 2, argv + 2);
    return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
