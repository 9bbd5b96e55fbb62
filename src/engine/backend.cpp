// The backend choice, the Slurm options, and removing what dead runs left: their Slurm jobs
// and their containers.
#include <agentctl/backend.hpp>

#include "runner/container/client.hpp"
#include "engine/post_result.hpp"
#include "runner/slurm/client.hpp"
#include "exec/host.hpp"
#include "runner/slurm/command.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl {

std::string_view to_string(backend_kind b) {
    return b == backend_kind::slurm ? "slurm" : "local";
}

std::optional<backend_kind> backend_from_string(std::string_view text) {
    if (text == "local") return backend_kind::local;
    if (text == "slurm") return backend_kind::slurm;
    return std::nullopt;
}

namespace {

bool has_control(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

std::string text_error(std::string_view flag, std::string_view value) {
    if (value.empty()) return "--slurm-" + std::string(flag) + " must not be empty";
    if (has_control(value)) return "--slurm-" + std::string(flag) + " must not hold a control character";
    return {};
}

template <typename T>
std::optional<T> whole_number(std::string_view text) {
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1)
        return std::nullopt;
    return value;
}

}  // namespace

std::string set_slurm_option(slurm_options& o, std::string_view name, std::string_view value) {
    if (name == "partition" || name == "account" || name == "qos") {
        if (auto e = text_error(name, value); !e.empty()) return e;
        if (name == "partition") {
            if (slurm::split_partitions(value).empty()) return "--slurm-partition names no partition";
            o.partition = std::string(value);
        } else if (name == "account") {
            o.account = std::string(value);
        } else {
            o.qos = std::string(value);
        }
        return {};
    }
    if (name == "cpus-per-task") {
        auto n = whole_number<std::uint32_t>(value);
        if (!n || *n > 1'000'000) return "--slurm-cpus-per-task must be a whole number from 1 to 1000000";
        o.cpus_per_task = *n;
        return {};
    }
    if (name == "mem") {
        // MiB; a petabyte is far beyond any node.
        auto n = whole_number<std::uint64_t>(value);
        if (!n || *n > (std::uint64_t{1} << 30))
            return "--slurm-mem must be a whole number of MiB from 1 to 1073741824";
        o.mem_mib = *n;
        return {};
    }
    return "there is no Slurm option \"" + std::string(name) + "\"";
}

std::string slurm_options_error(const slurm_options& o) {
    for (auto [flag, value] : {std::pair<std::string_view, const std::string*>{"partition", &o.partition},
                               {"account", &o.account},
                               {"qos", &o.qos}})
        if (!value->empty() && has_control(*value))
            return "--slurm-" + std::string(flag) + " must not hold a control character";
    if (!o.partition.empty() && slurm::split_partitions(o.partition).empty())
        return "--slurm-partition names no partition";
    if (o.cpus_per_task && *o.cpus_per_task == 0) return "--slurm-cpus-per-task must be at least 1";
    if (o.mem_mib && *o.mem_mib == 0) return "--slurm-mem must be at least 1 MiB";
    return {};
}

namespace {

asio::awaitable<slurm_leftover_report> cancel_leftovers(slurm_leftover_options options) {
    slurm_leftover_report report;
    slurm::tools tools;
    std::string error;
    auto squeue = slurm::find_tool("squeue", options.search_path, error);
    auto scancel = slurm::find_tool("scancel", options.search_path, error);
    if (!squeue || !scancel) co_return report;
    report.slurm_found = true;
    tools.squeue = *squeue;
    tools.scancel = *scancel;
    auto env = slurm::client_environment(options.host_env, {});
    slurm::listing mine = co_await slurm::list_mine(tools.squeue, env);
    if (!mine.ok) {
        report.error = task_error{error_code::slurm_cleanup_failed,
                                  "the Slurm jobs of dead runs could not be listed: " + mine.error};
        co_return report;
    }
    auto dead = slurm::jobs_of_dead_runs(mine.entries, slurm::job_name_host(exec::host_name()),
                                         exec::process_start_time, options.run_ids);
    if (dead.empty()) co_return report;
    slurm::removal r = co_await slurm::cancel_and_confirm(tools, env, std::move(dead), 30s);
    for (const auto& e : r.gone) report.cancelled.push_back(slurm::job_text(e));
    for (const auto& e : r.left) report.left.push_back(slurm::job_text(e) + " " + e.state_text);
    if (!r.left.empty()) {
        std::string list;
        for (const auto& l : report.left) list += (list.empty() ? "" : ", ") + l;
        report.error = task_error{
            error_code::slurm_cleanup_failed,
            "Slurm jobs of dead runs are still pending, running or completing after scancel: " + list +
                (r.error.empty() ? "" : " (" + r.error + ")")};
    }
    co_return report;
}

asio::awaitable<container_leftover_report> remove_container_leftovers(container_leftover_options options) {
    container_leftover_report report;
    for (const char* name : {"docker", "podman"}) {
        std::string error;
        auto e = container::find_engine(name, options.search_path, error);
        if (!e) continue;
        report.engines.emplace_back(name);
        auto swept = co_await container::remove_dead_owners_containers(
            *e, container::client_environment(options.host_env));
        if (!swept.list_error.empty()) report.unlisted.push_back(std::move(swept.list_error));
        for (auto& c : swept.containers) report.containers.push_back(std::move(c));
    }
    co_return report;
}

}  // namespace

namespace detail {

void async_cancel_slurm_leftovers_impl(asio::any_io_executor ex, slurm_leftover_options options,
                                       asio::any_completion_handler<void(slurm_leftover_report)> handler) {
    asio::co_spawn(ex, cancel_leftovers(std::move(options)),
                   [h = std::move(handler)](std::exception_ptr e, slurm_leftover_report r) mutable {
                       if (e)
                           r.error = task_error{error_code::internal_error,
                                                "cancelling dead runs' Slurm jobs failed unexpectedly"};
                       dispatch_result(std::move(h), std::move(r));
                   });
}

void async_remove_container_leftovers_impl(
    asio::any_io_executor ex, container_leftover_options options,
    asio::any_completion_handler<void(container_leftover_report)> handler) {
    asio::co_spawn(ex, remove_container_leftovers(std::move(options)),
                   [h = std::move(handler)](std::exception_ptr e, container_leftover_report r) mutable {
                       if (e) r.unlisted.emplace_back("removing dead runs' containers failed unexpectedly");
                       dispatch_result(std::move(h), std::move(r));
                   });
}

}  // namespace detail
}  // namespace agentctl
