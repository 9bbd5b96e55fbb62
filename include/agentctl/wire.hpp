// The product's wire format: the JSON documents agentctl prints (docs/CLI.md, "Machine
// output"). Every member order is fixed, so each document is byte-stable.
//
// `--output json` prints one envelope on stdout, `{"apiVersion","kind","ok":true,"data",
// "diagnostics"}`, or a failure envelope on stderr, `{"apiVersion","kind":"Error","ok":false,
// "error":{message,exitCode},"diagnostics"}`. `--output jsonl` prints one event per line as
// tasks start and finish, then the final envelope.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/error.hpp>
#include <agentctl/journal_run.hpp>
#include <agentctl/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl {

// What the documents are written from; their headers say what each is.
struct plan;
struct run_event;
struct run_report;
struct task_result;
struct sweep_report;
struct doctor_report;
class journal;

/// A success envelope of `kind` whose `data` is what `write_data` writes.
void write_success_envelope(json_sink& out, std::string_view kind,
                            const std::function<void(json_writer&)>& write_data, const diagnostics& diags);

/// The failure envelope: `kind: "Error"` with `{message, exitCode}`.
void write_error_envelope(json_sink& out, std::string_view message, exit_status status,
                          const diagnostics& diags);

/// One jsonl line (without the newline): `{event, taskId, attempt, elapsedMs, result?}`.
void write_event(json_writer& w, const plan& p, const run_event& e);

/// Where a report reads the results a run with a journal did not keep in memory
/// (run_report::tasks is empty then), and an aggregate's items it recorded as its children's
/// (task_result::output_released).
class result_source {
public:
    virtual ~result_source() = default;
    /// Calls `fn` with the recorded final result of each task in [first, end) that has one, in
    /// plan order and one at a time, with its captured streams when `with_streams`; `fn`
    /// returns false to stop.
    virtual void each(std::uint32_t first, std::uint32_t end, bool with_streams,
                      const std::function<bool(std::uint32_t index, task_result& r)>& fn) = 0;
};

/// A run's results as its journal holds them. What cannot be read is left out, and the first
/// failure kept in `error`.
class journal_results final : public result_source {
public:
    journal_results(journal& db, std::string run_id) : db_(db), run_id_(std::move(run_id)) {}
    void each(std::uint32_t first, std::uint32_t end, bool with_streams,
              const std::function<bool(std::uint32_t index, task_result& r)>& fn) override;
    std::optional<journal_error> error;

private:
    journal& db_;
    std::string run_id_;
};

/// The `RunOutcome` envelope on `out`: `ok` is whether the run succeeded. With `leftovers`
/// not empty, the data also has `leftovers`: what dead runs had left, removed first.
/// `results`: where the results the report does not hold are read (nullptr: it holds them).
void write_run_outcome(json_sink& out, const plan& p, const run_report& report, const diagnostics& diags,
                       const sweep_report* leftovers = nullptr, result_source* results = nullptr);

/// `{cgroups: [{path, ownerPid, processesKilled, removed, error?}], containers: [{engine,
/// name, removed, error?}]}`.
void write_sweep_report(json_writer& w, const sweep_report& r);

/// The `RunOutcome` data object: `{runId, state, durationMs, error?, tasks, output,
/// resume?, leftovers?}` (`resume: {reused: [ids], executed: [ids]}` for a resumed run,
/// `leftovers` only when something was swept). Each captured stream is in the document once,
/// in its task's `stdout`/`stderr` (docs/CLI.md, "Machine output"). Results are written one at
/// a time: from `report.tasks`, else read from `results`; a task with neither (a journal
/// that failed during the run) is written from its outcome.
void write_run_report(json_writer& w, const plan& p, const run_report& report,
                      const sweep_report* leftovers = nullptr, result_source* results = nullptr);

/// Task `index`'s result as JSON (reports and jsonl events): `{state, attempts, exitCode,
/// signal, durationMs, argv?, vars?, command?, ..., stdout?, stderr?, error?, output}`. The
/// output leaves out the copies of the streams a builtin.shell.exec output holds, and an
/// aggregate's items those of its children; an aggregate recorded without its items
/// (`output_released`) has them read from `results`, child by child (without it: null).
void write_task_result(json_writer& w, const plan& p, std::uint32_t index, const task_result& r,
                       result_source* results = nullptr);

/// The `DoctorResult` data object: `{ready, workspace, checks: [{action, check, subject,
/// status, detail, blocking}]}`.
void write_doctor_report(json_writer& w, const doctor_report& report);

/// The `CheckResult` data object: `{valid, workflow, workflowDigest, planDigest, tasks}`.
void write_check_result(json_writer& w, const plan& p);

/// The `Version` data object.
void write_version(json_writer& w);

}  // namespace agentctl
