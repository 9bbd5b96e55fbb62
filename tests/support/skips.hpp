// No silent skips (docs/TESTING.md): what a test does when this host cannot support its check.
//
// - A whole case that needs something absent carries a precondition (`needs(...)` below):
//   Boost.Test reports it as skipped, with the reason, and the log level set by tests/meson.build
//   lists it.
// - A case that can run only part of its check calls `cannot_check(...)`: the gap is printed
//   on stderr, and it is a failure under CI=true.
// - Included once per test binary (its main.cpp), SKIP_OBSERVER turns every precondition skip
//   into a failure of the module under CI=true. Cases left out on purpose by a `--run_test`
//   filter ("disabled") are not skips.
#pragma once

#include <boost/test/framework.hpp>
#include <boost/test/tree/observer.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace test_support {

/// True when the environment variable CI is "true": nothing may be skipped then.
inline bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string(ci) == "true";
}

/// The running test cannot check `what` on this host: says so on stderr; fails under CI=true.
inline void cannot_check(const std::string& what) {
    std::cerr << "NOT CHECKED (" << boost::unit_test::framework::current_test_case().full_name()
              << "): " << what << "\n";
    if (in_ci()) BOOST_ERROR("CI=true, and this check cannot run here: " << what);
}

/// A precondition decorator: `*boost::unit_test::precondition(needs("cgroup v2", have_cgroup))`.
struct needs {
    needs(std::string what, std::function<bool()> available)
        : what_(std::move(what)), available_(std::move(available)) {}
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
        if (available_()) return true;
        boost::test_tools::assertion_result r(false);
        r.message() << "this host lacks " << what_;
        return r;
    }

private:
    std::string what_;
    std::function<bool()> available_;
};

/// How many cases of this run were skipped (the observer below counts them).
inline int& skipped_cases() {
    static int count = 0;
    return count;
}

/// The exit status of a test binary whose own main() ran the cases and got `status`: meson's
/// skip status (77) when every case that ran passed but some were skipped and the registration
/// set AGENTCTL_SKIPS_ARE_A_SKIP=1, so that meson shows SKIP, never OK; `status` otherwise.
inline int exit_status(int status) {
    const char* wanted = std::getenv("AGENTCTL_SKIPS_ARE_A_SKIP");
    if (status == 0 && skipped_cases() > 0 && wanted != nullptr && std::string(wanted) == "1") return 77;
    return status;
}

/// Prints every skipped case on stderr and, under CI=true, fails the module for each one.
struct skip_observer : boost::unit_test::test_observer {
    std::vector<std::string> skipped;
    void test_unit_skipped(boost::unit_test::test_unit const& tu,
                           boost::unit_test::const_string reason) override {
        std::string why(reason.begin(), reason.end());
        if (why == "disabled") return;  // left out by the registration's --run_test filter
        std::cerr << "SKIPPED: " << tu.full_name() << ": " << why << "\n";
        skipped.push_back(tu.full_name() + ": " + why);
        ++skipped_cases();
    }
};

struct skip_guard {
    skip_observer observer;
    skip_guard() { boost::unit_test::framework::register_observer(observer); }
    ~skip_guard() { boost::unit_test::framework::deregister_observer(observer); }
    void teardown() {
        if (!in_ci()) return;
        for (const auto& s : observer.skipped) BOOST_ERROR("CI=true forbids skipping: " << s);
    }
};

}  // namespace test_support

// BOOST_TEST_GLOBAL_FIXTURE pastes its argument into a name: it takes an unqualified one.
using test_support_skip_guard = test_support::skip_guard;
#define SKIP_OBSERVER BOOST_TEST_GLOBAL_FIXTURE(test_support_skip_guard)
