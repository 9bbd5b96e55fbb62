// What `run`, `resume` and `runs` share about the journal: where it is, opening it (every
// failure is exit 5 naming the file), its writer thread and the sweep of what dead runs left.
#pragma once

#include "cli.hpp"

#include <agentctl/compensation.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/resume.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/thread_pool.hpp>

#include <functional>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl::cli {

/// The journal the command line names: `--db PATH`, else journal.db in the state folder
/// (created with mode 0700 when `create_dir`). nullopt with `error` when the state folder is
/// unknown or cannot be made.
std::optional<std::string> journal_path(const command_line& cl, bool create_dir, journal_error& error);

/// Whether the command line uses the default location (no --db).
inline bool default_journal(const command_line& cl) {
    return !cl.db;
}

/// Opens the command line's journal. On failure prints it (exit 5, the file named) and
/// returns nullopt with `status` set.
std::optional<journal> open_journal(const command_line& cl, journal_access access, int& status);

/// `--last`: the newest run of `db` becomes cl.run_id. A status when there is none (exit 5,
/// printed); nothing otherwise, and without --last.
std::optional<int> take_last_run(command_line& cl, journal& db);

/// A journal failure as the CLI prints it: exit 5.
int print_journal_failure(const command_line& cl, const journal_error& e);

/// The writer of a run with its one thread: every SQLite call and stream write happens there,
/// never on the run's loop.
class journal_recorder {
public:
    journal_recorder(boost::asio::any_io_executor run_executor, journal db);
    ~journal_recorder();
    journal_writer& writer() { return *writer_; }
    const std::string& path() const { return path_; }
    /// Commits what is queued and closes; runs `io` until it has. The writer's error, if any.
    std::optional<journal_error> close(boost::asio::io_context& io);

private:
    std::string path_;
    boost::asio::thread_pool thread_{1};
    std::unique_ptr<journal_writer> writer_;
    bool closed_ = false;
};

/// What the sweep of dead runs found: their cgroups (sweep_dead_owners), their Slurm jobs
/// (when squeue and scancel are in the PATH), and the runs now recorded as interrupted.
struct dead_run_sweep {
    sweep_report removed;
    std::vector<std::string> interrupted;
    std::vector<journal_owner> dead_owners;  ///< of the journal's dead runs: their leftovers are its
    diagnostics warnings;                ///< e.g. Slurm could not be asked
    std::optional<journal_error> error;  ///< the journal could not be read or written
};

/// Sweeps before anything starts. `db` (write access) may be null (`--no-journal`): then only
/// cgroups are looked at. `whole_host` (`runs gc`): also cancel every dead agentctl run's
/// Slurm jobs, not only those of the journal's dead runs, and remove dead owners' containers
/// on every engine in the PATH (a run does that itself, on the engines it uses).
dead_run_sweep sweep_dead_runs(journal* db, bool whole_host);

/// When the run `run_id` is dead (recorded as running, its agentctl gone: killed together
/// with its watchdog) and processes it started still run on this host: a warning in `d` that
/// says so and how to stop them. Nothing otherwise, nor when the journal cannot tell.
void warn_running_leftovers(journal& db, const std::string& run_id, diagnostics& d);

/// The journal's record of a run started from this command line (the engine fills in ids,
/// digests, task count and owner).
journal_run run_record(const command_line& cl, const session& s, const std::string& base_dir);

/// A front end of its own for execute_run() (`agentctl parallel`): its events instead of the
/// progress line, failure lines and summary, a gate of its own, and its own report.
struct run_frontend {
    /// Called once the run's loop exists and agentctl's output goes through its queues, before
    /// anything runs: the place to make what `events` and `gate` point to.
    std::function<void(boost::asio::io_context& io)> prepare;
    event_sink* events = nullptr;
    dispatch_gate* gate = nullptr;  ///< asked too, before the gate that waits for agentctl's readers
    bool pass_output = false;       ///< run_settings::pass_output (`agentctl parallel -u`)
    task_expiry* expiry = nullptr;  ///< bound by the run while it runs
    /// Called on the run's loop as soon as the run has ended: what keeps the loop busy (a
    /// timer) must stop there, or the loop never returns.
    std::function<void()> ended;
    /// Set by execute_run() before the run starts: cancels the run as a first SIGINT does,
    /// `reason` said as its cause.
    std::function<void(const std::string& reason)> cancel;
    /// Called instead of the summary once the run ended normally; returns the exit status.
    /// `results`: the journal's results (nullptr without a journal: then `report.tasks`).
    std::function<int(const run_report& report, result_source* results)> report;
};

/// Runs `p` (cmd_run.cpp): a new run (`resume` null; `record` is its journal record), or the
/// prepared resume. `db`: the journal to record into (write access), none for --no-journal.
/// `swept`: what the sweep before the run removed, reported with the run's own.
/// Prints progress and the report (or lets `frontend` do it); returns the exit status.
int execute_run(const command_line& cl, watchdog* watch, const plan& p, const diagnostics& diags,
                const std::string& base_dir, std::optional<journal> db, dead_run_sweep swept,
                journal_run record, const resume_plan* resume, run_frontend* frontend = nullptr);

/// Runs the compensation `cp` plans (cmd_compensate.cpp; `compensate`, and `run` when the
/// workflow says `onFailure: automatic`): a new run of `db` linked to its source.
int start_compensation(const command_line& cl, watchdog* watch, std::optional<journal> db,
                       const compensation_plan& cp);

/// After a resumed run's human summary: how many tasks were reused and executed.
void print_resume_summary(const command_line& cl, const plan& p, const run_report& report);

/// "2026-12-01T11:20:03Z" of Unix milliseconds.
std::string utc_text(std::int64_t ms);

}  // namespace agentctl::cli
