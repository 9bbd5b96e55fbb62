#include "command.hpp"

#include "../support/skips.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace cli_test {
namespace {

const std::string& env_or_throw(const char* name) {
    static std::string values[3];
    static const char* names[3] = {"AGENTCTL_BIN", "AGENTCTL_TEST_DATA", "AGENTCTL_PROBE"};
    for (int i = 0; i < 3; ++i) {
        if (std::strcmp(names[i], name) != 0) continue;
        if (values[i].empty()) {
            const char* v = std::getenv(name);
            if (!v) throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
            values[i] = v;
        }
        return values[i];
    }
    throw std::logic_error("unknown variable");
}

void drain(int& fd, std::string& into) {
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            into.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0) {
            ::close(fd);
            fd = -1;
        }
        return;  // EAGAIN or closed
    }
}

// argv and envp for posix_spawn, owning their strings.
struct c_strings {
    explicit c_strings(std::vector<std::string> items) : storage(std::move(items)) {
        for (auto& s : storage) pointers.push_back(s.data());
        pointers.push_back(nullptr);
    }
    char* const* get() { return pointers.data(); }
    std::vector<std::string> storage;
    std::vector<char*> pointers;
};

/// posix_spawn of argv[0] with a small fixed environment plus `extra_env`; frees the
/// attributes and file actions. Returns the pid or throws.
pid_t spawn(const std::vector<std::string>& argv, std::vector<std::string> extra_env, posix_spawn_file_actions_t& fa,
            posix_spawnattr_t& attr) {
    std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"};
    // A sanitizer build's agentctl reports as the test setup asks (tests/meson.build).
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
        if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
    // The journal of every run goes to this test binary's own state folder, not /root's,
    // unless the test names one.
    bool own_state = std::any_of(extra_env.begin(), extra_env.end(),
                                 [](const std::string& e) { return e.rfind("AGENTCTL_STATE_DIR=", 0) == 0; });
    if (!own_state) env.push_back("AGENTCTL_STATE_DIR=" + test_state_dir());
    // A variable the test names replaces the one above (getenv would find the first).
    for (const std::string& extra : extra_env) {
        const std::string name = extra.substr(0, extra.find('=') + 1);
        std::erase_if(env, [&](const std::string& e) { return e.rfind(name, 0) == 0; });
        env.push_back(extra);
    }
    c_strings args(argv), envp(std::move(env));
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.get(), envp.get());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    return pid;
}

}  // namespace

const std::string& agentctl_bin() { return env_or_throw("AGENTCTL_BIN"); }
const std::string& data_dir() { return env_or_throw("AGENTCTL_TEST_DATA"); }
const std::string& probe_bin() { return env_or_throw("AGENTCTL_PROBE"); }

command_result run(const std::vector<std::string>& argv, const command_options& options) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, options.cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);

    // command_result::max_rss_kib: the peak this process reached so far must not count.
    if (std::ofstream clear("/proc/self/clear_refs"); clear) clear << "5";
    auto begun = std::chrono::steady_clock::now();
    pid_t pid = spawn(argv, options.env, fa, attr);
    ::close(out[1]);
    ::close(err[1]);
    if (options.on_start) options.on_start(pid);
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);

    command_result r;
    bool polling = static_cast<bool>(options.poll);
    int status = 0;
    bool exited = false;
    rusage usage{};
    while (!exited || out[0] >= 0 || err[0] >= 0) {
        pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
        ::poll(fds, 2, 20);
        if (out[0] >= 0) drain(out[0], r.out);
        if (err[0] >= 0) drain(err[0], r.err);
        if (!exited && ::wait4(pid, &status, WNOHANG, &usage) == pid) exited = true;
        if (polling && !exited && options.poll(pid)) polling = false;
        if (std::chrono::steady_clock::now() - begun > options.bound) {
            r.timed_out = true;
            ::kill(-pid, SIGKILL);
            if (!exited) ::wait4(pid, &status, 0, &usage);
            exited = true;
            if (out[0] >= 0) ::close(out[0]);
            if (err[0] >= 0) ::close(err[0]);
            out[0] = err[0] = -1;
        }
    }
    r.wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun);
    r.max_rss_kib = usage.ru_maxrss;
    r.minor_faults = usage.ru_minflt;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    return r;
}

command_result run_on_terminal(const std::vector<std::string>& argv,
                               const std::vector<std::pair<std::string, std::string>>& answers,
                               std::chrono::milliseconds bound,
                               const std::function<std::string(pid_t)>& poll, int columns) {
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) throw std::runtime_error("posix_openpt");
    if (columns > 0) {
        winsize ws{};
        ws.ws_row = 24;
        ws.ws_col = static_cast<unsigned short>(columns);
        if (::ioctl(master, TIOCSWINSZ, &ws) != 0) throw std::runtime_error("TIOCSWINSZ");
    }
    std::string slave = ::ptsname(master);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // A new session opening a terminal makes it its controlling terminal.
    posix_spawn_file_actions_addopen(&fa, 0, slave.c_str(), O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, 0, 1);
    posix_spawn_file_actions_adddup2(&fa, 0, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    auto begun = std::chrono::steady_clock::now();
    pid_t pid = spawn(argv, {"TERM=xterm"}, fa, attr);
    ::fcntl(master, F_SETFL, O_NONBLOCK);

    command_result r;
    std::size_t next_answer = 0, searched_from = 0;
    int status = 0;
    bool exited = false;
    while (!exited) {
        pollfd pfd{master, POLLIN, 0};
        ::poll(&pfd, 1, 20);
        char buf[4096];
        ssize_t n;
        while ((n = ::read(master, buf, sizeof buf)) > 0) r.out.append(buf, static_cast<std::size_t>(n));
        if (next_answer < answers.size()) {
            auto at = r.out.find(answers[next_answer].first, searched_from);
            if (at != std::string::npos) {
                const std::string& text = answers[next_answer].second;
                (void)!::write(master, text.data(), text.size());
                searched_from = at + answers[next_answer].first.size();
                ++next_answer;
            }
        }
        if (::waitpid(pid, &status, WNOHANG) == pid) exited = true;
        if (!exited && poll) {
            std::string text = poll(pid);
            if (!text.empty()) (void)!::write(master, text.data(), text.size());
        }
        if (!exited && std::chrono::steady_clock::now() - begun > bound) {
            r.timed_out = true;
            ::kill(-pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            exited = true;
        }
    }
    char buf[4096];
    ssize_t n;
    while ((n = ::read(master, buf, sizeof buf)) > 0) r.out.append(buf, static_cast<std::size_t>(n));
    ::close(master);
    r.wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    return r;
}

command_result agentctl(const std::vector<std::string>& args, const command_options& options) {
    std::vector<std::string> argv = {agentctl_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, options);
}

temp_dir::temp_dir() {
    char tmpl[] = "/tmp/agentctl-cli-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

const std::string& test_state_dir() {
    static const temp_dir dir;
    return dir.path();
}

namespace {
// A /proc file of a process that goes away meanwhile reads as empty (libstdc++ may throw
// from the read: ESRCH).
std::string slurp(const std::string& path) {
    try {
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    } catch (const std::exception&) {
        return {};
    }
}
}  // namespace

/// The watchdog of agentctl `owner`: the process named agentctl-watchdog holding a pidfd of it.
pid_t watchdog_of(pid_t owner) {
    DIR* proc = ::opendir("/proc");
    if (!proc) return -1;
    pid_t found = -1;
    while (dirent* e = ::readdir(proc)) {
        pid_t pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::string comm = slurp("/proc/" + std::to_string(pid) + "/comm");
        if (comm.rfind("agentctl-watchd", 0) != 0) continue;
        std::string fds = "/proc/" + std::to_string(pid) + "/fdinfo";
        DIR* d = ::opendir(fds.c_str());
        if (!d) continue;
        while (dirent* f = ::readdir(d))
            if (slurp(fds + "/" + f->d_name).find("Pid:\t" + std::to_string(owner) + "\n") !=
                std::string::npos)
                found = pid;
        ::closedir(d);
        if (found > 0) break;
    }
    ::closedir(proc);
    return found;
}

/// Waits up to `bound` for `count` processes tagged `nonce`.
bool wait_for_processes(const std::string& nonce, std::size_t count, std::chrono::seconds bound) {
    auto until = std::chrono::steady_clock::now() + bound;
    while (processes_with(nonce).size() < count) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling /proc for the trees to be up
    }
    return true;
}


std::string temp_dir::write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
}

std::vector<pid_t> processes_with(const std::string& needle) {
    std::vector<pid_t> found;
    DIR* d = ::opendir("/proc");
    if (!d) return found;
    while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        std::string cmdline = slurp("/proc/" + std::string(e->d_name) + "/cmdline");
        if (cmdline.find(needle) != std::string::npos) found.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(d);
    return found;
}

command_options without_asan_quarantine() {
    command_options o;
#if defined(__SANITIZE_ADDRESS__)
    if (const char* asan = std::getenv("ASAN_OPTIONS"))
        o.env.push_back(std::string("ASAN_OPTIONS=") + asan +
                        ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0");
#endif
    return o;
}

std::string make_nonce() {
    std::random_device rd;
    std::ostringstream s;
    s << "nonce-" << std::hex << rd() << rd();
    return s.str();
}

bool agentctl_uses_cgroups() {
    static const bool yes = [] {
        temp_dir dir;
        auto wf =
            dir.write("wf.yaml",
                      "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: containment}\nspec:\n"
                      "  policy: {processAllowlist: [\"true\"], approval: never}\n"
                      "  actions:\n    ok: {kind: builtin.shell.exec, command: /bin/true}\n"
                      "  tasks:\n    - {id: ok, uses: action:ok}\n");
        auto r = agentctl({"--output", "json", "run", "--no-journal", wf});
        if (r.exit_code != 0) return false;
        boost::system::error_code ec;
        auto v = boost::json::parse(r.out, ec);
        if (ec || !v.is_object()) return false;
        const auto* c = v.find_pointer("/data/tasks/ok/containment", ec);
        return !ec && c != nullptr && c->is_string() && c->as_string() == "cgroup";
    }();
    return yes;
}

namespace {
void normalise(boost::json::value& v, const std::string& key, const std::vector<std::string>& keys,
               const std::vector<std::pair<std::string, std::string>>& replace) {
    // containment depends on the host (a writable cgroup v2 tree or not): tested elsewhere.
    static const char* volatile_keys[] = {"runId", "durationMs", "elapsedMs", "usage", "command", "containment"};
    for (const char* k : volatile_keys)
        if (key == k) {
            v = std::string("<") + k + ">";
            return;
        }
    for (const auto& k : keys)
        if (key == k) {
            v = "<" + k + ">";
            return;
        }
    if (v.is_object()) {
        for (auto& m : v.as_object()) normalise(m.value(), std::string(m.key()), keys, replace);
    } else if (v.is_array()) {
        for (auto& e : v.as_array()) normalise(e, "", keys, replace);
    } else if (v.is_string() && !replace.empty()) {
        std::string text(v.as_string());
        for (const auto& [from, to] : replace)
            for (auto at = text.find(from); !from.empty() && at != std::string::npos;
                 at = text.find(from, at + to.size()))
                text.replace(at, from.size(), to);
        v = text;
    }
}
}  // namespace

std::string normalise_run_json(const std::string& json) {
    return normalise_json(json, {}, {});
}

std::string normalise_json(const std::string& json, const std::vector<std::string>& keys,
                           const std::vector<std::pair<std::string, std::string>>& replace) {
    boost::json::value v = boost::json::parse(json);
    normalise(v, "", keys, replace);
    return boost::json::serialize(v);
}

std::string child_id_in(const std::string& text, const std::string& short_id) {
    constexpr std::size_t digest = 12;
    for (std::size_t at = text.find(short_id + "-"); at != std::string::npos;
         at = text.find(short_id + "-", at + 1)) {
        std::size_t from = at + short_id.size() + 1;
        if (text.size() < from + digest) break;
        std::string tail = text.substr(from, digest);
        bool before_ok = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) ||
                                      text[at - 1] == '-' || text[at - 1] == '_');
        bool after_ok =
            text.size() == from + digest || !std::isxdigit(static_cast<unsigned char>(text[from + digest]));
        if (before_ok && after_ok && tail.find_first_not_of("0123456789abcdef") == std::string::npos)
            return short_id + "-" + tail;
    }
    return short_id;
}

void check_golden(const std::string& golden, const std::string& actual) {
    std::string path = data_dir() + "/golden/" + golden;
    if (const char* update = std::getenv("AGENTCTL_UPDATE_GOLDEN"); update && *update) {
        // A golden file rewritten by CI would make the comparison pass by definition.
        BOOST_REQUIRE_MESSAGE(!test_support::in_ci(), "AGENTCTL_UPDATE_GOLDEN is set and CI=true: refused");
        BOOST_REQUIRE_MESSAGE(std::string(update) == "1", "AGENTCTL_UPDATE_GOLDEN must be 1 or unset");
        std::ofstream(path, std::ios::binary) << actual;
        return;
    }
    std::ifstream f(path, std::ios::binary);
    BOOST_REQUIRE_MESSAGE(f.good(), "missing golden file " << path << " (AGENTCTL_UPDATE_GOLDEN=1 writes it)");
    std::string expected((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    BOOST_TEST(expected == actual, "output differs from " << path << " (AGENTCTL_UPDATE_GOLDEN=1 rewrites it)");
}

bool kill_parent_of(const std::string& needle) {
    auto tasks = processes_with(needle);
    if (tasks.empty()) return false;
    std::ifstream stat("/proc/" + std::to_string(tasks[0]) + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent <= 1) return false;
    ::kill(parent, SIGKILL);
    return true;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

boost::json::value parse_json(const std::string& text) {
    boost::json::error_code ec;
    boost::json::value v = boost::json::parse(text, ec);
    BOOST_REQUIRE_MESSAGE(!ec, "not JSON: " << text);
    return v;
}

}  // namespace cli_test
