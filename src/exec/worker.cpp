// The worker's loop (docs/WORKER.md, "The worker's loop"): one thread, one io_context, frames
// read from fd 0 and written to a private copy of fd 1, one async_run_process per `run`.
// Everything the worker does to a task is what a local run does to it (src/exec/run_op.cpp);
// this file only carries requests and results across the connection.
#include <agentctl/worker.hpp>

#include "exec/host.hpp"
#include "exec/service.hpp"
#include "exec/sys.hpp"
#include "exec/workspace.hpp"
#include "worker_protocol/messages.hpp"

#include <agentctl/process.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <set>

namespace agentctl {
namespace {

namespace asio = boost::asio;
namespace wp = worker_protocol;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

constexpr std::size_t read_size = 64 * 1024;

void say(const std::string& text) {
    std::string line = "agentctl worker: " + text + "\n";
    // Best effort: stderr is for people, and nothing depends on it arriving.
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

std::uint32_t usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? static_cast<std::uint32_t>(n) : 1;
}

wp::run_outcome wire_outcome(process_outcome o) {
    switch (o) {
        case process_outcome::exited:
            return wp::run_outcome::exited;
        case process_outcome::timed_out:
            return wp::run_outcome::timed_out;
        case process_outcome::cancelled:
            return wp::run_outcome::cancelled;
        case process_outcome::output_limit_exceeded:
            return wp::run_outcome::output_limit_exceeded;
        case process_outcome::spawn_failed:
            break;
    }
    return wp::run_outcome::spawn_failed;
}

// The result without its output, which travels before it in output frames.
wp::run_result wire_result(std::uint64_t tag, const process_result& r) {
    wp::run_result m;
    m.tag = tag;
    m.outcome = wire_outcome(r.outcome);
    if (r.exit_code) m.exit_code = static_cast<std::uint32_t>(*r.exit_code);
    if (r.signal) m.signal = static_cast<std::uint32_t>(*r.signal);
    m.core_dumped = r.core_dumped;
    m.limit_stream = r.limit_stream;
    m.limit_bytes = r.limit_bytes;
    m.duration_us = static_cast<std::uint64_t>(r.duration.count());
    m.user_us = r.usage.user_us;
    m.system_us = r.usage.system_us;
    m.max_rss_kib = r.usage.max_rss_kib;
    m.used =
        r.used == containment::cgroup ? wp::used_containment::cgroup : wp::used_containment::process_group;
    m.descendants_killed = r.descendants_killed;
    if (r.error) m.error_code = std::string(to_string(*r.error));
    m.error_message = r.error_message;
    m.stdout_size = r.stdout_bytes.size();
    m.stderr_size = r.stderr_bytes.size();
    return m;
}

class worker_loop {
public:
    worker_loop(asio::io_context& io, int in_fd, int out_fd)
        : io_(io), in_(io), out_(io), ticker_(io), signals_(io, SIGTERM, SIGINT) {
        heartbeats_.last_received = heartbeats_.last_sent = steady::now();
        boost::system::error_code ec;
        in_.assign(in_fd, ec);
        if (!ec) out_.assign(out_fd, ec);
        if (ec) setup_error_ = "cannot watch the connection's descriptors: " + ec.message();
    }

    worker_status run() {
        if (!setup_error_.empty()) {
            say(setup_error_);
            return worker_status::connection;
        }
        signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
            if (!ec) stop(worker_status::connection, sig == SIGINT ? "SIGINT received" : "SIGTERM received");
        });
        read_more();
        io_.run();
        return status_;
    }

private:
    struct task {
        asio::cancellation_signal cancel;
        std::optional<exec::directory> cwd;  ///< open until the process has exited
    };

    // ---- reading

    void read_more() {
        in_.async_read_some(asio::buffer(read_buffer_),
                            [this](const boost::system::error_code& ec, std::size_t n) {
                                if (stopping_) return;
                                if (ec) {
                                    connection_closed(ec == asio::error::eof ? "" : ec.message());
                                    return;
                                }
                                heartbeats_.last_received = steady::now();
                                decoder_.feed(std::string_view(read_buffer_.data(), n));
                                if (auto e = decoder_.each_frame([this](const wp::frame& f) {
                                        handle(f);
                                        return !stopping_;
                                    })) {
                                    protocol_error(*e);
                                    return;
                                }
                                if (stopping_) return;
                                read_more();
                            });
    }

    void connection_closed(const std::string& error) {
        if (auto e = decoder_.finish()) {
            protocol_error(*e);
            return;
        }
        if (!error.empty()) {
            stop(worker_status::connection, "cannot read from the driver: " + error);
        } else if (!tasks_.empty()) {
            stop(worker_status::connection, "the driver closed the connection with " +
                                                std::to_string(tasks_.size()) +
                                                " task(s) running: killing them");
        } else {
            // Nothing runs: every task's tree was reaped (its result sent). The last frame says so,
            // so that the driver need not wait for the step's end through srun to know that
            // nothing of the run is left here (docs/WORKER.md, "The end of a run").
            std::string frame;
            wp::append_bye(frame, {tasks_started_});
            send(std::move(frame));
            stop(worker_status::done, "", /*flush_output=*/true);
        }
    }

    void protocol_error(const wp::protocol_error& e) {
        stop(worker_status::connection,
             "protocol error (" + std::string(wp::to_string(e.code)) + "): " + e.message);
    }

    void handle(const wp::frame& f) {
        if (auto e = wp::check_arrival(wp::side::worker, handshake_done_, f.type)) return protocol_error(*e);
        switch (f.type) {
            case wp::message_type::hello:
                return on_hello(f.payload);
            case wp::message_type::run:
                return on_run(f.payload);
            case wp::message_type::cancel:
                return on_cancel(f.payload);
            case wp::message_type::slots:
                return on_slots(f.payload);
            case wp::message_type::heartbeat: {
                auto m = wp::decode_heartbeat(f.payload);
                if (!m) protocol_error(m.error());
                return;
            }
            default:
                return;  // check_arrival allowed nothing else
        }
    }

    // ---- the handshake

    void on_hello(const std::string& payload) {
        auto hello = wp::decode_hello(payload);
        if (!hello) return refuse(hello.error());
        const auto& own = exec::build_digest();
        if (!own)
            return refuse(
                wp::protocol_error{wp::protocol_errc::build_digest,
                                   "this worker cannot compute its build digest: " + own.error().message});
        if (auto e = wp::check_hello(*hello, *own)) return refuse(*e);
        heartbeats_.interval = milliseconds(hello->heartbeat_ms);
        wp::welcome w;
        w.build_digest = *own;
        w.node = exec::host_name();
        w.pid = static_cast<std::uint32_t>(exec::own_pid());
        w.cpus = usable_cpus();
        w.containment =
            probe_cgroups() ? wp::worker_containment::cgroup : wp::worker_containment::process_group;
        std::string frame;
        wp::append_welcome(frame, w);
        send(std::move(frame));
        handshake_done_ = true;
        decoder_.set_limit(wp::payload_limit);
        tick();
    }

    void refuse(const wp::protocol_error& e) {
        std::string frame;
        wp::append_refuse(frame, wp::refusal_for(e));
        send(std::move(frame));
        stop(worker_status::connection, "refused the driver: " + e.message, /*flush_output=*/true);
    }

    // Whether tasks will get a cgroup leaf: the executor's own probe, with a leaf taken and
    // pooled again at once.
    bool probe_cgroups() {
        auto& svc = asio::use_service<exec::exec_service>(io_);
        auto leaf = svc.acquire_leaf();
        if (!leaf) return false;
        svc.release_leaf(std::move(*leaf), true);
        return true;
    }

    // ---- tasks

    // A run starts now while fewer than the driver's slot count are running, else waits in the
    // queue (docs/WORKER.md, "Pipelining"): the driver sends runs ahead so that a slot freed
    // here is refilled without a round trip through srun.
    void on_run(const std::string& payload) {
        auto m = wp::decode_run(payload);
        if (!m) return protocol_error(m.error());
        if (tasks_.count(m->tag) || queued_tags_.count(m->tag))
            return protocol_error({wp::protocol_errc::unexpected_message,
                                   "a run with tag " + std::to_string(m->tag) + ", which is not finished"});
        if (queue_.empty() && (slots_ == 0 || tasks_.size() < slots_)) return start(std::move(*m));
        queued_tags_.insert(m->tag);
        queue_.push_back(std::move(*m));
    }

    void on_slots(const std::string& payload) {
        auto m = wp::decode_slots(payload);
        if (!m) return protocol_error(m.error());
        slots_ = m->count;
        start_queued();
    }

    // Starts queued runs while there is room. A start may finish at once (a cwd that is not
    // there), which calls back here: `starting_` keeps that from nesting.
    void start_queued() {
        if (starting_) return;
        starting_ = true;
        while (!stopping_ && !queue_.empty() && (slots_ == 0 || tasks_.size() < slots_)) {
            wp::run_request m = std::move(queue_.front());
            queue_.pop_front();
            queued_tags_.erase(m.tag);
            start(std::move(m));
        }
        starting_ = false;
    }

    void start(wp::run_request run) {
        wp::run_request* m = &run;
        const std::uint64_t tag = m->tag;
        auto& t = *tasks_.emplace(tag, std::make_unique<task>()).first->second;
        process_request req;
        if (auto failed = open_cwd(*m, t, req)) {
            process_result r;
            r.error = failed->code;
            r.error_message = failed->message;
            tasks_.erase(tag);
            finished(tag, std::move(r));
            return;
        }
        req.executable = std::move(m->executable);
        req.argv = std::move(m->argv);
        req.env = std::move(m->env);
        req.stdin_data = std::move(m->stdin_data);
        req.stdout_limit = m->stdout_limit;
        req.stderr_limit = m->stderr_limit;
        req.combined_limit = m->combined_limit;
        req.timeout = milliseconds(m->timeout_ms);
        req.kill_grace = milliseconds(m->kill_grace_ms);
        req.drain_grace = milliseconds(m->drain_grace_ms);
        req.containment = m->containment == wp::containment_request::process_group_only
                              ? containment_policy::process_group_only
                              : containment_policy::automatic;
        req.on_started = [this, tag](const process_started& p) {
            ++tasks_started_;
            wp::started_note n;
            n.tag = tag;
            n.pid = static_cast<std::uint32_t>(p.pid);
            n.start_lo = p.start_lo;
            n.start_hi = p.start_hi;
            n.cgroup = p.cgroup;
            std::string frame;
            wp::append_started(frame, n);
            send(std::move(frame));
        };
        async_run_process(io_.get_executor(), std::move(req),
                          asio::bind_cancellation_slot(t.cancel.slot(), [this, tag](process_result r) {
                              tasks_.erase(tag);
                              finished(tag, std::move(r));
                              start_queued();
                          }));
    }

    // The cwd beneath the workspace root, as the host launcher opens it (runner/launcher.cpp).
    std::optional<task_error> open_cwd(const wp::run_request& m, task& t, process_request& req) {
        if (!root_ || root_name_ != m.workspace_root) {
            auto opened = exec::directory::open(m.workspace_root);
            if (!opened)
                return task_error{
                    error_code::workspace_unavailable,
                    "workspace root " + m.workspace_root + " on this node: " + opened.error().message};
            root_ = std::move(*opened);
            root_name_ = m.workspace_root;
        }
        auto cwd = root_->open_beneath(m.cwd);
        if (!cwd)
            return task_error{error_code::cwd_unavailable, "cwd \"" + m.cwd + "\": " + cwd.error().message +
                                                               " (beneath the workspace root " +
                                                               m.workspace_root + ")"};
        t.cwd = std::move(*cwd);
        req.cwd_fd = t.cwd->fd();
        req.cwd_display = t.cwd->path();
        return std::nullopt;
    }

    void finished(std::uint64_t tag, process_result r) {
        // Output of tasks killed because the connection ended: no one is there to read it.
        if (!stopping_) {
            std::string frames;
            wp::append_output(frames, tag, wp::stream_id::stdout_stream, r.stdout_bytes);
            wp::append_output(frames, tag, wp::stream_id::stderr_stream, r.stderr_bytes);
            wp::append_result(frames, wire_result(tag, r));
            send(std::move(frames));
        }
    }

    void on_cancel(const std::string& payload) {
        auto m = wp::decode_cancel(payload);
        if (!m) return protocol_error(m.error());
        if (queued_tags_.erase(m->tag)) {
            // Never started: it leaves the queue, and its result says so (no `started` before it).
            auto q = std::find_if(queue_.begin(), queue_.end(),
                                  [&](const wp::run_request& r) { return r.tag == m->tag; });
            if (q != queue_.end()) queue_.erase(q);
            process_result r;
            r.outcome = process_outcome::cancelled;
            r.error_message = "cancelled while it waited in the worker's queue: it never started";
            finished(m->tag, std::move(r));
            return;
        }
        auto it = tasks_.find(m->tag);
        if (it == tasks_.end()) return;  // its result crossed the cancel on the wire
        it->second->cancel.emit(m->kind == wp::cancel_kind::terminal ? asio::cancellation_type::terminal
                                                                     : asio::cancellation_type::total);
    }

    // ---- heartbeats: each direction idle for an interval carries one; three silent
    // intervals from the driver end the connection.

    void tick() {
        ticker_.expires_after(heartbeats_.interval);
        ticker_.async_wait([this](const boost::system::error_code& ec) {
            if (ec || stopping_) return;
            auto now = steady::now();
            if (heartbeats_.peer_gone(now)) {
                stop(worker_status::connection,
                     "no frame from the driver for " + heartbeats_.silence_limit() + ": taking it for gone");
                return;
            }
            if (heartbeats_.idle(now)) send(heartbeats_.next_frame());
            tick();
        });
    }

    // ---- writing: one queue, one write in flight, so frames never interleave

    // Frames of one turn of the loop go out in one write (docs/WORKER.md, "The channel").
    void send(std::string frames) {
        if (!out_.is_open()) return;
        pending_ += frames;
        if (flush_posted_) return;
        flush_posted_ = true;
        asio::post(io_, [this] {
            flush_posted_ = false;
            flush();
        });
    }

    void flush() {
        if (writing_ || !out_.is_open()) return;
        if (pending_.empty()) {
            if (close_when_flushed_) close_output();
            return;
        }
        writing_ = true;
        in_flight_.swap(pending_);
        pending_.clear();
        heartbeats_.last_sent = steady::now();
        asio::async_write(
            out_, asio::buffer(in_flight_), [this](const boost::system::error_code& ec, std::size_t) {
                writing_ = false;
                in_flight_.clear();
                if (ec) {
                    close_output();
                    stop(worker_status::connection, "cannot write to the driver: " + ec.message());
                    return;
                }
                flush();
            });
    }

    void close_output() {
        boost::system::error_code ignored;
        out_.close(ignored);
        pending_.clear();
    }

    // ---- the end: kill every task, stop reading; the io_context runs until the trees are
    // reaped (async_run_process completes only then).

    void stop(worker_status status, const std::string& why, bool flush_output = false) {
        if (stopping_) return;
        stopping_ = true;
        status_ = status;
        if (!why.empty()) say(why);
        boost::system::error_code ignored;
        in_.close(ignored);
        signals_.cancel(ignored);
        ticker_.cancel();
        // Queued runs never started: they are dropped, with nothing to kill.
        queue_.clear();
        queued_tags_.clear();
        for (auto& [tag, t] : tasks_) t->cancel.emit(asio::cancellation_type::terminal);
        if (flush_output) {
            close_when_flushed_ = true;
            flush();
        } else {
            close_output();
        }
    }

    asio::io_context& io_;
    asio::posix::stream_descriptor in_;
    asio::posix::stream_descriptor out_;
    asio::steady_timer ticker_;
    asio::signal_set signals_;
    std::string setup_error_;
    std::array<char, read_size> read_buffer_{};
    wp::frame_decoder decoder_;
    bool handshake_done_ = false;
    // Both directions count as heard from at construction.
    wp::heartbeats<steady::time_point, milliseconds> heartbeats_;
    std::optional<exec::directory> root_;  ///< the last run's workspace root, kept open for the next
    std::string root_name_;                ///< as the driver named it
    std::map<std::uint64_t, std::unique_ptr<task>> tasks_;  ///< started, not finished
    std::deque<wp::run_request> queue_;                     ///< received, not started yet
    std::set<std::uint64_t> queued_tags_;                   ///< the tags in queue_
    std::uint32_t slots_ = 0;                               ///< from `slots`; 0: no limit yet
    bool starting_ = false;
    std::string pending_;
    std::string in_flight_;
    bool writing_ = false;
    bool close_when_flushed_ = false;
    bool flush_posted_ = false;
    bool stopping_ = false;
    std::uint64_t tasks_started_ = 0;  ///< for the bye
    worker_status status_ = worker_status::done;
};

}  // namespace

void prepare_worker() {
    (void)exec::build_digest();  // computed once per process, kept for the hello
}

worker_status serve_worker(watchdog* watch) {
    // The frames get a descriptor of their own; fd 1 becomes /dev/null, so that a stray write
    // of anything in this process cannot corrupt the stream.
    int frames_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    exec::unique_fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (frames_out < 0 || !null || ::dup2(null.get(), STDOUT_FILENO) < 0) {
        say("cannot set up its output: " + exec::errno_text(errno));
        return worker_status::connection;
    }
    // A reader that went away is an error to handle, not a signal that kills us with tasks left.
    ::signal(SIGPIPE, SIG_IGN);
    // Its parent (slurmstepd, or whoever started it) dying is the end of the connection.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    asio::io_context io;
    if (watch) watch->observe(io);
    worker_loop loop(io, STDIN_FILENO, frames_out);
    return loop.run();
}

}  // namespace agentctl
