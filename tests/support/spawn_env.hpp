// Starting a program with exactly the environment a test gives it, for the tests that kill it
// or its watchdog and then look for what it left (by a nonce in that environment, never in argv).
#pragma once

#include <boost/test/unit_test.hpp>

#include <spawn.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace test_support {

/// posix_spawn of argv[0] with `argv` and exactly `env`; `attr` may be null. A failure to start
/// ends the test case.
inline pid_t spawn_with_env(std::vector<std::string> argv, std::vector<std::string> env,
                            const posix_spawnattr_t* attr = nullptr) {
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    pid_t pid = -1;
    BOOST_REQUIRE_MESSAGE(::posix_spawn(&pid, argv[0].c_str(), nullptr, attr, a.data(), e.data()) == 0,
                          "posix_spawn " << argv[0]);
    return pid;
}

}  // namespace test_support
