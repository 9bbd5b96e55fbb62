#include "harness.hpp"

#include "../support/deadline.hpp"

#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

namespace exec_test {

using agentctl::exec::unique_fd;

const std::string& probe_path() {
    static const std::string path = [] {
        const char* p = std::getenv("AGENTCTL_PROBE");
        if (p == nullptr || *p == 0)
            throw std::runtime_error("AGENTCTL_PROBE is not set (run through meson test)");
        return std::string(p);
    }();
    return path;
}

agentctl::process_request probe_request(const std::string& nonce, std::vector<std::string> args) {
    agentctl::process_request r;
    r.executable = probe_path();
    r.argv.push_back(probe_path());
    for (auto& a : args) r.argv.push_back(std::move(a));
    r.argv.push_back("--nonce");
    r.argv.push_back(nonce);
    r.timeout = 10s;
    return r;
}

agentctl::process_request command_request(std::vector<std::string> argv) {
    agentctl::process_request r;
    r.executable = argv.at(0);
    r.argv = std::move(argv);
    r.timeout = 10s;
    return r;
}

spawn_thread::spawn_thread() {
    const char* wanted = std::getenv("AGENTCTL_TEST_SPAWNER");
    if (wanted && *wanted) pool_.emplace(1);
}

void spawn_thread::attach(boost::asio::io_context& io) {
    if (pool_) agentctl::use_spawn_executor(io, pool_->get_executor());
}

std::shared_ptr<void> spawn_thread::hold() {
    if (!pool_) return nullptr;
    struct gate {
        std::mutex mutex;
        std::condition_variable opened;
        bool open = false;
        bool holding = false;
    };
    auto g = std::make_shared<gate>();
    boost::asio::post(*pool_, [g] {
        std::unique_lock lock(g->mutex);
        g->holding = true;
        g->opened.notify_all();
        g->opened.wait(lock, [&] { return g->open; });
    });
    // Returned once the spawner's thread is held, so that no spawn slips in before.
    std::unique_lock lock(g->mutex);
    g->opened.wait(lock, [&] { return g->holding; });
    return std::shared_ptr<void>(nullptr, [g](void*) {
        std::lock_guard lock(g->mutex);
        g->open = true;
        g->opened.notify_all();
    });
}

void runner::start(agentctl::process_request request) {
    started_at_ = std::chrono::steady_clock::now();
    agentctl::async_run_process(
        io.get_executor(), std::move(request),
        boost::asio::bind_cancellation_slot(signal.slot(), [this](agentctl::process_result r) {
            ++completions;
            done_at_ = std::chrono::steady_clock::now();
            result_ = std::move(r);
        }));
}

void runner::run(milliseconds bound) {
    // A second completion would show up in the poll after the first.
    bool done = agentctl::test::run_with_deadline(io, bound, [this] { return result_.has_value(); });
    BOOST_REQUIRE_MESSAGE(done, "the run did not complete within " << bound.count() << " ms");
    BOOST_TEST(completions == 1);
}

const agentctl::process_result& runner::result() const {
    BOOST_REQUIRE(result_.has_value());
    return *result_;
}

agentctl::process_result run_one(agentctl::process_request request, milliseconds bound, milliseconds* wall) {
    runner r;
    r.start(std::move(request));
    r.run(bound);
    if (wall != nullptr) *wall = r.wall();
    return r.result();
}

file_watch::file_watch(boost::asio::io_context& io, std::string path, std::function<void()> fn)
    : sd_(io), path_(std::move(path)), fn_(std::move(fn)) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    BOOST_REQUIRE(fd >= 0);
    sd_.assign(fd);
    auto dir = std::filesystem::path(path_).parent_path().string();
    BOOST_REQUIRE(::inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) >= 0);
    // The file may already be there: look once the io_context runs.
    boost::asio::post(io, [this] {
        if (!fire_if_present()) arm();
    });
}

file_watch::~file_watch() {
    boost::system::error_code ignored;
    sd_.close(ignored);
}

bool file_watch::fire_if_present() {
    if (fired_ || ::access(path_.c_str(), F_OK) != 0) return fired_;
    fired_ = true;
    fn_();
    return true;
}

void file_watch::arm() {
    sd_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                   [this](const boost::system::error_code& ec) {
                       if (ec) return;
                       char buf[4096];
                       while (::read(sd_.native_handle(), buf, sizeof buf) > 0) {
                       }
                       if (!fire_if_present()) arm();
                   });
}

exit_watch_pid::exit_watch_pid(boost::asio::io_context& io, pid_t pid, std::function<void()> fn)
    : sd_(io), fn_(std::move(fn)) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    BOOST_REQUIRE(fd >= 0);
    sd_.assign(fd);
    sd_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                   [this](const boost::system::error_code& ec) {
                       boost::system::error_code ignored;
                       sd_.close(ignored);
                       if (!ec) fn_();
                   });
}

temp_dir::temp_dir() {
    char templ[] = "/tmp/agentctl-exec-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(templ) != nullptr);
    path = templ;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

std::vector<pid_record> read_pidfiles(const std::string& dir) {
    std::vector<pid_record> out;
    for (auto& entry : std::filesystem::directory_iterator(dir)) {
        std::ifstream in(entry.path());
        pid_record r{};
        if (in >> r.pid >> r.start) out.push_back(r);
    }
    return out;
}

bool alive(const pid_record& p) {
    agentctl::exec::proc_stat st;
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!agentctl::exec::read_proc_stat(proc.get(), p.pid, st)) return false;
    return st.start == p.start && st.state != 'Z' && st.state != 'X';
}

namespace {

// Waits (bounded) for a process to be gone, through its pidfd. False if it is still running.
bool wait_gone(pid_t pid, int bound_ms) {
    unique_fd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!fd) return true;  // already gone
    pollfd p{fd.get(), POLLIN, 0};
    return ::poll(&p, 1, bound_ms) == 1;
}

}  // namespace

void kill_and_wait(const pid_record& p) {
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    agentctl::exec::proc_stat st;
    st.pid = p.pid;
    st.start = p.start;
    agentctl::exec::signal_verified(proc.get(), st, SIGKILL);
    BOOST_TEST(wait_gone(p.pid, 3000));
}

std::vector<pid_t> processes_with(const std::string& nonce) {
    std::vector<pid_t> out;
    std::error_code ec;  // these run in the fixture's destructor: never throw
    for (auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        auto name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string cmdline;
        if (!agentctl::exec::read_small_file(AT_FDCWD, (entry.path() / "cmdline").c_str(), cmdline)) continue;
        if (cmdline.find(nonce) != std::string::npos) out.push_back(std::stoi(name));
    }
    return out;
}

int zombie_children() {
    int count = 0;
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    std::error_code ec;
    for (auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        auto name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        agentctl::exec::proc_stat st;
        if (agentctl::exec::read_proc_stat(proc.get(), std::stoi(name), st) && st.ppid == ::getpid() &&
            st.state == 'Z') {
            ++count;
        }
    }
    return count;
}

int open_fd_count() {
    int count = 0;
    std::error_code ec;
    for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) ++count;
    return count - 1;  // the iterator's own fd
}

int leftover_cgroup_leaves() {
    std::string why;
    auto parent = agentctl::exec::discover_cgroup_parent(why);
    if (!parent) return 0;
    // Leaves of older versions sat directly in our cgroup; now they are in the owner
    // directory agentctl@PID-START-PIDNS, which must be gone too once the io_context is.
    std::string legacy = "agentctl-" + std::to_string(::getpid()) + "-";
    std::string owner = "agentctl@" + std::to_string(::getpid()) + "-";
    int count = 0;
    std::error_code ec;
    for (auto& entry : std::filesystem::directory_iterator(parent->path, ec)) {
        auto name = entry.path().filename().string();
        if (name.starts_with(legacy) || name.starts_with(owner)) ++count;
    }
    return count;
}

bool host_has_cgroup_v2() {
    static const bool yes = [] {
        std::string why;
        auto parent = agentctl::exec::discover_cgroup_parent(why);
        if (!parent) return false;
        agentctl::exec::cgroup_leaf leaf;
        std::string name = "agentctl-probe-" + std::to_string(::getpid());
        if (agentctl::exec::make_cgroup_leaf(*parent, name, leaf) != 0) return false;
        agentctl::exec::remove_cgroup_leaf(*parent, name);
        return true;
    }();
    return yes;
}

process_fixture::process_fixture() : baseline_fds(open_fd_count()) {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    std::ostringstream s;
    s << "nonce-" << ::getpid() << "-" << counter++ << "-" << std::hex << rd();
    nonce = s.str();
}

process_fixture::~process_fixture() {
    std::vector<pid_t> survivors;
    for (pid_t pid : processes_with(nonce)) {
        if (!wait_gone(pid, 3000)) survivors.push_back(pid);
    }
    BOOST_TEST(survivors.empty(), "processes carrying the nonce are still running: " << survivors.size());
    for (pid_t pid : survivors) {
        ::kill(pid, SIGKILL);
        wait_gone(pid, 3000);
    }
    BOOST_TEST(zombie_children() == 0);
    BOOST_TEST(open_fd_count() == baseline_fds);
    BOOST_TEST(leftover_cgroup_leaves() == 0);
}

}  // namespace exec_test
