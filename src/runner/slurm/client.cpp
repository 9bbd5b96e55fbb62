// Bounded calls of the Slurm commands (docs/SLURM.md, section 9).
#include "runner/slurm/client.hpp"

#include "exec/client.hpp"

#include <agentctl/process.hpp>
#include "runner/slurm/command.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <iterator>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl::slurm {

namespace {

// A listing may be long on a busy cluster (about 100 bytes a job); the default 64 KiB of a
// helper call would cut it short.
constexpr std::uint64_t listing_limit = 16 * 1024 * 1024;

std::string command_text(const std::vector<std::string>& argv) {
    std::string out;
    for (std::size_t i = 0; i < argv.size() && i < 4; ++i) {
        std::string_view a = argv[i];
        if (i == 0) a = a.substr(a.rfind('/') + 1);
        if (a.size() > 60) a = a.substr(0, 60);
        out += (i ? " " : "") + std::string(a);
    }
    if (argv.size() > 4) out += " ...";
    return out;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace

expected<std::string> find_tool(std::string_view name, std::string_view search_path) {
    return resolve_executable(name, search_path);
}

asio::awaitable<process_result> call(std::vector<std::string> argv, std::vector<std::string> env,
                                     bool cancellable, std::uint64_t output_limit,
                                     std::chrono::milliseconds timeout) {
    exec::client_call c;
    c.executable = argv.front();
    c.args.assign(std::make_move_iterator(argv.begin() + 1), std::make_move_iterator(argv.end()));
    c.env = std::move(env);
    c.timeout = timeout;
    c.output_limit = output_limit;
    co_return co_await exec::call_client(std::move(c), cancellable);
}

std::string describe(const process_result& r, std::uint64_t output_limit) {
    return exec::describe_call(r, call_timeout, output_limit);
}

std::string excerpt(std::string_view text) {
    return exec::excerpt(text);
}

std::string job_text(const queue_entry& e) {
    return std::to_string(e.job_id) + " " + e.name;
}

asio::awaitable<listing> list_by_names(const std::string& squeue, const std::vector<std::string>& names,
                                       const std::vector<std::string>& env) {
    listing out;
    for (auto& cmd : squeue_by_names(squeue, names)) {
        std::string what = command_text(cmd);
        process_result r = co_await call(std::move(cmd), env, false, listing_limit);
        if (r.outcome != process_outcome::exited || r.exit_code != 0) {
            out.error = what + ": " + describe(r, listing_limit) + ": " + excerpt(r.stderr_bytes);
            co_return out;
        }
        auto entries = parse_squeue(r.stdout_bytes);
        out.entries.insert(out.entries.end(), std::make_move_iterator(entries.begin()),
                           std::make_move_iterator(entries.end()));
    }
    out.ok = true;
    co_return out;
}

asio::awaitable<listing> list_mine(const std::string& squeue, const std::vector<std::string>& env) {
    listing out;
    auto cmd = squeue_mine(squeue);
    std::string what = command_text(cmd);
    process_result r = co_await call(std::move(cmd), env, false, listing_limit);
    if (r.outcome != process_outcome::exited || r.exit_code != 0) {
        out.error = what + ": " + describe(r, listing_limit) + ": " + excerpt(r.stderr_bytes);
        co_return out;
    }
    out.entries = parse_squeue(r.stdout_bytes);
    out.ok = true;
    co_return out;
}

asio::awaitable<removal> cancel_and_confirm(const tools& t, const std::vector<std::string>& env,
                                            std::vector<queue_entry> jobs, std::chrono::milliseconds bound) {
    removal out;
    auto deadline = std::chrono::steady_clock::now() + bound;
    std::optional<std::chrono::steady_clock::time_point> last_cancel;
    std::chrono::milliseconds pause = 100ms;
    while (!jobs.empty()) {
        if (!last_cancel || std::chrono::steady_clock::now() - *last_cancel >= 5s) {
            // SIGKILL to each step ends the program at once (plain scancel waits KillWait for a
            // program that ignores SIGTERM); scancel of the job releases the allocation.
            for (const auto& j : jobs) co_await call(scancel_kill_step(t.scancel, j.job_id), env);
            std::vector<std::uint64_t> ids;
            for (const auto& j : jobs) ids.push_back(j.job_id);
            co_await call(scancel_jobs(t.scancel, ids), env);
            last_cancel = std::chrono::steady_clock::now();
        }
        co_await sleep_for(pause);
        pause = std::min<std::chrono::milliseconds>(pause * 2, 1s);
        listing now = co_await list_mine(t.squeue, env);
        if (!now.ok) {
            out.error = now.error;
        } else {
            out.error.clear();
            std::vector<queue_entry> still;
            for (auto& j : jobs) {
                auto it = std::find_if(now.entries.begin(), now.entries.end(),
                                       [&](const queue_entry& e) { return e.job_id == j.job_id; });
                if (it != now.entries.end() && is_active(it->state))
                    still.push_back(*it);
                else
                    out.gone.push_back(std::move(j));
            }
            jobs = std::move(still);
        }
        if (!jobs.empty() && std::chrono::steady_clock::now() >= deadline) break;
    }
    out.left = std::move(jobs);
    co_return out;
}

}  // namespace agentctl::slurm
