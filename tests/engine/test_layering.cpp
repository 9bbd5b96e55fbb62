// The rooms of the library keep to themselves (docs/DESIGN.md, "Layers"):
// - only src/exec touches POSIX: the engine and the runner include no system header and call
//   no system function, in their sources and in their symbols;
// - the engine holds no backend code: it talks to a task_runner, and reaches the built-in one
//   through src/runner's own files only, never a backend's;
// - each backend folder of the runner (host/, container/, slurm/) uses only its own, and the
//   runner never reaches back into the engine.
#include "../support/symbols.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

bool in_ci() {
    return env_or_empty("CI") == "true";
}

std::string source_root() {
    std::string root = env_or_empty("AGENTCTL_SOURCE_ROOT");
    BOOST_TEST_REQUIRE(!root.empty(), "AGENTCTL_SOURCE_ROOT is not set (run through meson test)");
    return root;
}

/// One line of code (comments cut), where it is.
struct source_line {
    std::string file;  ///< relative to the source root
    int number = 0;
    std::string text;
};

/// Every line of the C++ sources below `layer`.
std::vector<source_line> lines_of(const std::string& root, const std::string& layer) {
    const fs::path dir = fs::path(root) / layer;
    BOOST_TEST_REQUIRE(fs::is_directory(dir), dir.string());
    std::vector<source_line> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        auto ext = e.path().extension();
        if (ext != ".cpp" && ext != ".hpp") continue;
        const std::string relative = fs::relative(e.path(), root).generic_string();
        std::ifstream in(e.path());
        std::string line;
        for (int number = 1; std::getline(in, line); ++number) {
            if (auto comment = line.find("//"); comment != std::string::npos) line.resize(comment);
            out.push_back({relative, number, line});
        }
    }
    return out;
}

/// The backend folder a source of the runner lies in ("host", "container", "slurm"), or "".
std::string backend_of(const std::string& relative) {
    for (const char* b : {"host", "container", "slurm"})
        if (relative.rfind(std::string("src/runner/") + b + "/", 0) == 0) return b;
    return "";
}

const std::regex quoted_include(R"re(#\s*include\s*"([^"]+)")re");

}  // namespace

BOOST_AUTO_TEST_CASE(engine_and_runner_have_no_system_calls) {
    const std::string root = source_root();
    const std::regex posix_header(
        R"(#\s*include\s*<(unistd|fcntl|signal|dirent|limits|pwd|grp|poll|spawn|termios|dlfcn|sched)\.h>|#\s*include\s*<(sys|linux|asm)/)");
    const std::regex global_call(
        R"((^|[^\w>:])::(open|openat|read|write|close|stat|fstat|access|realpath|readlink|kill|getpid|gethostname|pipe2?|fork|vfork|execve|waitid|waitpid|mkdir|rmdir|unlink|ioctl|fcntl|dup2?|isatty|chdir|getrlimit|setrlimit|syscall)\s*\()");
    const std::regex other(R"(\b(getenv|std::random_device|popen|system\s*\()\b)");
    // From src/exec they see only the headers made for them; those include no system header
    // either (sys.hpp, with its inline calls, is private to src/exec).
    const std::regex exec_include(R"re(#\s*include\s*"exec/([^"]+)")re");
    const std::set<std::string> engine_facing = {"workspace.hpp", "host.hpp", "client.hpp", "redactor.hpp",
                                                 "channel.hpp"};
    for (const auto& h : engine_facing) {
        std::ifstream in(fs::path(root) / "src/exec" / h);
        BOOST_TEST_REQUIRE(in.good(), h);
        std::string line;
        for (int number = 1; std::getline(in, line); ++number)
            BOOST_TEST(!std::regex_search(line, posix_header),
                       "src/exec/" << h << ":" << number << ": " << line);
    }
    std::size_t scanned = 0;
    for (const char* layer : {"src/engine", "src/runner"}) {
        for (const auto& l : lines_of(root, layer)) {
            ++scanned;
            BOOST_TEST(!std::regex_search(l.text, posix_header), l.file << ":" << l.number << ": " << l.text);
            BOOST_TEST(!std::regex_search(l.text, global_call), l.file << ":" << l.number << ": " << l.text);
            BOOST_TEST(!std::regex_search(l.text, other), l.file << ":" << l.number << ": " << l.text);
            std::smatch m;
            if (std::regex_search(l.text, m, exec_include))
                BOOST_TEST(engine_facing.count(m[1].str()), l.file << ":" << l.number << ": " << l.text);
        }
    }
    BOOST_TEST(scanned > 2000u);

    // Symbols too: an inline helper from a header could hide a call.
    std::string engine_lib = env_or_empty("AGENTCTL_ENGINE_LIB");
    std::string runner_lib = env_or_empty("AGENTCTL_RUNNER_LIB");
    BOOST_TEST_REQUIRE(fs::exists(engine_lib),
                       "AGENTCTL_ENGINE_LIB does not name the engine library: " << engine_lib);
    BOOST_TEST_REQUIRE(fs::exists(runner_lib),
                       "AGENTCTL_RUNNER_LIB does not name the runner library: " << runner_lib);
    auto objects = agentctl::test::undefined_symbols({engine_lib, runner_lib});
    if (!objects) {
        // Without nm the source scan above still ran; CI has binutils, so there it is a failure.
        BOOST_TEST_REQUIRE(!in_ci(), "nm did not run: the symbol check cannot be done");
        BOOST_TEST_MESSAGE("WARNING: nm did not run: the symbol check was NOT done");
        return;
    }
    const std::set<std::string> forbidden = {
        "open",      "open64",  "openat",  "openat64",      "read",    "write",  "close",     "stat",
        "stat64",    "fstat",   "fstat64", "lstat",         "fstatat", "access", "faccessat", "realpath",
        "readlink",  "kill",    "getpid",  "gethostname",   "pipe",    "pipe2",  "fork",      "vfork",
        "clone",     "execve",  "waitid",  "waitpid",       "mkdir",   "rmdir",  "unlink",    "ioctl",
        "fcntl",     "fcntl64", "dup",     "dup2",          "poll",    "isatty", "chdir",     "getrlimit",
        "setrlimit", "syscall", "getenv",  "secure_getenv", "popen",   "system", "socket",    "getrandom",
        "opendir",   "fopen",   "fopen64",
    };
    // An object that holds an Asio timer or descriptor also holds Asio's header-only reactor
    // (epoll, an eventfd or a pipe to interrupt it, timerfd); those calls are Asio's own.
    const std::set<std::string> asio_reactor = {"close", "write", "read",    "pipe",
                                                "pipe2", "fcntl", "fcntl64", "ioctl"};
    std::size_t checked = 0;
    for (const auto& [object, names] : *objects) {
        checked += names.size();
        bool has_reactor = std::find(names.begin(), names.end(), "epoll_create1") != names.end();
        for (const auto& name : names) {
            if (has_reactor && asio_reactor.count(name)) continue;
            BOOST_TEST(!agentctl::test::is_one_of(name, forbidden, {"std::random_device"}),
                       object << " calls `" << name << "`: system calls belong in src/exec");
        }
    }
    BOOST_TEST(checked > 100u);
}

BOOST_AUTO_TEST_CASE(engine_holds_no_backend_code) {
    const std::string root = source_root();
    for (const auto& l : lines_of(root, "src/engine")) {
        std::smatch m;
        if (!std::regex_search(l.text, m, quoted_include)) continue;
        const std::string header = m[1].str();
        BOOST_TEST(backend_of("src/" + header).empty(),
                   l.file << ":" << l.number << ": the engine includes a backend's " << header);
    }
    auto objects = agentctl::test::undefined_symbols({env_or_empty("AGENTCTL_ENGINE_LIB")});
    if (!objects) {
        BOOST_TEST_REQUIRE(!in_ci(), "nm did not run: the symbol check cannot be done");
        BOOST_TEST_MESSAGE("WARNING: nm did not run: the engine's symbol check was NOT done");
        return;
    }
    for (const auto& [object, names] : *objects)
        for (const auto& name : names)
            for (const char* backend : {"agentctl::container::", "agentctl::slurm::", "launcher"})
                BOOST_TEST(name.find(backend) == std::string::npos,
                           object << " needs `" << name << "`: backend code belongs in src/runner");
}

BOOST_AUTO_TEST_CASE(each_backend_uses_only_its_own) {
    const std::string root = source_root();
    std::size_t in_backends = 0;
    for (const auto& l : lines_of(root, "src/runner")) {
        std::smatch m;
        if (!std::regex_search(l.text, m, quoted_include)) continue;
        const std::string header = m[1].str();
        BOOST_TEST(header.rfind("engine/", 0) != 0,
                   l.file << ":" << l.number << ": the runner reaches back into the engine: " << header);
        const std::string mine = backend_of(l.file);
        if (mine.empty()) continue;  // the runner's own files assemble the backends
        ++in_backends;
        const std::string theirs = backend_of("src/" + header);
        BOOST_TEST((theirs.empty() || theirs == mine),
                   l.file << ":" << l.number << ": the " << mine << " backend includes " << header);
    }
    BOOST_TEST(in_backends > 10u);

    auto objects = agentctl::test::undefined_symbols({env_or_empty("AGENTCTL_RUNNER_LIB")});
    if (!objects) {
        BOOST_TEST_REQUIRE(!in_ci(), "nm did not run: the symbol check cannot be done");
        BOOST_TEST_MESSAGE("WARNING: nm did not run: the backends' symbol check was NOT done");
        return;
    }
    // Objects are named after their sources (src_runner_container_launcher.cpp.o), or, in the
    // unity build of each backend's own library (meson.build), after that library
    // (agentctl_runner_container-unity0.cpp.o): either way one backend per object.
    const std::map<std::string, std::string> others = {
        {"host", "agentctl::container::|agentctl::slurm::"},
        {"container", "agentctl::slurm::"},
        {"slurm", "agentctl::container::"},
    };
    std::map<std::string, std::size_t> backend_objects;
    for (const auto& [object, names] : *objects) {
        for (const auto& [backend, forbidden] : others) {
            if (object.find("src_runner_" + backend + "_") == std::string::npos &&
                object.find("agentctl_runner_" + backend + "-unity") == std::string::npos)
                continue;
            ++backend_objects[backend];
            const std::regex other_backend(forbidden);
            for (const auto& name : names)
                BOOST_TEST(!std::regex_search(name, other_backend),
                           object << " needs `" << name << "`: another backend's code");
        }
    }
    for (const auto& [backend, forbidden] : others)
        BOOST_TEST(backend_objects[backend] >= 1u, "no object of the " << backend << " backend was checked");
}
