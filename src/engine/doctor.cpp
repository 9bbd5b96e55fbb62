// agentctl doctor: the survey preflight (preflight.cpp) as a report; runs nothing.
#include <agentctl/doctor.hpp>

#include "engine/post_result.hpp"
#include "runner/preflight.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>

namespace asio = boost::asio;

namespace agentctl {
namespace {

asio::awaitable<doctor_report> survey(const plan& p, doctor_options options) {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    co_await asio::this_coro::throw_if_cancelled(false);
    preflight_settings settings;
    settings.mode = preflight_mode::survey;
    settings.base_dir = options.base_dir;
    settings.search_path = options.search_path;
    settings.host_env = options.host_env;
    settings.backend = options.backend;
    settings.slurm = options.slurm;
    preflight_result r = co_await run_preflight(p, settings);
    doctor_report report;
    if (r.workspace) report.workspace = r.workspace->path();
    report.checks = std::move(r.checks);
    for (const auto& c : report.checks) report.ready &= !(c.blocking && c.failed());
    co_return report;
}

}  // namespace

namespace detail {

void async_doctor_impl(asio::any_io_executor ex, const plan& p, doctor_options options,
                       asio::any_completion_handler<void(doctor_report)> handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    asio::co_spawn(ex, survey(p, std::move(options)),
                   asio::bind_cancellation_slot(
                       slot, [h = std::move(handler)](std::exception_ptr e, doctor_report r) mutable {
                           if (e) {
                               r.ready = false;
                               r.checks.push_back(doctor_check{"", "internal", "", "unavailable",
                                                               "the check failed unexpectedly", true});
                           }
                           dispatch_result(std::move(h), std::move(r));
                       }));
}

}  // namespace detail
}  // namespace agentctl
