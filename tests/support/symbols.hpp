// What the objects of static libraries need from elsewhere (`nm -u -C`): the layering tests
// read it to prove that a layer calls no function it must not. One reader for every test.
#pragma once

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace agentctl::test {

/// One object of a library and the names it leaves undefined (demangled, without symbol
/// versions), in nm's order.
struct object_symbols {
    std::string object;  ///< as nm names it: "libfoo.a:src_bar.cpp.o:"
    std::vector<std::string> undefined;
};

/// The undefined symbols of `libraries`, object by object; nothing when nm did not run (it is
/// missing, failed, or printed nothing). Each test decides what a missing nm means.
inline std::optional<std::vector<object_symbols>> undefined_symbols(
    const std::vector<std::string>& libraries) {
    std::string command = "nm -u -C";
    for (const auto& lib : libraries) command += " '" + lib + "'";
    FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
    if (pipe == nullptr) return std::nullopt;
    std::string text;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
    if (pclose(pipe) != 0 || text.empty()) return std::nullopt;

    std::vector<object_symbols> objects;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == ':') {
            objects.push_back({line, {}});
            continue;
        }
        auto u = line.find(" U ");
        if (u == std::string::npos || objects.empty()) continue;
        std::string name = line.substr(u + 3);
        if (auto at = name.find('@'); at != std::string::npos) name.resize(at);
        objects.back().undefined.push_back(std::move(name));
    }
    return objects;
}

/// Whether symbol `name` is one of `names` or holds one of `parts` ("boost::asio::", ...).
inline bool is_one_of(const std::string& name, const std::set<std::string>& names,
                      const std::vector<std::string>& parts = {}) {
    return names.count(name) > 0 || std::any_of(parts.begin(), parts.end(), [&](const std::string& part) {
               return name.find(part) != std::string::npos;
           });
}

/// What pure C++ must not need: functions that reach the kernel, the environment or the clock,
/// and the libraries that do (for a module's "objects call no system function" test).
inline const std::set<std::string> system_functions = {
    "getenv",  "secure_getenv", "setenv",  "clock_gettime",  "gettimeofday", "time",   "open",
    "open64",  "openat",        "read",    "write",          "close",        "fopen",  "fread",
    "fork",    "vfork",         "execve",  "posix_spawn",    "popen",        "system", "socket",
    "connect", "kill",          "waitpid", "pthread_create", "stat",         "access", "poll",
    "pipe",    "pipe2",         "ioctl"};
inline const std::vector<std::string> system_parts = {
    "boost::asio::",       "std::chrono::_V2::", "std::basic_ifstream",
    "std::basic_ofstream", "std::filesystem::",  "std::thread"};

}  // namespace agentctl::test
