#include "exec/channel.hpp"

#include "exec/observer.hpp"
#include "exec/owner.hpp"
#include "exec/service.hpp"
#include "exec/sys.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spawn.h>

#include <mutex>
#include <vector>

namespace asio = boost::asio;

namespace agentctl::exec {

namespace {

constexpr std::size_t stderr_tail_limit = 16 * 1024;
constexpr std::size_t read_size = 64 * 1024;

task_error spawn_problem(const std::string& what, int err) {
    return task_error{err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM
                          ? error_code::resource_exhausted
                          : error_code::spawn_error,
                      what + ": " + errno_text(err)};
}

}  // namespace

struct channel::impl : std::enable_shared_from_this<impl> {
    explicit impl(asio::any_io_executor e) : ex(e), in(e), out(e), err(e), pidfd(e), poll_timer(e) {}

    asio::any_io_executor ex;
    asio::posix::stream_descriptor in, out, err;
    asio::posix::stream_descriptor pidfd;
    asio::steady_timer poll_timer;  ///< wait_exit()'s bound, or its polling without a pidfd
    pid_t pid = -1;
    bool reaped = false;
    bool left_running = false;  ///< leave_running(): the watchdog's to see to its end
    std::optional<channel_end> ended;
    std::shared_ptr<tree_observer> observer;
    std::string pending;
    bool writing = false, close_when_flushed = false, write_failed = false, flush_posted = false;
    std::string err_tail;
    std::array<char, 4096> err_buffer{};

    // Writes what is queued, waiting for the pipe to take more; never raises SIGPIPE (an
    // embedding application may not ignore it): a reader gone is a write error like another.
    void flush() {
        if (writing || !in.is_open()) return;
        while (!pending.empty()) {
            ssize_t n = write_no_sigpipe(in.native_handle(), pending.data(), pending.size());
            if (n > 0) {
                pending.erase(0, static_cast<std::size_t>(n));
            } else if (n < 0 && errno == EAGAIN) {
                writing = true;
                in.async_wait(asio::posix::stream_descriptor::wait_write,
                              [self = shared_from_this()](const boost::system::error_code& ec) {
                                  self->writing = false;
                                  if (ec) return;  // closed
                                  self->flush();
                              });
                return;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                write_failed = true;
                close_in();
                return;
            }
        }
        if (close_when_flushed) close_in();
    }

    void close_in() {
        boost::system::error_code ignored;
        in.close(ignored);
        pending.clear();
    }

    void read_stderr() {
        err.async_read_some(asio::buffer(err_buffer),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                if (ec) return;
                                self->err_tail.append(self->err_buffer.data(), n);
                                if (self->err_tail.size() > stderr_tail_limit)
                                    self->err_tail.erase(0, self->err_tail.size() - stderr_tail_limit);
                                self->read_stderr();
                            });
    }

    // Reaps the program if it has exited (WNOHANG), or, with `block`, after SIGKILL.
    bool reap(bool block) {
        if (reaped) return true;
        siginfo_t si{};
        int flags = WEXITED | (block ? 0 : WNOHANG);
        int rc;
        while ((rc = sys_waitid(P_PID, pid, &si, flags, nullptr)) < 0 && errno == EINTR) {
        }
        if (rc < 0) {
            // Another waiter of this process took it: its status is lost.
            reaped = true;
            ended = channel_end{};
        } else if (si.si_pid == 0) {
            return false;
        } else {
            reaped = true;
            channel_end e;
            if (si.si_code == CLD_EXITED)
                e.exit_code = si.si_status;
            else
                e.signal = si.si_status;
            ended = e;
        }
        if (observer) observer->group_reaped(pid);
        observer.reset();
        return true;
    }

    // Programs left running (leave_running), until reaped. A pending wait on the executor would
    // keep the CLI's io_context running until srun ends, the very wait leave_running saves;
    // instead each start and each leave reaps those that ended, so an application that embeds
    // the library and runs one run after another keeps at most one run's worth of zombies, not
    // one per run. Never destroyed: nothing of it may outlive its io_context at exit.
    struct left_program {
        pid_t pid;
        std::weak_ptr<tree_observer> observer;
    };
    static inline std::mutex left_mutex;
    static inline auto* left_programs = new std::vector<left_program>;

    static void reap_left_programs() {
        std::lock_guard lock(left_mutex);
        std::erase_if(*left_programs, [](const left_program& p) {
            siginfo_t si{};
            int rc;
            while ((rc = sys_waitid(P_PID, p.pid, &si, WEXITED | WNOHANG, nullptr)) < 0 && errno == EINTR) {
            }
            if (rc == 0 && si.si_pid == 0) return false;  // still running
            if (auto o = p.observer.lock()) o->group_reaped(p.pid);
            return true;
        });
    }
};

channel::channel(std::shared_ptr<impl> i) : impl_(std::move(i)) {}

expected<std::unique_ptr<channel>> channel::start(asio::any_io_executor ex, const channel_command& command) {
    impl::reap_left_programs();
    auto i = std::make_shared<impl>(ex);
    unique_fd in_parent, in_child, out_parent, out_child, err_parent, err_child;
    if (int e = make_pipe(in_parent, in_child, false)) return spawn_problem("cannot create a pipe", e);
    if (int e = make_pipe(out_parent, out_child, true)) return spawn_problem("cannot create a pipe", e);
    if (int e = make_pipe(err_parent, err_child, true)) return spawn_problem("cannot create a pipe", e);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_child.get(), 0);
    posix_spawn_file_actions_adddup2(&actions, out_child.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, err_child.get(), 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> argv, envp;
    for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : command.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const std::uint64_t lo = boot_ticks_now();
    int rc = ::posix_spawn(&i->pid, command.executable.c_str(), &actions, &attr, argv.data(), envp.data());
    const std::uint64_t hi = boot_ticks_now();
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return spawn_problem("cannot start " + command.executable, rc);

    auto& ctx = asio::query(ex, asio::execution::context);
    i->observer = asio::use_service<exec_service>(ctx).observer();
    if (i->observer) i->observer->group_started(i->pid, lo, hi);
    auto result = std::unique_ptr<channel>(new channel(i));
    boost::system::error_code ec;
    i->in.assign(in_parent.release(), ec);
    if (!ec) i->out.assign(out_parent.release(), ec);
    if (!ec) i->err.assign(err_parent.release(), ec);
    if (ec) return task_error{error_code::resource_exhausted, "cannot watch a pipe: " + ec.message()};
    if (int fd = sys_pidfd_open(i->pid); fd >= 0) {
        i->pidfd.assign(fd, ec);
        if (ec) ::close(fd);
    }
    i->read_stderr();
    return result;
}

channel::~channel() {
    boost::system::error_code ignored;
    impl_->in.close(ignored);
    impl_->out.close(ignored);
    impl_->err.close(ignored);
    impl_->poll_timer.cancel();
    if (!impl_->reaped && !impl_->left_running) {
        // The group id is ours until the leader is reaped: no one else can own it here.
        ::kill(-impl_->pid, SIGKILL);
        impl_->reap(true);
    }
    impl_->pidfd.close(ignored);
}

asio::awaitable<std::string> channel::read_some() {
    auto self = impl_;
    std::string bytes(read_size, '\0');
    if (!self->out.is_open()) co_return std::string();
    auto [ec, n] =
        co_await self->out.async_read_some(asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
    bytes.resize(ec ? 0 : n);
    co_return bytes;
}

void channel::send(std::string bytes) {
    if (!impl_->in.is_open() || impl_->close_when_flushed) return;
    impl_->pending += bytes;
    // What is sent in one turn of the loop goes out in one write: through srun each write
    // becomes a segment of its own, and a small one behind another waits for that one's
    // acknowledgement, tens of milliseconds (docs/WORKER.md, "The channel").
    if (impl_->flush_posted) return;
    impl_->flush_posted = true;
    asio::post(impl_->ex, [self = impl_->shared_from_this()] {
        self->flush_posted = false;
        self->flush();
    });
}

bool channel::write_failed() const {
    return impl_->write_failed;
}

void channel::close_input() {
    impl_->close_when_flushed = true;
    impl_->flush();
}

void channel::kill() {
    if (!impl_->reaped) ::kill(-impl_->pid, SIGKILL);
}

bool channel::leave_running() {
    if (impl_->reaped) return true;
    if (!impl_->observer || !impl_->observer->sees_to_leftovers()) return false;
    impl_->left_running = true;
    boost::system::error_code ignored;
    impl_->in.close(ignored);
    impl_->pending.clear();
    impl_->out.close(ignored);
    impl_->err.close(ignored);
    impl_->pidfd.close(ignored);
    impl::reap_left_programs();
    std::lock_guard lock(impl::left_mutex);
    impl::left_programs->push_back({impl_->pid, impl_->observer});
    return true;
}

asio::awaitable<std::optional<channel_end>> channel::wait_exit(std::chrono::milliseconds bound) {
    auto self = impl_;
    auto deadline = std::chrono::steady_clock::now() + bound;
    // Readiness of the pidfd says it exited; without one, waitid every 10 ms.
    while (!self->reap(false) && std::chrono::steady_clock::now() < deadline) {
        if (self->pidfd.is_open()) {
            self->poll_timer.expires_at(deadline);
            self->poll_timer.async_wait([self](const boost::system::error_code& ec) {
                if (!ec) self->pidfd.cancel();
            });
            co_await self->pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                                            asio::as_tuple(asio::use_awaitable));
            self->poll_timer.cancel();
        } else {
            self->poll_timer.expires_after(std::chrono::milliseconds(10));
            co_await self->poll_timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
    }
    if (!self->reaped) co_return std::nullopt;
    co_return self->ended;
}

std::string channel::stderr_tail() const {
    return impl_->err_tail;
}

int channel::pid() const {
    return impl_->pid;
}

}  // namespace agentctl::exec
