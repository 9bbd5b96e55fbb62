// The driver's end of one worker connection (docs/WORKER.md, "The channel", "Failures").
#include "runner/worker/client.hpp"

#include "exec/client.hpp"
#include "exec/host.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace asio = boost::asio;
namespace wp = agentctl::worker_protocol;
using steady = std::chrono::steady_clock;

namespace agentctl::worker {

namespace {
// A read answered by nothing for this long is answered by a heartbeat (arm_nudge()).
constexpr auto nudge_after = std::chrono::milliseconds(2);
}  // namespace

client::client(asio::any_io_executor ex, std::string label, std::uint32_t slots)
    : ex_(ex), label_(std::move(label)), slots_(slots), wake_(ex), tick_timer_(ex), nudge_timer_(ex) {}

std::uint32_t client::free_slots() const {
    if (!usable()) return 0;
    auto busy = static_cast<std::uint32_t>(running_.size());
    std::uint32_t room = limit_ ? limit_ + ahead_ : slots();
    return room > busy ? room - busy : 0;
}

void client::set_limit(std::uint32_t limit, std::uint32_t ahead) {
    limit_ = std::max<std::uint32_t>(limit, 1);
    ahead_ = ahead;
    std::string frame;
    wp::append_slots(frame, {limit_});
    send(std::move(frame));
}

void client::spawn_owned(asio::awaitable<void> body) {
    ++owned_;
    asio::co_spawn(ex_, std::move(body), [self = shared_from_this()](std::exception_ptr e) {
        --self->owned_;
        if (e) self->lose("the connection's coroutine failed unexpectedly");
        self->wake();
    });
}

asio::awaitable<std::optional<std::string>> client::connect(exec::channel_command command, wp::hello hello,
                                                            std::chrono::milliseconds bound) {
    if (auto why = start(command)) co_return why;
    co_return co_await handshake(std::move(hello), bound);
}

std::optional<std::string> client::start(const exec::channel_command& command) {
    auto started = exec::channel::start(ex_, command);
    if (!started) return started.error().message;
    channel_ = std::move(*started);
    return std::nullopt;
}

asio::awaitable<std::optional<std::string>> client::handshake(wp::hello hello,
                                                              std::chrono::milliseconds bound) {
    if (auto why = send_hello(std::move(hello))) co_return why;
    co_return co_await await_welcome(bound);
}

std::optional<std::string> client::send_hello(wp::hello hello) {
    if (lost_) return lost_reason_;
    digest_ = hello.build_digest;
    heartbeats_.interval = std::chrono::milliseconds(hello.heartbeat_ms);
    heartbeats_.last_received = heartbeats_.last_sent = steady::now();
    std::string frame;
    if (auto e = wp::append_hello(frame, hello)) {
        lose(e->message);
        return e->message;
    }
    send(std::move(frame));
    spawn_owned(reader());
    return std::nullopt;
}

asio::awaitable<std::optional<std::string>> client::await_welcome(std::chrono::milliseconds bound) {
    auto deadline = steady::now() + bound;
    while (!connected_ && !refused_ && !lost_ && steady::now() < deadline) {
        wake_.expires_at(deadline);
        co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (connected_ && !lost_) co_return std::nullopt;
    std::string why = refused_ ? "refused: " + *refused_
                      : lost_  ? lost_reason_
                               : "no answer within " + std::to_string(bound.count() / 1000) + " s";
    lose(why);
    co_return why;
}

void client::send(std::string frame) {
    if (!channel_ || lost_) return;
    heartbeats_.last_sent = steady::now();
    channel_->send(std::move(frame));
}

// Through srun, the worker's frames reach us as segments of a TCP connection that srun
// acknowledges with data of its own, or alone up to 40 ms later (delayed acknowledgement);
// until then slurmstepd holds the worker's next frames (Nagle's algorithm). Runs sent in answer
// carry that acknowledgement; when none go (the last tasks of a run, a task's `started`
// before its result), a heartbeat does, so the last results do not wait 40 ms each
// (docs/WORKER.md, "The channel").
void client::arm_nudge() {
    if (nudge_armed_) return;
    nudge_armed_ = true;
    nudge_timer_.expires_after(nudge_after);
    nudge_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        self->nudge_armed_ = false;
        if (ec || self->lost_ || self->closing_ || self->running_.empty()) return;
        auto& beats = self->heartbeats_;
        if (beats.last_sent >= beats.last_received) return;  // answered meanwhile
        self->send(beats.next_frame());
    });
}

void client::start_run(const wp::run_request& request, pending_run& p) {
    running_.insert(request.tag);
    waiting_[request.tag] = &p;
    std::string frame;
    if (auto e = wp::append_run(frame, request)) {
        // Too large for a frame: nothing was sent; the launch reads the error from the result.
        running_.erase(request.tag);
        waiting_.erase(request.tag);
        wp::run_result r;
        r.tag = request.tag;
        r.error_code = "argument_list_too_long";
        r.error_message = "the request is too large for the worker protocol: " + e->message;
        p.result = std::move(r);
        return;
    }
    send(std::move(frame));
}

void client::cancel(std::uint64_t tag, wp::cancel_kind kind) {
    if (!running_.count(tag)) return;
    std::string frame;
    wp::append_cancel(frame, {tag, kind});
    send(std::move(frame));
}

void client::forget(std::uint64_t tag) {
    waiting_.erase(tag);
}

void client::lose(const std::string& why) {
    if (lost_) return;
    lost_ = true;
    lost_reason_ = why;
    nudge_timer_.cancel();
    if (channel_) channel_->kill();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [tag, p] : waiting)
        if (p->notify) p->notify();
    tick_timer_.cancel();
    wake();
}

void client::protocol_failure(const wp::protocol_error& e) {
    lose("protocol error (" + std::string(wp::to_string(e.code)) + "): " + e.message);
}

asio::awaitable<void> client::reader() {
    auto self = shared_from_this();
    for (;;) {
        std::string bytes = co_await channel_->read_some();
        if (bytes.empty()) {
            if (auto e = decoder_.finish()) {
                protocol_failure(*e);
            } else if (!closing_ || !running_.empty()) {
                std::string said = channel_->stderr_tail();
                lose("the worker's connection closed" +
                     (said.empty() ? std::string() : " (it said: " + exec::excerpt(said) + ")"));
            }
            co_return;
        }
        heartbeats_.last_received = steady::now();
        decoder_.feed(bytes);
        if (auto e = decoder_.each_frame([this](const wp::frame& f) {
                handle(f);
                return !lost_;
            }))
            protocol_failure(*e);
        // Only once nothing waits in the worker's queue (the last tasks of a run, or a run of
        // few): before that the runs sent ahead in answer carry the acknowledgement, and a
        // heartbeat after every slow answer was 175 more writes to srun in a 1 000-task run
        // under load (0-2 with this bound).
        if (connected_ && !lost_ && !running_.empty() && running_.size() <= (limit_ ? limit_ : slots()))
            arm_nudge();
        // After a loss the program is killed: read on until its end of stream.
    }
}

void client::handle(const wp::frame& f) {
    if (auto e = wp::check_arrival(wp::side::driver, connected_, f.type)) return protocol_failure(*e);
    // The run a decoded started, output or result message names; nullptr, the failure
    // reported, when the message did not decode or its tag is not running.
    auto run_of = [this](const auto& m) -> pending_run* {
        if (!m) {
            protocol_failure(m.error());
            return nullptr;
        }
        if (!running_.count(m->tag)) {
            protocol_failure({wp::protocol_errc::unexpected_message,
                              "a frame for tag " + std::to_string(m->tag) + ", which is not running"});
            return nullptr;
        }
        auto it = waiting_.find(m->tag);
        return it == waiting_.end() ? &orphan_ : it->second;
    };
    switch (f.type) {
        case wp::message_type::welcome: {
            auto m = wp::decode_welcome(f.payload);
            if (!m) return protocol_failure(m.error());
            if (auto e = wp::check_welcome(*m, digest_)) return protocol_failure(*e);
            welcome_ = std::move(*m);
            connected_ = true;
            decoder_.set_limit(wp::payload_limit);
            // Heartbeats from now on, even while the launcher awaits another worker's welcome:
            // the worker takes a driver silent for three intervals for gone.
            spawn_owned(ticker());
            wake();
            return;
        }
        case wp::message_type::refuse: {
            auto m = wp::decode_refuse(f.payload);
            refused_ = m ? wp::error_of(*m).message : m.error().message;
            wake();
            return;
        }
        case wp::message_type::started: {
            auto m = wp::decode_started(f.payload);
            pending_run* p = run_of(m);
            if (!p) return;
            p->started = std::move(*m);
            if (p->notify) p->notify();
            return;
        }
        case wp::message_type::output: {
            auto m = wp::decode_output(f.payload);
            pending_run* p = run_of(m);
            if (!p) return;
            (m->stream == wp::stream_id::stdout_stream ? p->out : p->err) += m->bytes;
            return;
        }
        case wp::message_type::result: {
            auto m = wp::decode_result(f.payload);
            pending_run* p = run_of(m);
            if (!p) return;
            if (p->out.size() != m->stdout_size || p->err.size() != m->stderr_size)
                return protocol_failure({wp::protocol_errc::malformed_payload,
                                         "the output of tag " + std::to_string(m->tag) +
                                             " does not add up to the sizes its result gives"});
            std::uint64_t tag = m->tag;
            p->result = std::move(*m);
            running_.erase(tag);
            waiting_.erase(tag);
            if (p->notify) p->notify();
            orphan_ = pending_run{};
            return;
        }
        case wp::message_type::bye: {
            auto m = wp::decode_bye(f.payload);
            if (!m) return protocol_failure(m.error());
            if (!closing_ || !running_.empty())
                return protocol_failure(
                    {wp::protocol_errc::unexpected_message,
                     "a bye before the driver closed the connection, or with runs unanswered"});
            said_bye_ = true;
            wake();
            return;
        }
        default:
            return;  // heartbeat: its arrival is what counts
    }
}

asio::awaitable<void> client::ticker() {
    auto self = shared_from_this();
    while (!lost_ && !closing_) {
        tick_timer_.expires_after(heartbeats_.interval);
        co_await tick_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
        if (lost_ || closing_) break;
        auto now = steady::now();
        if (heartbeats_.peer_gone(now)) {
            lose("no frame from the worker for " + heartbeats_.silence_limit());
            break;
        }
        if (heartbeats_.idle(now)) send(heartbeats_.next_frame());
    }
}

void client::close_input() {
    if (closing_) return;
    closing_ = true;
    tick_timer_.cancel();
    nudge_timer_.cancel();
    if (channel_) channel_->close_input();
}

asio::awaitable<void> client::close(std::chrono::milliseconds bound, bool leave_step_end) {
    auto self = shared_from_this();
    close_input();
    if (!channel_) co_return;
    auto deadline = steady::now() + bound;
    // The worker exits once its stdin is closed; its stdout ends with it (at srun's exit), and
    // the reader. Its bye comes first: every task of it reaped, it exits.
    while (owned_ > 0 && !(leave_step_end && said_bye_) && steady::now() < deadline) {
        wake_.expires_at(deadline);
        co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    // Nothing of the run is left on the node but the worker's exit and the step's end, which
    // take Slurm ~30 ms more; the watchdog sees srun to its end (docs/WORKER.md, "The end of a
    // run"). Closing our ends of its pipes ends the reader.
    if (owned_ > 0 && leave_step_end && said_bye_ && channel_->leave_running()) {
        while (owned_ > 0) {
            wake_.expires_after(std::chrono::seconds(1));
            co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        channel_.reset();
        co_return;
    }
    if (owned_ > 0) channel_->kill();
    while (owned_ > 0) {
        wake_.expires_after(std::chrono::seconds(1));
        co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    // srun returns once the step has ended; the channel's destructor kills what is left.
    auto ended = co_await channel_->wait_exit(std::chrono::milliseconds(5000));
    (void)ended;
    channel_.reset();
}

}  // namespace agentctl::worker
