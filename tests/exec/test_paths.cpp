// Executable resolution, spawn errors, working directories, input hygiene, redaction
// (docs/TESTING.md).
#include "harness.hpp"

#include "exec/paths.hpp"
#include "exec/sys.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace exec_test;
using agentctl::process_outcome;
using agentctl::exec::unique_fd;
namespace fs = std::filesystem;

namespace {

void write_executable(const std::string& path, const std::string& text, mode_t mode = 0755) {
    {
        std::ofstream out(path);
        out << text;
    }
    ::chmod(path.c_str(), mode);
}

// Both implementations of open_beneath: openat2, and the component-wise fallback.
using opener = std::function<int(int, std::string_view, std::string&)>;
const opener openers[] = {
    [](int root, std::string_view rel, std::string& err) { return agentctl::open_beneath(root, rel, err); },
    [](int root, std::string_view rel, std::string& err) {
        return agentctl::exec::open_beneath_components(root, rel, err);
    },
};

std::string run_in(const std::string& nonce, int cwd_fd) {
    auto req = probe_request(nonce, {"report-cwd"});
    req.cwd_fd = cwd_fd;
    req.cwd_display = "sub";
    return std::string(run_one(req).stdout_bytes);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(paths, process_fixture)

// T-EXE-01, T-EXE-02, T-EXE-03, T-EXE-04: lookup never depends on the current directory.
BOOST_AUTO_TEST_CASE(resolve_executable_rules) {
    temp_dir ws;
    fs::create_directories(ws.path + "/bin");
    fs::create_directories(ws.path + "/abs");
    write_executable(ws.path + "/git", "#!/bin/sh\ntouch " + ws.path + "/planted\n");
    write_executable(ws.path + "/bin/git", "#!/bin/sh\n");
    write_executable(ws.path + "/abs/git", "#!/bin/sh\n");
    write_executable(ws.path + "/abs/data", "x", 0644);
    auto old_cwd = fs::current_path();
    fs::current_path(ws.path);
    // What a failed lookup said.
    auto why = [](const agentctl::expected<std::string>& r) { return r ? std::string() : r.error().message; };
    // Empty, ".", and relative entries are skipped: the planted ./git and bin/git are never found.
    auto r = agentctl::resolve_executable("git", ":.:bin::");
    BOOST_TEST(!r.has_value());
    BOOST_TEST(why(r).find("PATH has no absolute directory") != std::string::npos);
    BOOST_TEST(!agentctl::resolve_executable("git", "").has_value());
    auto found = agentctl::resolve_executable("git", ".:" + ws.path + "/nope:" + ws.path + "/abs");
    BOOST_TEST(found.value_or("") == ws.path + "/abs/git");
    // A non-executable regular file is skipped and named.
    r = agentctl::resolve_executable("data", ws.path + "/abs");
    BOOST_TEST(!r.has_value());
    BOOST_TEST(why(r).find("exists but is not executable") != std::string::npos);
    // A directory named like the command is not a match.
    BOOST_TEST(!agentctl::resolve_executable("abs", ws.path).has_value());
    // Relative paths with a slash are refused; absolute paths are used as they are.
    for (std::string bad : {"./git", "../w/git", "bin/git", "git/"}) {
        r = agentctl::resolve_executable(bad, "/usr/bin");
        BOOST_TEST(!r.has_value(), bad);
        BOOST_TEST(why(r).find("relative path") != std::string::npos);
    }
    BOOST_TEST(agentctl::resolve_executable("/tmp/evil/git", "").value_or("") == "/tmp/evil/git");
    BOOST_TEST(!agentctl::resolve_executable("", "/usr/bin").has_value());
    BOOST_TEST(!agentctl::resolve_executable(std::string("g\0it", 4), "/usr/bin").has_value());
    BOOST_TEST(agentctl::resolve_executable("sh", "/usr/bin:/bin").has_value());
    fs::current_path(old_cwd);
    BOOST_TEST(!fs::exists(ws.path + "/planted"));
}

// T-EXE-06: distinct spawn errors, each naming the path and the step.
BOOST_AUTO_TEST_CASE(spawn_errors_are_distinct) {
    temp_dir ws;
    write_executable(ws.path + "/plain", "data", 0644);
    write_executable(ws.path + "/script", "#!/nonexistent/interp -x\necho hi\n");
    write_executable(ws.path + "/noexec-format", "just text\n");
    fs::create_directories(ws.path + "/dir");
    fs::copy_file(probe_path(), ws.path + "/busy");
    unique_fd writer(::open((ws.path + "/busy").c_str(), O_WRONLY | O_CLOEXEC));
    BOOST_REQUIRE(writer);

    struct expectation {
        std::string path;
        std::string code;
        std::string says;
    };
    std::vector<expectation> cases = {
        {ws.path + "/missing", "executable_not_found", "does not exist"},
        {ws.path + "/plain", "permission_denied", "mode 0644"},
        {ws.path + "/dir", "is_a_directory", "is a directory"},
        {ws.path + "/script", "interpreter_not_found", "'/nonexistent/interp'"},
        {ws.path + "/noexec-format", "exec_format_error", "executable format"},
        {ws.path + "/busy", "text_file_busy", "text file busy"},
        {ws.path + "/plain/sub", "executable_not_found", "not a directory"},
    };
    for (auto& c : cases) {
        auto req = command_request({c.path, "--nonce", nonce});
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::spawn_failed, c.path);
        BOOST_TEST(code_of(r) == c.code, c.path);
        BOOST_TEST(r.error_message.find(c.says) != std::string::npos, r.error_message);
        BOOST_TEST(r.error_message.find(c.path) != std::string::npos, r.error_message);
        BOOST_TEST(!r.exit_code.has_value());
    }
}

// T-EXE-05: the file resolved is the file that runs. One renamed over the path after the
// resolution (as package managers and attackers replace programs) does not run: the spawn
// says so. A deleted one is not found. Unchanged, it runs.
BOOST_AUTO_TEST_CASE(an_executable_replaced_after_resolution_does_not_run) {
    temp_dir ws;
    std::string tool = ws.path + "/tool";
    fs::copy_file(probe_path(), tool);
    std::optional<agentctl::file_identity> id;
    auto path = agentctl::resolve_executable("tool", ws.path, &id);
    BOOST_REQUIRE(path.value_or("") == tool);
    BOOST_REQUIRE(id.has_value());
    auto req = command_request({tool, "exit", "7", "--nonce", nonce});
    req.executable_identity = id;
    BOOST_TEST(run_one(req).exit_code.value_or(-1) == 7);

    std::string marker = ws.path + "/ran";
    write_executable(ws.path + "/evil", "#!/bin/sh\ntouch " + marker + "\nexit 3\n");
    BOOST_REQUIRE(::rename((ws.path + "/evil").c_str(), tool.c_str()) == 0);
    auto swapped = run_one(req);
    BOOST_TEST(swapped.outcome == process_outcome::spawn_failed);
    BOOST_TEST(code_of(swapped) == "executable_changed");
    BOOST_TEST(swapped.error_message.find(tool) != std::string::npos, swapped.error_message);
    BOOST_TEST(!swapped.exit_code.has_value());
    BOOST_TEST(!fs::exists(marker));

    fs::remove(tool);
    BOOST_TEST(code_of(run_one(req)) == "executable_not_found");
    // An absolute command is identified too.
    std::optional<agentctl::file_identity> abs_id;
    BOOST_TEST(agentctl::resolve_executable(probe_path(), "", &abs_id).has_value());
    BOOST_TEST(abs_id.has_value());
}

// T-EXE-05 during the spawn: another thread renames a script over the program again and again
// while it is spawned. Every run is the program itself or "executable_changed": the child
// execs the descriptor the spawn opened and checked, never what the path names a moment later.
BOOST_AUTO_TEST_CASE(a_rename_racing_the_spawn_never_runs_the_other_file) {
    temp_dir ws;
    std::string tool = ws.path + "/tool";
    std::string marker = ws.path + "/ran";
    fs::copy_file(probe_path(), ws.path + "/good");
    write_executable(ws.path + "/evil", "#!/bin/sh\ntouch " + marker + "\nexit 3\n");
    BOOST_REQUIRE(::link((ws.path + "/good").c_str(), tool.c_str()) == 0);
    std::optional<agentctl::file_identity> id;
    BOOST_REQUIRE(agentctl::resolve_executable(tool, "", &id).has_value());
    std::atomic<bool> stop{false};
    std::thread flipper([&] {
        std::string next = ws.path + "/next";
        for (unsigned i = 0; !stop.load(); ++i) {
            ::unlink(next.c_str());
            if (::link((ws.path + (i % 2 ? "/good" : "/evil")).c_str(), next.c_str()) == 0)
                ::rename(next.c_str(), tool.c_str());
        }
    });
    int ran = 0, refused = 0, other = 0;
    for (int i = 0; i < 300; ++i) {
        auto req = command_request({tool, "exit", "0", "--nonce", nonce});
        req.executable_identity = id;
        auto r = run_one(req);
        if (r.exit_code == 0) {
            ++ran;
        } else if (code_of(r) == "executable_changed") {
            ++refused;
        } else {
            ++other;
            BOOST_TEST_MESSAGE("run " << i << ": " << r.outcome << " " << code_of(r) << " "
                                      << r.exit_code.value_or(-1) << " " << r.error_message);
        }
    }
    stop = true;
    flipper.join();
    BOOST_TEST_MESSAGE(ran << " ran, " << refused << " refused");
    BOOST_TEST(other == 0);
    BOOST_TEST(!fs::exists(marker));
    BOOST_TEST(ran + refused == 300);
}

// Scripts keep working: exec'd by path once the path is shown to name the file opened, so $0
// is the script's own path (not a /dev/fd name) and the status is its own.
BOOST_AUTO_TEST_CASE(scripts_with_an_interpreter_line_still_run) {
    temp_dir ws;
    std::string script = ws.path + "/s.sh";
    write_executable(script, "#!/bin/sh\necho \"$0 $1\"\nexit 4\n");
    std::optional<agentctl::file_identity> id;
    BOOST_REQUIRE(agentctl::resolve_executable(script, "", &id).has_value());
    for (bool with_identity : {false, true}) {
        auto req = command_request({script, "arg"});
        if (with_identity) req.executable_identity = id;
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_TEST(r.exit_code.value_or(-1) == 4);
        BOOST_TEST(r.stdout_bytes == script + " arg\n");
    }
}

// T-IN-01: too much argv is E2BIG, named as such, with the sizes.
BOOST_AUTO_TEST_CASE(argument_list_too_long_is_named) {
    auto one = probe_request(nonce, {"exit", "0", std::string(200 * 1024, 'a')});
    auto r = run_one(one);
    BOOST_TEST(code_of(r) == "argument_list_too_long");
    BOOST_TEST(r.error_message.find("argument 3 is 204800 bytes") != std::string::npos, r.error_message);
    auto many = probe_request(nonce, {"exit", "0"});
    for (int i = 0; i < 100; ++i)
        many.env.push_back("V" + std::to_string(i) + "=" + std::string(100000, 'v'));
    auto r2 = run_one(many);
    BOOST_TEST(code_of(r2) == "argument_list_too_long");
    BOOST_TEST(r2.error_message.find("argv and environment take") != std::string::npos, r2.error_message);
    // Far below the limit, many small arguments run (T-IN-03).
    auto small = probe_request(nonce, {"exit", "0"});
    for (int i = 0; i < 20000; ++i) small.argv.push_back("x");
    BOOST_TEST(run_one(small).exit_code.value_or(-1) == 0);
}

// T-IN-05 and invalid requests: refused before anything is spawned.
BOOST_AUTO_TEST_CASE(invalid_requests_spawn_nothing) {
    temp_dir dir;
    auto marker = dir.path + "/spawned";
    auto base = [&] { return probe_request(nonce, {"write-file", marker, "1"}); };
    std::vector<std::pair<std::string, std::function<void(agentctl::process_request&)>>> cases = {
        {"NUL in argument", [](auto& r) { r.argv.push_back(std::string("a\0b", 3)); }},
        {"NUL in env value", [](auto& r) { r.env.push_back(std::string("A=x\0y", 5)); }},
        {"env without =", [](auto& r) { r.env.push_back("NOEQUALS"); }},
        {"env with empty name", [](auto& r) { r.env.push_back("=x"); }},
        {"NUL in executable", [](auto& r) { r.executable += std::string("\0x", 2); }},
        {"relative executable", [](auto& r) { r.executable = "probe"; }},
        {"empty argv", [](auto& r) { r.argv.clear(); }},
        {"NUL in cwd", [](auto& r) { r.cwd_display = std::string("a\0b", 3); }},
        {"zero timeout", [](auto& r) { r.timeout = 0ms; }},
        {"negative timeout", [](auto& r) { r.timeout = -5ms; }},
        {"zero cap", [](auto& r) { r.stdout_limit = 0; }},
        {"zero combined cap", [](auto& r) { r.combined_limit = 0; }},
        {"negative grace", [](auto& r) { r.kill_grace = -1ms; }},
    };
    for (auto& [name, mutate] : cases) {
        auto req = base();
        mutate(req);
        runner r;
        r.start(req);
        BOOST_TEST(r.completions == 0, name);  // never from inside the initiating call
        r.run(5s);
        BOOST_TEST(r.result().outcome == process_outcome::spawn_failed, name);
        BOOST_TEST(code_of(r.result()) == "invalid_request", name);
    }
    BOOST_TEST(!fs::exists(marker));
}

// T-FS-01, T-FS-02, T-FS-07: cwd resolution stays beneath the workspace, with both openers.
BOOST_AUTO_TEST_CASE(open_beneath_refuses_escapes) {
    temp_dir ws;
    fs::create_directories(ws.path + "/a/b");
    fs::create_directories(ws.path + "/real");
    fs::create_symlink("/etc", ws.path + "/abs-link");
    fs::create_symlink("../../..", ws.path + "/a/up-link");
    fs::create_symlink("abs-link", ws.path + "/chained");
    fs::create_symlink("nowhere", ws.path + "/dangling");
    fs::create_symlink("/proc/self/cwd", ws.path + "/magic");
    fs::create_symlink("real", ws.path + "/inner-link");
    { std::ofstream(ws.path + "/file") << "x"; }
    unique_fd root(::open(ws.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    for (std::size_t i = 0; i < 2; ++i) {
        auto& open = openers[i];
        std::string err;
        for (std::string bad :
             std::vector<std::string>{"abs-link", "a/up-link", "chained", "dangling", "magic", "../x",
                                      "a/../../etc", "/etc", "/proc/self/fd/3", "/proc/self/cwd", "file",
                                      "missing", "a/missing", std::string(5000, 'd'), "a/..", ".."}) {
            err.clear();
            int fd = open(root.get(), bad, err);
            BOOST_TEST(fd == -1, bad.substr(0, 40) << " via opener " << i);
            if (fd >= 0) ::close(fd);
            BOOST_TEST(!err.empty());
        }
        for (std::string good : {"", ".", "a", "a/b", "./a", "a//b", "a/b/", "real"}) {
            err.clear();
            unique_fd fd(open(root.get(), good, err));
            BOOST_TEST(static_cast<bool>(fd), good << " via opener " << i << ": " << err);
        }
        // A symlink that stays inside is fine with openat2; the fallback refuses every symlink.
        err.clear();
        unique_fd inner(open(root.get(), "inner-link", err));
        BOOST_TEST(static_cast<bool>(inner) == (i == 0), "inner-link via opener " << i);
    }
    std::string err;
    agentctl::open_beneath(root.get(), "abs-link", err);
    BOOST_TEST(err.find("outside the workspace") != std::string::npos, err);
    agentctl::open_beneath(root.get(), "../x", err);
    BOOST_TEST(err.find("'..'") != std::string::npos, err);
}

// The component walk shared by the fallback opener, make_directories_beneath and
// relative_below: runs of slashes are one separator, "." is no component, ".." is kept (the
// callers refuse it).
BOOST_AUTO_TEST_CASE(path_components) {
    auto components = [](std::string_view path) {
        std::vector<std::string> out;
        for (auto part = agentctl::exec::next_component(path); !part.empty();
             part = agentctl::exec::next_component(path))
            out.emplace_back(part);
        return out;
    };
    using list = std::vector<std::string>;
    BOOST_TEST(components("") == list{});
    BOOST_TEST(components("/././/") == list{});
    BOOST_TEST(components("a") == list{"a"});
    BOOST_TEST(components("/a//b/./c/") == (list{"a", "b", "c"}));
    BOOST_TEST(components("a/../b") == (list{"a", "..", "b"}));
    BOOST_TEST(components("./.hidden/..x") == (list{".hidden", "..x"}));
}

// T-FS-04: the directory is swapped for a symlink to / after it was opened: the child still
// lands in the directory that was opened (a dir fd and fchdir, never a path).
BOOST_AUTO_TEST_CASE(cwd_swap_after_open_cannot_redirect) {
    temp_dir ws;
    unique_fd root(::open(ws.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    for (int i = 0; i < 20; ++i) {
        fs::create_directories(ws.path + "/sub");
        std::string err;
        unique_fd sub(agentctl::open_beneath(root.get(), "sub", err));
        BOOST_REQUIRE(sub);
        fs::rename(ws.path + "/sub", ws.path + "/moved");
        fs::create_symlink("/", ws.path + "/sub");
        auto cwd = run_in(nonce, sub.get());
        BOOST_TEST(cwd == ws.path + "/moved\n");
        fs::remove(ws.path + "/sub");
        fs::remove(ws.path + "/moved");
    }
    char here[4096];
    BOOST_TEST(::getcwd(here, sizeof here) != nullptr);
}

// T-FS-05: many concurrent runs with different working directories; ours never changes.
BOOST_AUTO_TEST_CASE(concurrent_runs_with_different_cwds) {
    temp_dir ws;
    unique_fd root(::open(ws.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    auto before = fs::current_path();
    spawn_thread spawner;
    boost::asio::io_context io;
    spawner.attach(io);
    std::vector<unique_fd> dirs;
    std::vector<std::string> got(64);
    for (int i = 0; i < 64; ++i) {
        fs::create_directories(ws.path + "/d" + std::to_string(i));
        std::string err;
        dirs.emplace_back(agentctl::open_beneath(root.get(), "d" + std::to_string(i), err));
        auto req = probe_request(nonce, {"report-cwd"});
        req.cwd_fd = dirs.back().get();
        agentctl::async_run_process(io.get_executor(), req, [&got, i](agentctl::process_result r) {
            got[static_cast<std::size_t>(i)] = r.stdout_bytes;
        });
    }
    io.run_for(30s);
    for (int i = 0; i < 64; ++i)
        BOOST_TEST(got[static_cast<std::size_t>(i)] == ws.path + "/d" + std::to_string(i) + "\n");
    BOOST_TEST(fs::current_path() == before);
}

// T-FS-06: the directory is removed (or replaced by a file) after it was opened: the spawn
// fails naming the working directory, not the executable.
BOOST_AUTO_TEST_CASE(removed_cwd_is_reported_as_cwd) {
    temp_dir ws;
    unique_fd root(::open(ws.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    for (bool replace_with_file : {false, true}) {
        fs::create_directories(ws.path + "/gone");
        std::string err;
        unique_fd dir(agentctl::open_beneath(root.get(), "gone", err));
        BOOST_REQUIRE(dir);
        fs::remove(ws.path + "/gone");
        if (replace_with_file) std::ofstream(ws.path + "/gone") << "x";
        auto req = probe_request(nonce, {"exit", "0"});
        req.cwd_fd = dir.get();
        req.cwd_display = "gone";
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::spawn_failed);
        BOOST_TEST(code_of(r) == "cwd_unavailable");
        BOOST_TEST(r.error_message.find("'gone'") != std::string::npos, r.error_message);
        fs::remove(ws.path + "/gone");
    }
    auto bad = probe_request(nonce, {"exit", "0"});
    unique_fd file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    bad.cwd_fd = file.get();
    bad.cwd_display = "devnull";
    BOOST_TEST(code_of(run_one(bad)) == "cwd_unavailable");
}

// T-CON-04: a storm of spawn failures leaves no fd behind (the fixture checks the count).
BOOST_AUTO_TEST_CASE(spawn_failure_storm_leaks_nothing) {
    spawn_thread spawner;
    boost::asio::io_context io;
    spawner.attach(io);
    int failed = 0;
    for (int i = 0; i < 1000; ++i) {
        agentctl::async_run_process(io.get_executor(),
                                    command_request({"/nonexistent/agentctl-missing", nonce}),
                                    [&failed](agentctl::process_result r) {
                                        if (code_of(r) == "executable_not_found") ++failed;
                                    });
    }
    int during = 0;
    boost::asio::post(io, [&] { during = open_fd_count(); });
    io.run_for(30s);
    BOOST_TEST(failed == 1000);
    // On a spawner thread a spawn may be under way when the sample is taken: its pipes, pidfd
    // and leaf (8 at most) are in the count, as are the spawn window's 5 slots (docs/DESIGN.md,
    // "The child's descriptor table"). A leak over 1 000 failures would be hundreds.
    BOOST_TEST(during < baseline_fds + 16 + 5 + (spawner.active() ? 8 : 0));
}

// T-CON-03: too few fds for the runs in flight: the ones that cannot get their fds fail with
// resource_exhausted; nothing hangs, leaks or is left behind.
BOOST_AUTO_TEST_CASE(fd_exhaustion_fails_cleanly) {
    rlimit old{};
    BOOST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    // Every budget from "not even Asio's reactor" to "a few runs": each error path in turn.
    for (int budget = 0; budget <= 16; ++budget) {
        std::map<std::string, int> seen;
        {
            boost::asio::io_context io;
            // From budget 1 on, the reactor (3 fds) exists before the limit is set.
            std::optional<boost::asio::steady_timer> reactor;
            if (budget > 0) reactor.emplace(io);
            rlimit tight = old;
            tight.rlim_cur = static_cast<rlim_t>(open_fd_count() + budget);
            BOOST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
            for (int i = 0; i < 8; ++i) {
                agentctl::async_run_process(
                    io.get_executor(), probe_request(nonce, {"sleep", "0.1"}),
                    [&seen](agentctl::process_result r) {
                        ++seen[r.outcome == process_outcome::exited && r.exit_code == 0
                                   ? "ok"
                                   : std::string(code_of(r))];
                    });
            }
            io.run_for(30s);
            ::setrlimit(RLIMIT_NOFILE, &old);
        }
        BOOST_TEST(seen["ok"] + seen["resource_exhausted"] == 8, "budget " << budget);
        BOOST_TEST(seen["resource_exhausted"] >= 1, "budget " << budget);
        if (budget == 16) BOOST_TEST(seen["ok"] >= 1);
    }
}

BOOST_AUTO_TEST_CASE(redaction) {
    auto redacted = [](std::string text, std::vector<std::string> secrets) {
        agentctl::redact(text, secrets);
        return text;
    };
    BOOST_TEST(redacted("token=abc123 and abc123", {"abc123"}) == "token=[REDACTED] and [REDACTED]");
    BOOST_TEST(redacted("nothing here", {"abc", ""}) == "nothing here");
    BOOST_TEST(redacted("", {"abc"}) == "");
    // Overlapping secrets leave no fragment.
    BOOST_TEST(redacted("xxabcdefyy", {"abc", "cdef"}) == "xx[REDACTED]yy");
    BOOST_TEST(redacted("aaaa", {"aa"}) == "[REDACTED]");
    BOOST_TEST(redacted("abcdef", {"abc", "abcdef"}) == "[REDACTED]");
    // The marker itself is not scanned again.
    BOOST_TEST(redacted("RED", {"RED", "ACT"}) == "[REDACTED]");
    BOOST_TEST(redacted("s1 s2", {"s1", "s2"}) == "[REDACTED] [REDACTED]");
    BOOST_TEST(redacted(std::string("a\0b", 3), {std::string("\0", 1)}) == "a[REDACTED]b");
}

BOOST_AUTO_TEST_SUITE_END()
