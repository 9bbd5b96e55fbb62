// The product's wire format: the JSON documents agentctl prints (docs/CLI.md, "Machine
// output"). Every member order is fixed, so each document is byte-stable.
//
// `--output json` prints one envelope on stdout, `{"apiVersion","kind","ok":true,"data",
// "diagnostics"}`, or a failure envelope on stderr, `{"apiVersion","kind":"Error","ok":false,
// "error":{message,exitCode},"diagnostics"}`. `--output jsonl` prints one event per line as
// tasks start and finish, then the final envelope.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/doctor.hpp>
#include <agentctl/engine.hpp>
#include <agentctl/error.hpp>
#include <agentctl/events.hpp>
#include <agentctl/json.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/json/value.hpp>

#include <functional>
#include <string_view>

namespace agentctl {

/// A success envelope of `kind` whose `data` is what `write_data` writes.
void write_success_envelope(json_sink& out, std::string_view kind,
                            const std::function<void(json_writer&)>& write_data, const diagnostics& diags);

/// The failure envelope: `kind: "Error"` with `{message, exitCode}`.
void write_error_envelope(json_sink& out, std::string_view message, exit_status status,
                          const diagnostics& diags);

/// One jsonl line (without the newline): `{event, taskId, attempt, elapsedMs, result?}`.
void write_event(json_writer& w, const plan& p, const run_event& e);

/// Where a report finds what results let go (task_result::streams_released,
/// output_released): the run's journal.
class stream_source {
public:
    virtual ~stream_source() = default;
    /// Fills `out` and `err` with task `index`'s stdout and stderr (redacted, UTF-8).
    virtual void streams(std::uint32_t index, std::string& out, std::string& err) = 0;
    /// Task `index`'s output as recorded; false (and `out` untouched) when it cannot be read.
    virtual bool output(std::uint32_t index, boost::json::value& out) {
        (void)index;
        (void)out;
        return false;
    }
};

/// The `RunOutcome` envelope on `out`: `ok` is whether the run succeeded. With `leftovers`
/// not empty, the data also has `leftovers`: what dead runs had left, removed first.
/// `streams`: where released streams are read (nullptr: every result holds its own).
void write_run_outcome(json_sink& out, const plan& p, const run_report& report, const diagnostics& diags,
                       const sweep_report* leftovers = nullptr, stream_source* streams = nullptr);

/// `{cgroups: [{path, ownerPid, processesKilled, removed, error?}], containers: [{engine,
/// name, removed, error?}]}`.
void write_sweep_report(json_writer& w, const sweep_report& r);

/// The `RunOutcome` data object: `{runId, state, durationMs, error?, tasks, output,
/// resume?, leftovers?}` (`resume: {reused: [ids], executed: [ids]}` for a resumed run,
/// `leftovers` only when something was swept). Each captured stream is in the
/// document once, in its task's `stdout`/`stderr` (docs/CLI.md, "Machine output").
void write_run_report(json_writer& w, const plan& p, const run_report& report,
                      const sweep_report* leftovers = nullptr, stream_source* streams = nullptr);

/// Task `index`'s result as JSON (reports and jsonl events): `{state, attempts, exitCode,
/// signal, durationMs, argv?, vars?, command?, ..., stdout?, stderr?, error?, output}`. The
/// output leaves out the copies of the streams a builtin.shell.exec output holds, and an
/// aggregate's items those of its children. `stdout_text`/`stderr_text` replace the result's
/// own streams when given.
void write_task_result(json_writer& w, const plan& p, std::uint32_t index, const task_result& r,
                       const std::string* stdout_text = nullptr, const std::string* stderr_text = nullptr);

/// The `DoctorResult` data object: `{ready, workspace, checks: [{action, check, subject,
/// status, detail, blocking}]}`.
void write_doctor_report(json_writer& w, const doctor_report& report);

/// The `CheckResult` data object: `{valid, workflow, workflowDigest, planDigest, tasks}`.
void write_check_result(json_writer& w, const plan& p);

/// The `Version` data object.
void write_version(json_writer& w);

}  // namespace agentctl
