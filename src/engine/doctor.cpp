// agentctl doctor: the survey preflight (preflight.cpp) as a report; runs nothing.
#include <agentctl/doctor.hpp>

#include "runner/completion.hpp"
#include "runner/preflight.hpp"

namespace asio = boost::asio;

namespace agentctl {
namespace {

asio::awaitable<doctor_report> survey(const plan& p, doctor_options options) {
    co_await accept_all_cancellation();
    preflight_settings settings;
    settings.mode = preflight_mode::survey;
    settings.base_dir = options.base_dir;
    settings.search_path = options.search_path;
    settings.host_env = options.host_env;
    settings.backend = options.backend;
    settings.slurm = options.slurm;
    preflight_result r = co_await run_preflight(p, settings);
    doctor_report report;
    report.workflow = p.workflow_name;
    report.plan_digest = p.plan_digest;
    if (r.workspace) report.workspace = r.workspace->path();
    report.checks = std::move(r.checks);
    report.unverified = std::move(r.unverified);
    for (const auto& c : report.checks) report.ready &= !(c.blocking && c.failed());
    co_return report;
}

}  // namespace

namespace detail {

void async_doctor_impl(asio::any_io_executor ex, const plan& p, doctor_options options,
                       asio::any_completion_handler<void(doctor_report)> handler) {
    complete_with(ex, survey(p, std::move(options)), std::move(handler), [] {
        doctor_report r;
        r.ready = false;
        r.checks.push_back(
            doctor_check{"", "internal", "", "unavailable", "the check failed unexpectedly", true});
        return r;
    });
}

}  // namespace detail
}  // namespace agentctl
