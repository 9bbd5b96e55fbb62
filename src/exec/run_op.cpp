#include "exec/run_op.hpp"

#include "exec/owner.hpp"

#include "exec/tree.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace agentctl {

namespace detail {

void async_run_process_impl(boost::asio::any_io_executor ex, process_request request,
                            boost::asio::any_completion_handler<void(process_result)> handler) {
    auto& ctx = boost::asio::query(ex, boost::asio::execution::context);
    auto& svc = boost::asio::use_service<exec::exec_service>(ctx);
    if (!svc.reactor_ready()) {
        // Asio creates its reactor (epoll, eventfd, timerfd) with the first I/O object and
        // throws if it cannot (EMFILE). Do it here, while the handler is still ours to complete.
        try {
            boost::asio::steady_timer first(ex);
            svc.reactor_created();
        } catch (const std::exception& e) {
            process_result result;
            result.error = error_code::resource_exhausted;
            result.error_message = std::string("cannot set up the I/O reactor: ") + e.what();
            boost::asio::post(ex, boost::asio::append(std::move(handler), std::move(result)));
            return;
        }
    }
    (new exec::run_op(svc, std::move(ex), std::move(request), std::move(handler)))->start();
}

}  // namespace detail

void use_housekeeping_executor(boost::asio::execution_context& ctx, boost::asio::any_io_executor helper) {
    boost::asio::use_service<exec::exec_service>(ctx).set_housekeeper(std::move(helper));
}

void use_spawn_executor(boost::asio::execution_context& ctx, boost::asio::any_io_executor spawner) {
    boost::asio::use_service<exec::exec_service>(ctx).set_spawner(std::move(spawner));
}

namespace exec {

namespace {

using boost::asio::cancellation_type;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using wait_type = boost::asio::posix::descriptor_base::wait_type;

constexpr std::size_t initial_capacity = 1024;
constexpr std::size_t growth_step = 64 * 1024;
constexpr std::size_t big_pipe = 1024 * 1024;
constexpr int reads_per_event = 4;  // then yield to the reactor, so a flood cannot starve timers
constexpr std::size_t populate_min = 16 * 1024;  // fewer bytes take their few page faults
constexpr milliseconds longest_timer = std::chrono::hours(24 * 365 * 100);  // now() + this cannot overflow
constexpr auto tree_wait_bound = std::chrono::seconds(1);
constexpr auto poll_delay_max = milliseconds(50);

// Clamped in milliseconds, before the conversion to the clock's nanoseconds could overflow.
steady_clock::duration timer_duration(milliseconds d) {
    return std::min(d, longest_timer);
}

std::string validate(const process_request& r) {
    auto nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
    if (r.executable.empty() || r.executable.front() != '/') return "the executable must be an absolute path";
    if (nul(r.executable)) return "the executable path contains a NUL byte";
    if (r.argv.empty()) return "argv must hold at least argv[0]";
    for (std::size_t i = 0; i < r.argv.size(); ++i) {
        if (nul(r.argv[i])) return "argument " + std::to_string(i) + " contains a NUL byte";
    }
    for (std::size_t i = 0; i < r.env.size(); ++i) {
        auto eq = r.env[i].find('=');
        if (eq == std::string::npos || eq == 0)
            return "environment entry " + std::to_string(i) + " is not NAME=value";
        if (nul(r.env[i])) return "environment entry " + std::to_string(i) + " contains a NUL byte";
    }
    if (nul(r.cwd_display)) return "the working directory contains a NUL byte";
    if (r.stdout_limit < 1 || r.stderr_limit < 1 || r.combined_limit < 1) return "output limits must be >= 1";
    if (r.timeout.count() <= 0) return "the timeout must be > 0";
    if (r.kill_grace.count() < 0 || r.drain_grace.count() < 0) return "grace periods must be >= 0";
    return {};
}

std::uint64_t micros(const timeval& tv) {
    return static_cast<std::uint64_t>(tv.tv_sec) * 1000000u + static_cast<std::uint64_t>(tv.tv_usec);
}

// Maps in, with one call, the whole pages of [dst, dst + len) that the bytes already queued in
// the pipe will fill, instead of one page fault per 4 KiB inside read() (under the pipe's
// lock, while the writer waits). Only what is queued: a capture's room past its data stays
// untouched, so memory is still what the run keeps (docs/CAPTURE.md, "Fresh memory"). Pages
// already mapped (a buffer the allocator reused) cost a page-table walk. Best effort: a kernel
// without MADV_POPULATE_WRITE (before 5.14) says EINVAL once and the reads fault as before.
void populate_for_read(int fd, char* dst, std::size_t len) {
    static std::atomic<bool> unsupported{false};
    if (unsupported.load(std::memory_order_relaxed)) return;
    int queued = 0;
    if (::ioctl(fd, FIONREAD, &queued) != 0 || queued <= 0) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto at = reinterpret_cast<std::uintptr_t>(dst);
    std::uintptr_t begin = (at + page - 1) & ~(page - 1);
    std::uintptr_t end = (at + std::min(len, static_cast<std::size_t>(queued))) & ~(page - 1);
    if (end < begin + populate_min) return;
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        unsupported.store(true, std::memory_order_relaxed);
}

}  // namespace

run_op::run_op(exec_service& svc, boost::asio::any_io_executor ex, process_request request,
               handler_type handler)
    : svc_(svc),
      ex_(std::move(ex)),
      req_(std::move(request)),
      handler_(std::move(handler)),
      out_(ex_),
      err_(ex_),
      pidfd_sd_(ex_),
      timer_(ex_) {}

run_op::~run_op() {
    svc_.release_window(this);
    if (handler_) {
        auto slot = boost::asio::get_associated_cancellation_slot(handler_);
        if (slot.is_connected()) slot.clear();
    }
}

void run_op::start() {
    if (auto problem = validate(req_); !problem.empty()) {
        result_.outcome = process_outcome::spawn_failed;
        result_.error = error_code::invalid_request;
        result_.error_message = std::move(problem);
        auto handler = std::move(handler_);
        auto result = std::move(result_);
        auto ex = ex_;
        delete this;
        boost::asio::post(ex, boost::asio::append(std::move(handler), std::move(result)));
        return;
    }
    out_.cap = req_.stdout_limit;
    out_.name = "stdout";
    err_.cap = req_.stderr_limit;
    err_.name = "stderr";
    handler_work_ = boost::asio::prefer(boost::asio::get_associated_executor(handler_, ex_),
                                        boost::asio::execution::outstanding_work.tracked);
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.assign([this](cancellation_type type) { on_cancel(type); });
    svc_.attach(*this);
    svc_.enqueue(*this, ex_);
}

// ---------------------------------------------------------------------------------------------
// Spawning: runs on the pump, possibly on another thread of the same context.

void run_op::spawn(const boost::asio::any_io_executor& pump_ex) {
    started_ = steady_clock::now();
    // On a spawner thread nothing else waits to run meanwhile: the spawn waits for the exec
    // there, so that a failed one gives its descriptors back at once.
    const bool on_runs_executor = ex_ == pump_ex;
    for (int attempt = 0; attempt < 2; ++attempt) {
        retry_without_cgroup_ = false;
        if (prepare_and_clone(on_runs_executor) || !retry_without_cgroup_) break;
    }
    if (!spawn_failure_) {
        // The child has exec'd: argv and env are no longer needed; free them now. (Not yet
        // when it may still be reading them: clone_how::wait_for_exec.)
        if (!exec_unconfirmed_) {
            req_.argv = {};
            req_.env = {};
        }
    } else {
        // Nothing ran: its descriptors go now, not when the run's executor gets to it (a
        // spawner can be hundreds of failed spawns ahead of it).
        out_fd_.reset();
        err_fd_.reset();
        in_fd_.reset();
    }
    if (on_runs_executor) {
        continue_after_spawn();
    } else {
        ++pending_;
        boost::asio::post(ex_, [this] {
            --pending_;
            continue_after_spawn();
        });
    }
}

bool run_op::prepare_and_clone(bool overlap_exec) {
    exec_unconfirmed_ = false;
    unique_fd out_child, err_child, in_child, procs;
    auto fail = [this](const char* what, int err) {
        spawn_failure_ = describe_parent_failure(what, err);
        return false;
    };
    struct sigaction chld {};
    if (::sigaction(SIGCHLD, nullptr, &chld) == 0 &&
        (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT) != 0)) {
        // The kernel would reap the child at exit: no status, and its pid (our process group
        // id) free for reuse while we still kill the group.
        spawn_failure_ =
            spawn_failure{error_code::sigchld_ignored,
                          "SIGCHLD is ignored (SIG_IGN or SA_NOCLDWAIT) in this process: the kernel "
                          "would reap the child before its exit status can be read"};
        return false;
    }
    // The previous child may still read the scratch and run on the stack (clone_how::wait_for_exec).
    svc_.wait_stack_free();
    const char* path = svc_.stage(req_.executable, req_.argv, req_.env);
    // The file to run, pinned now: the child execs this descriptor, not the path (a rename over
    // the path from here on changes nothing), and it must be the file the caller resolved.
    unique_fd exe(::open(path, O_PATH | O_CLOEXEC));
    if (exe && req_.executable_identity) {
        struct stat st {};
        if (::fstat(exe.get(), &st) != 0 ||
            file_identity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)} !=
                *req_.executable_identity) {
            spawn_failure_ = spawn_failure{
                error_code::executable_changed,
                "'" + req_.executable + "' no longer names the file it was resolved to (replaced since)"};
            return false;
        }
    }
    // pass_output: the child writes where we write; nothing to read, so no pipe.
    if (!req_.pass_output) {
        if (int err = make_pipe(out_fd_, out_child, true)) return fail("cannot create the stdout pipe", err);
        if (int err = make_pipe(err_fd_, err_child, true)) return fail("cannot create the stderr pipe", err);
    }
    int stdin_fd = -1;
    if (req_.stdin_data && !req_.stdin_data->empty()) {
        if (int err = make_pipe(in_fd_, in_child, false)) return fail("cannot create the stdin pipe", err);
        // Write what fits now: our read end is still open, so this cannot raise SIGPIPE.
        stdin_offset_ = 0;
        const std::string& data = *req_.stdin_data;
        while (stdin_offset_ < data.size()) {
            ssize_t n = ::write(in_fd_.get(), data.data() + stdin_offset_, data.size() - stdin_offset_);
            if (n > 0) {
                stdin_offset_ += static_cast<std::size_t>(n);
            } else if (n < 0 && errno != EINTR) {
                break;
            }
        }
        if (stdin_offset_ == data.size()) in_fd_.reset();
        stdin_fd = in_child.get();
    } else {
        int err = 0;
        stdin_fd = svc_.dev_null(err);
        if (stdin_fd < 0) return fail("cannot open /dev/null", err);
    }
    if (req_.containment == containment_policy::automatic && !leaf_) leaf_ = svc_.acquire_leaf();

    plan_ = child_plan{};
    auto& plan = plan_;
    plan.path = path;
    plan.exe_fd = exe.get();
    plan.argv = svc_.staged_argv();
    plan.envp = svc_.staged_envp();
    plan.stdio[0] = stdin_fd;
    plan.stdio[1] = req_.pass_output ? STDOUT_FILENO : out_child.get();
    plan.stdio[2] = req_.pass_output ? STDERR_FILENO : err_child.get();
    plan.cwd_fd = req_.cwd_fd;

    // clone3(CLONE_PIDFD | CLONE_INTO_CGROUP) where the kernel (>= 5.7) and seccomp allow it;
    // the forced fallbacks of exit_watch take the path of older kernels: glibc clone(), the
    // child joining its cgroup itself, pidfd_open() or polling.
    clone_result c;
    bool legacy = req_.watch != exit_watch::automatic || !svc_.clone3_supported();
    if (!legacy) {
        // The child's descriptors go to the window at the low end of our table; the child
        // shares the table and copies that end only, not the pipes of every run in flight
        // (docs/DESIGN.md, "The child's descriptor table").
        exec_service::window_fds mine{plan.stdio[0], req_.pass_output ? -1 : plan.stdio[1],
                                      req_.pass_output ? -1 : plan.stdio[2], plan.exe_fd, plan.cwd_fd};
        exec_service::window_fds slots{};
        plan.unshare_below = svc_.fill_window(this, mine, slots);
        if (plan.unshare_below > 0) {
            plan.stdio[0] = slots[0];
            if (!req_.pass_output) {
                plan.stdio[1] = slots[1];
                plan.stdio[2] = slots[2];
            }
            plan.exe_fd = slots[3];
            plan.cwd_fd = slots[4];
        }
    }
    // The child's start time falls between this and the moment clone returns.
    const std::uint64_t clone_ticks = boot_ticks_now();
    if (!legacy) {
        // Born in its leaf, the child is contained before it runs a single instruction, so
        // the spawn need not wait for its exec (docs/DESIGN.md, "Spawn"): this thread goes on
        // while the child execs, and its failure, if any, is read when it exits. In a process
        // group it would be outside its own group until its setsid(): that spawn waits.
        bool wait = !leaf_ || !overlap_exec;
        c = clone_child(
            plan, svc_.stack(), exec_service::stack_size,
            {true, true, leaf_ ? leaf_->dir.get() : -1, wait, wait ? nullptr : svc_.stack_in_use()});
        exec_unconfirmed_ = c.pid >= 0 && !wait;
        if (c.pid < 0 && c.error != EAGAIN && c.error != ENOMEM) {
            // ENOSYS (< 5.3, or a seccomp profile), EINVAL/E2BIG (no CLONE_INTO_CGROUP before
            // 5.7): use clone() from now on. Other errors may be the cgroup's: retry once.
            if (c.error == ENOSYS || c.error == EINVAL || c.error == E2BIG) svc_.clone3_refused();
            legacy = true;
        }
    }
    if (legacy) {
        if (leaf_) procs.reset(::openat(leaf_->dir.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
        if (leaf_ && !procs) {
            svc_.release_leaf(std::move(*leaf_), true);
            leaf_.reset();
        }
        plan.cgroup_procs_fd = procs.get();
        plan.unshare_below = 0;  // a copy of the whole table: the window's slots are in it too
        bool want_pidfd = req_.watch == exit_watch::automatic && svc_.clone_pidfd_supported();
        c = clone_child(plan, svc_.stack(), exec_service::stack_size, {false, want_pidfd, -1});
        if (c.pid < 0 && c.error == EINVAL && want_pidfd) {
            svc_.clone_pidfd_refused();  // Linux < 5.2: fall back to pidfd_open()
            c = clone_child(plan, svc_.stack(), exec_service::stack_size, {false, false, -1});
        }
    }
    if (c.pid < 0) {
        svc_.release_window(this);
        if (leaf_) svc_.release_leaf(std::move(*leaf_), true);
        leaf_.reset();
        return fail("cannot create the child process", c.error);
    }
    unique_fd pidfd(c.pidfd);
    if (!exec_unconfirmed_ && plan.failed_step != 0) {
        // The child called _exit(127) instead of exec'ing and is exiting right now: this wait
        // is bounded by its exit, unlike a wait for a running program.
        siginfo_t si{};
        while (sys_waitid(P_PID, c.pid, &si, WEXITED, nullptr) < 0 && errno == EINTR) {
        }
        auto step = static_cast<spawn_step>(plan.failed_step);
        if (leaf_) svc_.release_leaf(std::move(*leaf_), true);
        leaf_.reset();
        if (step == spawn_step::cgroup) {
            // This host lets us create leaves but not move into them: use the process group.
            svc_.disable_cgroups();
            retry_without_cgroup_ = true;
        }
        spawn_failure_ = describe_child_failure(step, plan.failed_errno, req_.executable, req_.argv, req_.env,
                                                req_.cwd_display);
        return false;
    }
    spawn_failure_.reset();
    pid_ = c.pid;
    start_lo_ = clone_ticks;
    start_hi_ = boot_ticks_now();
    if (!pidfd && req_.watch != exit_watch::polling && svc_.pidfd_supported()) {
        // The pid cannot be reused before we reap it, so this pidfd is the child's.
        pidfd.reset(sys_pidfd_open(pid_));
        if (!pidfd && (errno == ENOSYS || errno == EPERM)) svc_.pidfd_refused();
    }
    use_pidfd_ = static_cast<bool>(pidfd);
    pidfd_fd_ = std::move(pidfd);
    result_.used = leaf_ ? containment::cgroup : containment::process_group;
    if (!leaf_) {
        // No cgroup holds this tree: a watchdog can only find it by its leader.
        observer_ = svc_.observer();
        if (observer_) observer_->group_started(pid_, start_lo_, start_hi_);
    }
    return true;
}

void run_op::continue_after_spawn() {
    auto pending_cancel_type = svc_.take_pending_cancel(*this);
    if (spawn_failure_) {
        cause_ = process_outcome::spawn_failed;
        result_.error = spawn_failure_->code;
        result_.error_message = spawn_failure_->message;
        out_fd_.reset();
        err_fd_.reset();
        in_fd_.reset();
        phase_ = phase::finishing;
        maybe_complete();
        return;
    }
    phase_ = phase::running;
    if (req_.on_started) {
        process_started started;
        started.pid = pid_;
        started.start_lo = start_lo_;
        started.start_hi = start_hi_;
        if (leaf_) started.cgroup = svc_.leaf_path(*leaf_);
        req_.on_started(started);
    }
    boost::system::error_code ec;
    auto adopt = [&ec](boost::asio::posix::stream_descriptor& sd, unique_fd& fd) {
        sd.assign(fd.get(), ec);
        if (!ec) fd.release();
        return !ec;
    };
    if (use_pidfd_ && !adopt(pidfd_sd_, pidfd_fd_)) {
        pidfd_fd_.reset();
        use_pidfd_ = false;
    }
    bool watched = req_.pass_output || (adopt(out_.sd, out_fd_) && adopt(err_.sd, err_fd_));
    out_.open = out_.sd.is_open();
    err_.open = err_.sd.is_open();
    out_fd_.reset();
    err_fd_.reset();
    if (in_fd_) {
        stdin_sd_.emplace(ex_);
        if (adopt(*stdin_sd_, in_fd_)) {
            start_stdin();
        } else {
            stdin_sd_.reset();
            in_fd_.reset();
        }
    }
    if (out_.open) start_output(out_);
    if (err_.open) start_output(err_);
    watch_exit();
    // The timeout counts from the start of the spawn, as `duration` does.
    arm_timer(timer_kind::deadline, timer_duration(req_.timeout) - (steady_clock::now() - started_));
    if (!watched) {
        // The reactor cannot watch a pipe (epoll limits): do not leave a child we cannot read.
        cause_ = process_outcome::spawn_failed;
        result_.error = error_code::resource_exhausted;
        result_.error_message = "cannot watch the child's output pipes: " + ec.message();
        terminate(true);
    }
    if (pending_cancel_type != cancellation_type::none) handle_cancel(pending_cancel_type);
}

// ---------------------------------------------------------------------------------------------
// Output

void run_op::start_output(stream_state& s) {
    ++pending_;
    s.sd.async_wait(wait_type::wait_read,
                    [this, &s](const boost::system::error_code& ec) { on_readable(s, ec); });
}

bool run_op::handler_entry() {
    --pending_;
    if (phase_ == phase::finishing) {
        maybe_complete();
        return false;
    }
    return true;
}

void run_op::on_readable(stream_state& s, const boost::system::error_code& ec) {
    if (!handler_entry() || !s.open) return;
    if (ec) {
        close_stream(s);
    } else {
        drain(s);
    }
    if (phase_ == phase::finishing) return;
    if (s.open) {
        start_output(s);
    } else if (phase_ == phase::draining && !out_.open && !err_.open) {
        finish();
    }
}

// Reads directly into the capture buffer while there is budget, else into the shared discard
// buffer (any byte there is an overflow). A short read means the pipe is empty for now.
void run_op::drain(stream_state& s) {
    for (int i = 0; i < reads_per_event && s.open && phase_ != phase::finishing; ++i) {
        std::uint64_t stream_room = s.cap - s.buf.size();
        std::uint64_t combined_room = req_.combined_limit - (out_.buf.size() + err_.buf.size());
        std::uint64_t budget = std::min(stream_room, combined_room);
        std::size_t len = 0;
        char* dst = nullptr;
        if (budget > 0) {
            dst = room_for(s, budget, len);
            // Past its first 64 KiB a capture has its room up to the cap: new memory.
            if (s.buf.size() >= growth_step) populate_for_read(s.sd.native_handle(), dst, len);
        } else {
            auto discard = svc_.discard_buffer();
            dst = discard.data();
            len = discard.size();
        }
        ssize_t n = ::read(s.sd.native_handle(), dst, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) close_stream(s);
            return;
        }
        if (n == 0) {
            close_stream(s);
            return;
        }
        auto got = static_cast<std::uint64_t>(n);
        // What read() wrote into the room becomes part of the capture, up to the budget.
        if (budget > 0) s.buf.grow(static_cast<std::size_t>(std::min(got, budget)));
        if (got <= budget) {
            if (!s.pipe_grown && s.buf.size() >= growth_step && budget - got >= 4 * growth_step) {
                // A chatty stream: a bigger pipe means fewer wakeups for both sides.
                s.pipe_grown = true;
                ::fcntl(s.sd.native_handle(), F_SETPIPE_SZ, static_cast<int>(big_pipe));
            }
        } else {
            record_overflow(s, stream_room, combined_room);
        }
        if (static_cast<std::size_t>(n) < len) return;
    }
}

// Reads land directly in the result string, in its capacity past size(): json::string::grow()
// then takes in what read() wrote, so no byte is zero-filled first (docs/CAPTURE.md). A quiet
// stream costs 1 KiB; one that passes 64 KiB reserves up to its cap at once (address space
// only: pages are touched as the data arrives), so a large capture is never copied to grow.
char* run_op::room_for(stream_state& s, std::size_t budget, std::size_t& len) {
    std::size_t size = s.buf.size();
    // One byte past the budget tells "exactly at the cap" from "over it" in the same read.
    std::size_t limit = size + budget + 1;
    if (s.buf.capacity() == size || s.buf.capacity() < initial_capacity) {
        std::size_t next = size < initial_capacity ? initial_capacity
                           : size < growth_step    ? growth_step
                                                   : limit;
        s.buf.reserve(std::min(next, limit));  // more than size: next and limit both are
    }
    len = std::min(s.buf.capacity(), limit) - size;
    return s.buf.data() + size;
}

void run_op::record_overflow(stream_state& s, std::uint64_t stream_room, std::uint64_t combined_room) {
    if (!cause_) {
        bool combined = combined_room <= stream_room;
        result_.limit_stream = combined ? "combined output" : s.name;
        result_.limit_bytes = combined ? req_.combined_limit : s.cap;
        cause_ = process_outcome::output_limit_exceeded;
    }
    terminate(true);
}

void run_op::close_stream(stream_state& s) {
    s.open = false;
    boost::system::error_code ignored;
    s.sd.close(ignored);
}

// ---------------------------------------------------------------------------------------------
// Stdin (only with stdin_data larger than what fitted in the pipe before the spawn)

void run_op::start_stdin() {
    ++pending_;
    stdin_sd_->async_wait(wait_type::wait_write,
                          [this](const boost::system::error_code& ec) { on_stdin_writable(ec); });
}

void run_op::on_stdin_writable(const boost::system::error_code& ec) {
    if (!handler_entry() || !stdin_sd_) return;
    const std::string& data = *req_.stdin_data;
    while (!ec && stdin_offset_ < data.size()) {
        ssize_t n = write_no_sigpipe(stdin_sd_->native_handle(), data.data() + stdin_offset_,
                                     data.size() - stdin_offset_);
        if (n > 0) {
            stdin_offset_ += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
            start_stdin();
            return;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break;  // EPIPE: the child closed its stdin; the rest is not wanted
        }
    }
    boost::system::error_code ignored;
    stdin_sd_->close(ignored);
    stdin_sd_.reset();
}

// ---------------------------------------------------------------------------------------------
// Exit of the leader

void run_op::watch_exit() {
    ++pending_;
    if (use_pidfd_) {
        // Readiness is only a hint: check_exited() asks waitid(WNOHANG) and we re-arm if the
        // child is still running.
        pidfd_sd_.async_wait(wait_type::wait_read,
                             [this](const boost::system::error_code& ec) { on_exit_event(ec); });
        return;
    }
    if (!poll_timer_) poll_timer_.emplace(ex_);
    poll_timer_->expires_after(poll_delay_);
    poll_delay_ = std::min(poll_delay_ * 2, poll_delay_max);
    poll_timer_->async_wait([this](const boost::system::error_code& ec) { on_exit_event(ec); });
}

void run_op::on_exit_event(const boost::system::error_code& ec) {
    if (!handler_entry() || exited_) return;
    if (ec == boost::asio::error::operation_aborted) return;
    if (ec && use_pidfd_) {
        use_pidfd_ = false;  // the pidfd cannot be watched: poll instead
        boost::system::error_code ignored;
        pidfd_sd_.close(ignored);
    }
    if (check_exited()) {
        leader_exited();
    } else {
        watch_exit();
    }
}

bool run_op::check_exited() {
    siginfo_t si{};
    int rc = use_pidfd_
                 ? sys_waitid(P_PIDFD, pidfd_sd_.native_handle(), &si, WEXITED | WNOHANG | WNOWAIT, nullptr)
                 : sys_waitid(P_PID, pid_, &si, WEXITED | WNOHANG | WNOWAIT, nullptr);
    if (rc < 0) {
        if (errno != ECHILD) return false;
        // Someone else in this process (a SIGCHLD handler waiting for any child) reaped our child:
        // its status is lost and its pid, hence its process group id, may be reused already.
        reaped_ = true;
        result_.error = error_code::exit_status_lost;
        result_.error_message = "the exit status was collected by another waiter in this process";
        return true;
    }
    if (si.si_pid == 0) return false;
    switch (si.si_code) {
        case CLD_EXITED:
            result_.exit_code = si.si_status;
            return true;
        case CLD_DUMPED:
            result_.core_dumped = true;
            [[fallthrough]];
        case CLD_KILLED:
            result_.signal = si.si_status;
            return true;
        default:
            return false;
    }
}

void run_op::leader_exited() {
    exited_ = true;
    // Our copies of its pipe ends (the window's) must not hold back their EOF.
    svc_.release_window(this);
    if (exec_unconfirmed_ && plan_.failed_step != 0) {
        // It never exec'd (the spawn did not wait for it): nothing ran, whatever else happened
        // meanwhile (a timeout, a cancellation) and whatever status _exit gave.
        auto failure = describe_child_failure(static_cast<spawn_step>(plan_.failed_step), plan_.failed_errno,
                                              req_.executable, req_.argv, req_.env, req_.cwd_display);
        cause_ = process_outcome::spawn_failed;
        result_.error = failure.code;
        result_.error_message = std::move(failure.message);
    }
    exec_unconfirmed_ = false;
    if (phase_ == phase::finishing) return;
    phase_ = phase::draining;
    if ((!out_.open && !err_.open) || req_.drain_grace.count() == 0) {
        finish();
    } else {
        // Descendants may still hold the pipes: read for a bounded time, never until EOF.
        arm_timer(timer_kind::drain, timer_duration(req_.drain_grace));
    }
}

// ---------------------------------------------------------------------------------------------
// Timers and cancellation

void run_op::arm_timer(timer_kind kind, steady_clock::duration d) {
    timer_kind_ = kind;
    auto gen = ++timer_gen_;
    timer_.expires_after(d);  // cancels a previous wait; its handler sees a stale generation
    ++pending_;
    timer_.async_wait([this, gen](const boost::system::error_code& ec) { on_timer(gen, ec); });
}

void run_op::on_timer(std::uint64_t gen, const boost::system::error_code& ec) {
    --pending_;
    if (gen != timer_gen_ || ec) {
        if (phase_ == phase::finishing) maybe_complete();
        return;
    }
    switch (timer_kind_) {
        case timer_kind::deadline:
            if (phase_ != phase::running) return;
            if (check_exited()) {
                // It exited in time; we had not seen the event yet.
                leader_exited();
                return;
            }
            set_cause(process_outcome::timed_out);
            terminate(false);
            break;
        case timer_kind::grace:
            if (phase_ != phase::terminating) return;
            kill_tree();
            phase_ = phase::killing;
            break;
        case timer_kind::drain:
            finish();
            break;
        case timer_kind::tree_wait:
            poll_tree_gone();
            break;
    }
}

void run_op::on_cancel(cancellation_type type) {
    in_cancel_ = true;
    if (phase_ == phase::waiting) {
        if (svc_.withdraw(*this, type)) {
            set_cause(process_outcome::cancelled);
            result_.error_message = "cancelled before the process was spawned";
            phase_ = phase::finishing;
            maybe_complete();
        }
        // else: the pump is spawning it on another thread; continue_after_spawn() handles it.
    } else {
        handle_cancel(type);
    }
    in_cancel_ = false;
}

void run_op::handle_cancel(cancellation_type type) {
    if (phase_ == phase::finishing) return;
    if (!exited_ && check_exited()) leader_exited();
    if (phase_ == phase::finishing) return;
    if (exited_) {
        // The leader already exited on its own: its result stands; stop draining now.
        finish();
        return;
    }
    set_cause(process_outcome::cancelled);
    terminate((type & cancellation_type::terminal) != cancellation_type::none);
}

void run_op::set_cause(process_outcome cause) {
    if (!cause_) cause_ = cause;
}

// ---------------------------------------------------------------------------------------------
// Killing the tree

void run_op::terminate(bool kill_now) {
    if (phase_ == phase::finishing || phase_ == phase::killing) return;
    if (exited_) {
        finish();
        return;
    }
    if (kill_now || req_.kill_grace.count() == 0) {
        kill_tree();
        phase_ = phase::killing;
        ++timer_gen_;
        timer_.cancel();
        return;
    }
    if (phase_ == phase::running) {
        signal_tree(SIGTERM);
        phase_ = phase::terminating;
        arm_timer(timer_kind::grace, timer_duration(req_.kill_grace));
    }
}

// Process-group containment: who is in the tree. While the leader lives, its descendants
// (through parent links) and the group's members; once it exited, the group's members only
// (its orphans were reparented). Everyone found is remembered, so that the final SIGKILL and
// the wait at completion reach them even after the leader exited.
void run_op::scan_members() {
    if (reaped_) return;  // the group id may belong to someone else now
    auto found = !exited_ && svc_.children_files() ? walk_children(svc_.proc_fd(), pid_)
                                                   : tree_members(*svc_.proc_snapshot(), pid_);
    for (auto& p : found) {
        note_killed(p.pid);
        bool known = std::any_of(members_.begin(), members_.end(),
                                 [&](const proc_stat& m) { return m.pid == p.pid && m.start == p.start; });
        if (!known) members_.push_back(p);
    }
}

// The graceful step of the ladder: SIGTERM then SIGCONT (a stopped process must wake up to
// act on it) to every member; the group through kill(-pgid), escaped members one by one.
void run_op::signal_tree(int sig) {
    // Find the members first (the leader may die of the signal and orphan them), then signal
    // the group in one call, then the members that left it.
    std::vector<proc_stat> escaped;
    if (leaf_) {
        for (auto& p : stat_all(svc_.proc_fd(), leaf_procs(*leaf_), pid_)) {
            note_killed(p.pid);
            if (p.pgrp != pid_ || reaped_) escaped.push_back(p);
        }
    } else {
        scan_members();
        for (auto& p : members_) {
            if (p.pgrp != pid_ || reaped_) escaped.push_back(p);
        }
    }
    if (!reaped_) {
        // The leader is not reaped yet, so no other process can own this group id.
        ::kill(-pid_, sig);
        ::kill(-pid_, SIGCONT);
    }
    for (auto& p : escaped) {
        if (signal_verified(svc_.proc_fd(), p, sig)) signal_verified(svc_.proc_fd(), p, SIGCONT);
    }
}

void run_op::kill_tree() {
    if (leaf_) {
        bool others = false;
        for (pid_t p : leaf_procs(*leaf_)) {
            if (p != pid_) {
                note_killed(p);
                others = true;
            }
        }
        if (!others && !exited_) {
            // The leader alone: its pidfd is enough, and the leaf stays reusable. Should it
            // fork in between, finish() finds the leaf populated and uses cgroup.kill.
            if (use_pidfd_ ? sys_pidfd_send_signal(pidfd_sd_.native_handle(), SIGKILL) == 0
                           : ::kill(pid_, SIGKILL) == 0) {
                return;
            }
        }
        leaf_killed_ = true;
        if (cgroup_kill(leaf_->dir.get()) == 0) return;
    }
    scan_members();
    kill_members();
}

// SIGKILL to the group and to every remembered member; keeps a pidfd of each member so that
// completion can wait until they are gone.
void run_op::kill_members() {
    // The group first, in one call: killing a child first would let a waiting parent (a shell)
    // run on and exit by itself before its own SIGKILL.
    if (!reaped_) ::kill(-pid_, SIGKILL);
    for (auto& p : members_) {
        unique_fd fd(sys_pidfd_open(p.pid));
        proc_stat now;
        if (!fd || !read_proc_stat(svc_.proc_fd(), p.pid, now) || now.start != p.start) continue;
        sys_pidfd_send_signal(fd.get(), SIGKILL);
        dying_.push_back(std::move(fd));
    }
    members_.clear();
}

void run_op::note_killed(pid_t pid) {
    if (std::find(killed_.begin(), killed_.end(), pid) == killed_.end()) killed_.push_back(pid);
}

// ---------------------------------------------------------------------------------------------
// Completion

// The leader has exited (or its exit was observed as lost). Kill what is left of its tree,
// stop reading, wait (bounded) until the tree is gone, then reap the leader: only now, so that
// its pid kept the group id ours until the kill.
void run_op::finish() {
    if (phase_ == phase::finishing) return;
    phase_ = phase::finishing;
    ++timer_gen_;
    timer_.cancel();
    if (poll_timer_) poll_timer_->cancel();
    if (leaf_) {
        leaf_empty_ = !leaf_populated(*leaf_).value_or(true);
        if (!leaf_empty_) kill_tree();
    } else {
        // Someone still holding the pipes is worth a scan (to count it, and escaped members).
        if (out_.open || err_.open) scan_members();
        kill_members();
    }
    close_stream(out_);
    close_stream(err_);
    if (stdin_sd_) {
        boost::system::error_code ignored;
        stdin_sd_->close(ignored);
        stdin_sd_.reset();
    }
    if (tree_gone()) {
        reap_and_release();
    } else {
        waiting_tree_ = true;
        tree_wait_started_ = steady_clock::now();
        tree_backoff_ = milliseconds(1);
        arm_timer(timer_kind::tree_wait, tree_backoff_);
    }
    maybe_complete();
}

bool run_op::tree_gone() {
    if (leaf_ && !leaf_empty_) {
        leaf_empty_ = !leaf_populated(*leaf_).value_or(false);
        if (!leaf_empty_) return false;
    }
    // A pidfd is readable once its process has exited.
    std::erase_if(dying_, [](const unique_fd& fd) {
        pollfd p{fd.get(), POLLIN, 0};
        return ::poll(&p, 1, 0) == 1;
    });
    return dying_.empty();
}

void run_op::poll_tree_gone() {
    if (!tree_gone() && steady_clock::now() - tree_wait_started_ < tree_wait_bound) {
        tree_backoff_ = std::min(tree_backoff_ * 2, milliseconds(20));
        arm_timer(timer_kind::tree_wait, tree_backoff_);
        return;
    }
    waiting_tree_ = false;
    dying_.clear();
    reap_and_release();
    maybe_complete();
}

void run_op::reap_and_release() {
    if (!reaped_ && pid_ > 0) {
        siginfo_t si{};
        struct rusage ru {};
        int rc = use_pidfd_ ? sys_waitid(P_PIDFD, pidfd_sd_.native_handle(), &si, WEXITED | WNOHANG, &ru)
                            : sys_waitid(P_PID, pid_, &si, WEXITED | WNOHANG, &ru);
        if (rc == 0 && si.si_pid != 0) {
            result_.usage.user_us = micros(ru.ru_utime);
            result_.usage.system_us = micros(ru.ru_stime);
            result_.usage.max_rss_kib = static_cast<std::uint64_t>(ru.ru_maxrss);
        }
        reaped_ = true;
    }
    if (observer_) observer_->group_reaped(pid_);
    observer_.reset();
    boost::system::error_code ignored;
    pidfd_sd_.close(ignored);
    if (leaf_) {
        // A leaf that saw cgroup.kill is not reused: Linux (6.18 here) SIGKILLs every child
        // later born into it with CLONE_INTO_CGROUP (its kill_seq differs from ours).
        svc_.release_leaf(std::move(*leaf_), leaf_empty_ && !leaf_killed_);
        leaf_.reset();
    }
}

void run_op::maybe_complete() {
    if (phase_ != phase::finishing || waiting_tree_ || pending_ != 0) return;
    if (in_cancel_) {
        // Never complete from inside the cancellation handler: the slot is cleared on completion.
        ++pending_;
        boost::asio::post(ex_, [this] {
            --pending_;
            maybe_complete();
        });
        return;
    }
    complete();
}

void run_op::complete() {
    result_.outcome = cause_.value_or(process_outcome::exited);
    if (result_.outcome == process_outcome::spawn_failed) {
        // As when the spawn itself saw the failure: no status, no usage, no duration.
        result_.exit_code.reset();
        result_.signal.reset();
        result_.core_dumped = false;
        result_.usage = {};
    } else if (pid_ > 0)
        result_.duration =
            std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - started_);
    result_.descendants_killed = static_cast<std::uint32_t>(killed_.size());
    switch (result_.outcome) {
        case process_outcome::timed_out:
            result_.error_message = "timed out after " + std::to_string(req_.timeout.count()) + " ms";
            break;
        case process_outcome::cancelled:
            if (result_.error_message.empty()) result_.error_message = "cancelled";
            break;
        case process_outcome::output_limit_exceeded:
            result_.error_message = result_.limit_stream + " exceeded its limit of " +
                                    std::to_string(result_.limit_bytes) + " bytes";
            break;
        default:
            break;
    }
    for (auto* s : {&out_, &err_}) {
        // Small captures of a large batch are kept for the whole run: do not keep slack. Copied
        // to fit, not shrink_to_fit(): Boost 1.81's garbles a string that fits its inline buffer.
        if (s->buf.capacity() > 2 * s->buf.size() + 64) s->buf = boost::json::string(s->buf.subview());
    }
    result_.stdout_bytes = std::move(out_.buf);
    result_.stderr_bytes = std::move(err_.buf);

    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    auto handler = std::move(handler_);
    auto result = std::move(result_);
    auto ex = ex_;
    auto work = std::move(handler_work_);
    svc_.detach(*this);
    delete this;
    boost::asio::dispatch(ex, boost::asio::append(std::move(handler), std::move(result)));
}

void run_op::emergency_stop() {
    if (pid_ > 0 && !reaped_) {
        if (leaf_) cgroup_kill(leaf_->dir.get());
        ::kill(-pid_, SIGKILL);
        // SIGKILLed: the wait ends when the kernel has torn the process down.
        siginfo_t si{};
        while (sys_waitid(P_PID, pid_, &si, WEXITED, nullptr) < 0 && errno == EINTR) {
        }
        reaped_ = true;
    }
    if (observer_) observer_->group_reaped(pid_);
    observer_.reset();
    if (leaf_) {
        wait_cgroup_empty_blocking(leaf_->dir.get(), 1000);
        svc_.release_leaf(std::move(*leaf_), false);
        leaf_.reset();
    }
}

}  // namespace exec
}  // namespace agentctl
