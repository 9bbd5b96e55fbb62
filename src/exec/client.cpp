#include "exec/client.hpp"
#include "exec/redactor.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace agentctl::exec {

std::string describe_call(const process_result& r, std::chrono::milliseconds timeout,
                          std::uint64_t output_limit) {
    switch (r.outcome) {
        case process_outcome::exited:
            if (r.exit_code) return "exit status " + std::to_string(*r.exit_code);
            if (r.signal) return "killed by signal " + std::to_string(*r.signal);
            return "an unknown exit status";
        case process_outcome::timed_out:
            if (timeout.count() % 1000 == 0)
                return "no answer within " + std::to_string(timeout.count() / 1000) + " s";
            return "no answer within " + std::to_string(timeout.count()) + " ms";
        case process_outcome::cancelled:
            return "cancelled";
        case process_outcome::output_limit_exceeded:
            if (output_limit % (1024 * 1024) == 0)
                return "more than " + std::to_string(output_limit >> 20) + " MiB of output";
            return "more than " + std::to_string(output_limit >> 10) + " KiB of output";
        case process_outcome::spawn_failed:
            return "could not start: " + r.error_message;
    }
    return "an unknown failure";
}

std::string excerpt(std::string_view text) {
    constexpr std::size_t most = 512;
    std::string out;
    for (char c : text) {
        if (out.size() >= most) {
            out += "…";
            break;
        }
        out.push_back(c == '\n' || c == '\r' ? ' ' : c);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out.empty() ? "no diagnostic output" : out;
}

std::string excerpt(std::string_view text, const secret_matcher& secrets) {
    std::string redacted(text);
    redact_capture(redacted, secrets, {.ends_early = true});
    return excerpt(redacted);
}

asio::awaitable<process_result> call_client(client_call call, bool cancellable) {
    process_request req;
    req.executable = call.executable;
    req.argv.reserve(call.args.size() + 1);
    req.argv.push_back(std::move(call.executable));
    for (auto& a : call.args) req.argv.push_back(std::move(a));
    req.env = std::move(call.env);
    req.stdout_limit = call.output_limit;
    req.stderr_limit = call.output_limit;
    req.combined_limit = 2 * call.output_limit;
    req.timeout = call.timeout;
    req.containment = containment_policy::process_group_only;
    auto ex = co_await asio::this_coro::executor;
    if (cancellable) co_return co_await async_run_process(ex, std::move(req), asio::use_awaitable);
    // An unconnected slot: the coroutine's cancellation does not reach this call.
    co_return co_await async_run_process(
        ex, std::move(req), asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

}  // namespace agentctl::exec
