// The run journal: one SQLite database (WAL) that records runs, their task attempts and their
// final results, so that a run survives the death of the process that drives it and reports
// are read back from disk instead of memory. docs/JOURNAL.md has the schema, the commit
// order and the durability it gives.
//
// Two handles on a database:
// - `journal`: one connection, synchronous. Readers (`runs list/show`, the report, `resume`'s
//   decisions) and maintenance (claiming a run, gc). Use it from one thread at a time.
// - `journal_writer`: records a run while it runs. Its record_*() calls only queue; all SQLite
//   and file work happens on an executor the caller provides (the library creates no thread),
//   in group commits: one transaction takes everything queued since the last one.
//
// Nothing here receives secret values: the engine redacts before it records.
#pragma once

#include <agentctl/journal_run.hpp>
#include <agentctl/task_result.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace agentctl {

/// A value or the journal_error that prevented it.
template <typename T>
using journal_result = expected<T, journal_error>;

/// The schema version this agentctl writes and reads. A database with a higher one is refused
/// (`newer_schema`); a lower one is migrated when opened for writing. Version 2: a final
/// result's JSON may be stored as that of its attempt's end; version 3: an aggregate's final
/// may be recorded without its items, which are its children's; version 4: the tasks a run
/// never started may be recorded as ranges, one final for them all (docs/JOURNAL.md).
inline constexpr int journal_schema_version = 4;

// ---------------------------------------------------------------------------------------------
// Location

/// Reads one variable of agentctl's own environment.
using env_lookup = std::function<std::optional<std::string>(std::string_view)>;

/// Where the journal lives by default.
struct journal_location {
    std::string state_dir;  ///< absolute, no trailing slash
    std::string db_path;    ///< state_dir + "/journal.db"
};

/// The default location, a pure function of the environment: `$AGENTCTL_STATE_DIR`, else
/// `$XDG_STATE_HOME/agentctl`, else `$HOME/.local/state/agentctl`, with the home folder from
/// `passwd_home` when HOME is unset or empty. Empty values count as unset; a relative
/// XDG_STATE_HOME is ignored (XDG base directory rules). Fails (`unreadable`) when the winning
/// value is relative, or when no home folder is known.
journal_result<journal_location> default_journal_location(
    const env_lookup& env, const std::function<std::optional<std::string>()>& passwd_home);

/// The real user's home folder from the password database: the `passwd_home` argument above.
std::optional<std::string> passwd_home_dir();

/// Creates the state folder and its missing parents with mode 0700 (existing ones are left as
/// they are). Errors: `read_only`, `unreadable`.
std::optional<journal_error> make_state_dir(const std::string& dir);

// ---------------------------------------------------------------------------------------------
// Owners

/// The calling process as an owner.
journal_owner this_process_owner();

/// Whether `pid` is running and started at `start_time` (a reused pid is not alive).
bool process_alive(std::int64_t pid, std::uint64_t start_time);

/// The default liveness check of a recorded owner. Another host: alive (it cannot be told
/// from here, so it is never treated as dead). This host, another boot: dead. Otherwise
/// process_alive(). Safe to call from any thread.
bool owner_alive_here(const journal_owner& owner);

/// Tells whether a recorded owner is alive. Called on the thread doing the query.
using owner_alive_fn = std::function<bool(const journal_owner&)>;

// ---------------------------------------------------------------------------------------------
// Records

/// How a run ended (record_run_end()).
struct journal_run_end {
    journal_run_state state = journal_run_state::failed;  ///< succeeded, failed or cancelled
    std::uint64_t duration_ms = 0;
    std::optional<task_error> error;
};

/// An attempt about to start, recorded (and synced) before it starts.
struct attempt_intent {
    std::uint32_t task_index = 0;  ///< into plan::tasks
    std::string task_id;
    std::uint32_t attempt = 1;           ///< 1-based; unique per task within a run, across resumes
    std::string backend = "local";       ///< "local" | "slurm"
    std::string isolation;               ///< "process" | "container"
    std::vector<std::string> argv;       ///< rendered
    std::vector<std::string> env_names;  ///< names only, never values
    std::optional<std::string> cwd;
    boost::json::object limits;  ///< timeout, output caps, container resources, ...
};

/// What identifies a started attempt, recorded once known (a later one replaces it).
struct attempt_handle {
    std::uint32_t task_index = 0;
    std::uint32_t attempt = 1;
    std::optional<std::int64_t> pid;              ///< host process leader
    std::optional<std::uint64_t> pid_start_time;  ///< its field 22
    std::string cgroup;                           ///< cgroup v2 leaf path, if any
    std::string container;                        ///< container name, if any
    std::string container_engine;                 ///< "docker" | "podman"
    std::string slurm_job_id;
};

/// An attempt that finished. `result` is the attempt's task_result; its streams (stdout_text
/// and stderr_text, or output.stdout/output.stderr when streams_in_output) are stored once,
/// apart from the rest, which is stored as JSON.
struct attempt_end {
    std::uint32_t task_index = 0;
    std::uint32_t attempt = 1;
    task_result result;
    bool cleanup_failed = false;  ///< something the attempt started may be left (uncertain)
};

/// A task's final result (after all its attempts, or without any: skipped, cancelled,
/// aggregates, builtin.assign).
struct task_final {
    std::uint32_t task_index = 0;
    std::string task_id;
    task_result result;
    /// The streams are those of this attempt's recorded end: nothing is stored twice and the
    /// result's own streams are ignored. Without it the result's streams are stored here.
    std::optional<std::uint32_t> streams_attempt;
    bool reused = false;  ///< resume: taken over from an earlier segment, not executed again
};

/// Tasks that never started in this segment and never will (the run was cancelled, stopped or
/// failed first), recorded once for them all instead of a final each: every task of `ranges`
/// has `result` as its final result, as if record_final() had recorded it for each.
struct unstarted_tasks {
    /// [first, end) task indices, ascending and disjoint; tasks without a final recorded in this
    /// segment, aggregates never.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
    task_result result;  ///< skipped or cancelled, no attempt, no streams
};

// ---------------------------------------------------------------------------------------------
// Reading

/// One line of `runs list`.
struct journal_run_summary {
    std::string run_id;
    std::string workflow_name;
    std::string workflow_path;
    journal_run_state state = journal_run_state::running;  ///< interrupted when the owner is dead
    std::int64_t created_ms = 0;
    std::optional<std::int64_t> ended_ms;
    std::optional<std::uint64_t> duration_ms;
    std::uint32_t task_count = 0;
    std::uint32_t segment = 0;
    /// Final results per task_state name; foreach and matrix parents are not counted.
    std::map<std::string, std::uint32_t> tasks_by_state;
    std::uint32_t reused = 0;                             ///< final results taken over by a resume
    std::uint32_t recorded = 0;                           ///< tasks with a final result
    journal_owner owner;
};

/// A task's final result as read back.
struct journal_task_result {
    std::uint32_t task_index = 0;
    /// Empty for a task recorded among unstarted_tasks: the journal keeps no id per task there
    /// (plan::task_id(task_index) names it).
    std::string task_id;
    std::uint32_t segment = 0;
    std::int64_t recorded_ms = 0;
    bool reused = false;
    std::optional<std::uint32_t> streams_attempt;
    /// Streams are filled in only when asked for; otherwise they are empty strings.
    task_result result;
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
};

/// One recorded attempt: its intent, and its handle and end where recorded.
struct journal_attempt {
    attempt_intent intent;
    std::uint32_t segment = 0;
    std::int64_t intent_ms = 0;
    std::optional<attempt_handle> handle;
    std::int64_t handle_ms = 0;
    std::optional<task_result> end;  ///< streams not loaded (but by load_attempt(), when asked)
    std::int64_t ended_ms = 0;
    bool cleanup_failed = false;
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;

    /// No end, or an end that may have left an effect behind: timed out, cancelled once its
    /// process or container existed (a handle was recorded; on Slurm, any cancel), or a
    /// cleanup failure. A non-zero exit is a definite failure; a spawn failure, or a local
    /// attempt cancelled before its process was spawned, had no effect.
    bool uncertain() const;
};

/// A run whose owner is dead, with what it may have left running.
struct journal_dead_run {
    std::string run_id;
    journal_owner owner;
    /// Handles of attempts without an end, or whose cleanup failed.
    std::vector<attempt_handle> handles;
};

/// What gc() did.
struct journal_gc_report {
    std::uint32_t runs_removed = 0;
    std::uint32_t runs_kept = 0;
    std::uint32_t live_runs_kept = 0;          ///< older than the newest N but live: never removed
    std::uint32_t orphan_streams_removed = 0;  ///< stream files no row refers to (a crash)
    std::uint64_t bytes_before = 0;            ///< database, WAL and stream files
    std::uint64_t bytes_after = 0;
};

/// Which captured stream.
enum class journal_stream { stdout_stream, stderr_stream };

/// How hard the writer makes commits durable.
enum class journal_durability {
    /// WAL, synchronous=NORMAL, no fsync on commit: a commit survives agentctl being killed at
    /// any point (it is in the OS); a power cut may lose the last commits, never tear one.
    normal,
    /// synchronous=FULL, and stream files are fdatasync'ed before the row naming them commits.
    full,
};

enum class journal_access {
    read,   ///< an existing journal; never written (also on a read-only file system)
    write,  ///< created when missing (its folder must exist) or empty
};

struct journal_open_options {
    journal_durability durability = journal_durability::normal;
    std::chrono::milliseconds busy_timeout{10000};  ///< how long to wait for another writer's lock
    /// Streams of at least this many bytes go to a file of their own beside the database
    /// (docs/JOURNAL.md, "Streams"); smaller ones are stored in it.
    std::size_t stream_file_threshold = 64 * 1024;
    /// Page size of a journal created by this open (a power of two, 512..65536); ignored for
    /// an existing one.
    int page_size = 4096;
    /// PRAGMA wal_autocheckpoint of a writing connection: pages in the WAL before a commit
    /// checkpoints it (0: never; the last connection still does when it closes).
    int wal_autocheckpoint = 1000;
    /// PRAGMA quick_check when opening; off, only the header, the schema and the file size are
    /// checked (SQLite still reports damage it meets later as `corrupt`).
    bool quick_check = true;
    /// The quick_check is skipped while the file is exactly as the last clean close of a
    /// writing connection left it (its seal, `PATH-seal`, matches the file's identity, size,
    /// mtime and ctime, and no WAL is left over) and the check that the seal carries over ran
    /// less than this long ago (docs/JOURNAL.md, "The integrity check"). Zero: check at every
    /// open. Its cost grows with the journal (2.6 ms per MiB), this bound does not.
    std::chrono::milliseconds quick_check_interval = std::chrono::hours(24 * 7);
};

namespace detail {
struct journal_db;
class journal_writer_impl;
}  // namespace detail

/// One connection to a journal, synchronous. Movable; use from one thread at a time.
class journal {
public:
    /// Opens `path`, checks that it is an agentctl journal of a schema this agentctl knows
    /// and, for writing, that it can be written (creating it when missing or empty). Errors:
    /// missing, unreadable, read_only, foreign, newer_schema, corrupt, busy, io_error.
    static journal_result<journal> open(const std::string& path, journal_access access,
                                        const journal_open_options& options = {});

    journal(journal&&) noexcept;
    journal& operator=(journal&&) noexcept;
    ~journal();

    const std::string& path() const;
    /// Whether this open ran PRAGMA quick_check (false: it was off, or the seal showed the
    /// file unchanged since a check within journal_open_options::quick_check_interval).
    bool quick_checked() const;

    /// Runs, newest first (by creation). `alive` (optional) turns a running run whose owner
    /// is dead into `interrupted`.
    journal_result<std::vector<journal_run_summary>> list_runs(std::size_t limit,
                                                               const owner_alive_fn& alive = {});

    /// One run's record (the workflow source included).
    journal_result<journal_run> load_run(std::string_view run_id);

    /// The run's final results in plan order (task_index), one at a time, without keeping
    /// them: `fn` returns false to stop. `with_streams` loads each task's stdout and stderr.
    /// A task recorded among unstarted_tasks comes as its own result, without its id.
    std::optional<journal_error> for_each_result(std::string_view run_id, bool with_streams,
                                                 const std::function<bool(journal_task_result&)>& fn);
    /// The same for the tasks in [first, end) only (an aggregate's children: a range of the
    /// primary key). Usable while another of this connection's readers is part way through.
    std::optional<journal_error> for_each_result(std::string_view run_id, bool with_streams,
                                                 std::uint32_t first, std::uint32_t end,
                                                 const std::function<bool(journal_task_result&)>& fn);

    /// One task's final result by id; nullopt inside when the task has none recorded under its
    /// id (a task recorded among unstarted_tasks has none: load_result_at() finds it).
    journal_result<std::optional<journal_task_result>> load_result(std::string_view run_id,
                                                                   std::string_view task_id,
                                                                   bool with_streams);

    /// Task `task_index`'s final result (by the primary key: what a report reading results
    /// one at a time in plan order wants); nullopt inside when it has none recorded.
    journal_result<std::optional<journal_task_result>> load_result_at(std::string_view run_id,
                                                                      std::uint32_t task_index,
                                                                      bool with_streams);

    /// The raw captured text of a task's final result, in chunks (checked against its
    /// recorded length and checksum: a mismatch is `corrupt`). No final result recorded under
    /// that id (one recorded among unstarted_tasks has no stream): unknown_run names the task.
    /// With `attempt`: that attempt's own (an earlier attempt of a retried task); unknown_run
    /// when it has no end recorded.
    std::optional<journal_error> read_stream(std::string_view run_id, std::string_view task_id,
                                             journal_stream which,
                                             const std::function<void(std::string_view)>& chunk,
                                             std::optional<std::uint32_t> attempt = std::nullopt);

    /// Every recorded attempt in (task_index, attempt) order; `fn` returns false to stop.
    std::optional<journal_error> for_each_attempt(std::string_view run_id,
                                                  const std::function<bool(journal_attempt&)>& fn);

    /// Attempt `attempt` of task `task_id` (nullopt inside when there is none), its end's
    /// streams read too when `with_streams`.
    journal_result<std::optional<journal_attempt>> load_attempt(std::string_view run_id,
                                                                std::string_view task_id,
                                                                std::uint32_t attempt, bool with_streams);

    /// The last attempt of every task that has no succeeded final result, when that attempt
    /// is uncertain (journal_attempt::uncertain()): what makes resume refuse.
    journal_result<std::vector<journal_attempt>> uncertain_attempts(std::string_view run_id);

    /// Runs recorded as running whose owner `alive` says is dead, with their open handles.
    journal_result<std::vector<journal_dead_run>> dead_runs(const owner_alive_fn& alive);

    /// Claims a run for `resume` (write access; BEGIN IMMEDIATE, so of two claimers exactly
    /// one wins): `run_live` if its state is running and `alive` says its owner is alive;
    /// `unknown_run` if there is none. Otherwise the owner becomes `owner`, the state running,
    /// the segment one more (returned); the end and error are cleared.
    journal_result<std::uint32_t> claim_run(std::string_view run_id, const journal_owner& owner,
                                            const owner_alive_fn& alive);

    /// Sets a running run to `interrupted` if its owner is still `expected` (write access).
    std::optional<journal_error> mark_interrupted(std::string_view run_id, const journal_owner& expected);

    /// Deletes all but the newest `keep` runs (a live one, by `alive`, is kept whatever its
    /// age), their rows and stream files, stream files no row refers to, then reclaims space
    /// (incremental vacuum, WAL truncated). Write access.
    journal_result<journal_gc_report> gc(std::size_t keep, const owner_alive_fn& alive);

    /// PRAGMA integrity_check, then every stream's length and checksum. Slow on large
    /// journals; for tests and `doctor`-like checks.
    std::optional<journal_error> verify();

    /// Files that make up the journal: the database, -wal, -shm, -seal and every stream file.
    std::vector<std::string> files() const;

    /// Their size in bytes: the database, its WAL and every stream file (gc's bytes_before).
    std::uint64_t bytes() const;

private:
    friend class detail::journal_writer_impl;
    explicit journal(std::unique_ptr<detail::journal_db> db);
    std::unique_ptr<detail::journal_db> db_;
};

// ---------------------------------------------------------------------------------------------
// Writing

/// Counters of a writer (for tests and benchmarks).
struct journal_writer_stats {
    std::uint64_t records = 0;        ///< record_*() calls committed (or failed)
    std::uint64_t commits = 0;        ///< transactions committed
    std::uint64_t paced_commits = 0;  ///< of which waited for commit_interval first
    std::uint64_t busy_paced_commits = 0;  ///< of those, waited for busy_commit_interval
    std::uint64_t largest_batch = 0;  ///< records in the largest transaction
    std::uint64_t stream_bytes = 0;   ///< captured bytes stored
    std::uint64_t stream_files = 0;   ///< of which in files of their own
    std::uint64_t queued_bytes = 0;   ///< bytes queued and not yet committed (now)
    std::uint64_t peak_queued_bytes = 0;
};

struct journal_writer_options {
    /// record_*() returns true once this many bytes are queued and not yet committed: the
    /// caller should wait for async_sync() before it records (or captures) more.
    std::uint64_t high_water_bytes = 64 * 1024 * 1024;
    /// Group commits are paced: while at least 8 attempts are in flight (intents recorded,
    /// ends not yet) and at most a quarter of them wait on a sync, a commit begins no sooner
    /// than this long after the previous one ended, so that it takes what arrives meanwhile.
    /// A lone caller, a few attempts, a close or a queue above the high-water mark never
    /// wait; after a paced commit that answered a single sync, the next 32 do not either.
    /// Records no sync waits for (handles, ends, finals) always wait out the interval, and
    /// go with the next commit a sync or a close asks for.
    /// 0: every commit begins as soon as it can. docs/JOURNAL.md, "Group commits".
    std::chrono::microseconds commit_interval{10000};
    /// The interval while the machine's CPUs are busy (less than 15 % of their time idle,
    /// looked at every quarter second at most): a start that waits for its commit then holds
    /// back no work a CPU was free to do, and fewer commits leave more CPU to the tasks. Not
    /// above commit_interval: the CPUs are not looked at.
    std::chrono::microseconds busy_commit_interval{30000};
    /// The share of CPU time idle since its previous call, in [0, 1], or negative when not
    /// known; called on the worker. Empty: read from /proc/stat. For tests, and for an
    /// application whose tasks run on CPUs that /proc/stat does not describe.
    std::function<double()> cpu_idle;
};

namespace detail {
void journal_async_sync(journal_writer_impl& w,
                        boost::asio::any_completion_handler<void(std::optional<journal_error>)> h);
void journal_async_claim(journal_writer_impl& w, std::string run_id, journal_owner owner,
                         owner_alive_fn alive,
                         boost::asio::any_completion_handler<void(std::optional<journal_error>)> h);
void journal_async_close(journal_writer_impl& w,
                         boost::asio::any_completion_handler<void(std::optional<journal_error>)> h);
}  // namespace detail

/// Records one run. record_*() only queue (a mutex, a move) and never block on SQLite; the
/// records are committed in order on `worker`, in group commits: each transaction takes every
/// record queued when it begins, and records queued meanwhile wait for the next one.
///
/// A failed commit (disk full, I/O error, ...) is sticky: that transaction is rolled back,
/// nothing later is written, and every later async_sync() completes with the error. What was
/// committed before stays readable.
///
/// Thread safety: record_*(), async_*() and stats() may be called from any thread (the run's
/// executor, typically); records are committed in the order the calls were made. The writer
/// must outlive no operation: destroying it with records queued still commits them on
/// `worker` (if it keeps running) and then closes the connection there.
class journal_writer {
public:
    /// `ex`: the default executor of completions (the run's). `worker`: where every SQLite
    /// call and stream-file write happens; a one-thread pool or an io_context run by one
    /// thread, used by nothing that must not wait for a commit. `db` must be opened for write.
    journal_writer(boost::asio::any_io_executor ex, boost::asio::any_io_executor worker, journal db,
                   journal_writer_options options = {});
    journal_writer(const journal_writer&) = delete;
    journal_writer& operator=(const journal_writer&) = delete;
    ~journal_writer();

    /// A new run (its id must be unused: else `run_exists`, sticky). Record it, then
    /// async_sync() before any effect. The writer records into this run from then on.
    bool record_run(journal_run run);
    /// Before an attempt starts; then async_sync() before starting it.
    bool record_intent(attempt_intent intent);
    bool record_handle(attempt_handle handle);
    bool record_end(attempt_end end);
    bool record_final(task_final final);
    /// An attempt's end and the task's final result naming it, queued together: they are
    /// committed in one transaction, so a crash never leaves the end without its final.
    bool record_end_and_final(attempt_end end, task_final final);
    /// The same with the final that the engine records after a task's last attempt: the end's
    /// result without its streams (streams_attempt = end.attempt, not reused), which the
    /// writer takes from the end instead of a copy (docs/JOURNAL.md, "results").
    bool record_end_and_final(attempt_end end, std::string task_id);
    /// The tasks left unstarted when the segment ends: one row per range, whatever their count.
    /// Replaces the finals earlier segments recorded for them, and the ranges earlier segments
    /// recorded (every task then has a final of this segment or one it reused).
    bool record_unstarted(unstarted_tasks tasks);
    bool record_run_end(journal_run_end end);

    /// Completes when every record queued before this call is committed.
    ///
    /// Completion signature: void(std::optional<journal_error>): nullopt when committed, else
    /// the writer's (sticky) error. The handler runs through its associated executor (default:
    /// `ex`), never inside this call. Not cancellable: it waits for the commit in progress,
    /// which SQLite bounds by the busy timeout.
    template <typename Token>
    auto async_sync(Token&& token) {
        return boost::asio::async_initiate<Token, void(std::optional<journal_error>)>(
            [](auto handler, detail::journal_writer_impl* w) {
                detail::journal_async_sync(*w, std::move(handler));
            },
            token, impl_.get());
    }

    /// Claims the existing run `run_id` for resume (see journal::claim_run; `alive` is called
    /// on `worker`), queued in order with the records; the writer records into it afterwards.
    /// Completion signature: void(std::optional<journal_error>) (run_live, unknown_run, ...:
    /// sticky). Not cancellable.
    template <typename Token>
    auto async_claim(std::string run_id, journal_owner owner, owner_alive_fn alive, Token&& token) {
        return boost::asio::async_initiate<Token, void(std::optional<journal_error>)>(
            [](auto handler, detail::journal_writer_impl* w, std::string id, journal_owner o,
               owner_alive_fn a) {
                detail::journal_async_claim(*w, std::move(id), std::move(o), std::move(a),
                                            std::move(handler));
            },
            token, impl_.get(), std::move(run_id), std::move(owner), std::move(alive));
    }

    /// Commits what is queued, checkpoints and closes the connection. Later records are
    /// dropped and later syncs complete with `closed`. Completion signature as async_sync.
    template <typename Token>
    auto async_close(Token&& token) {
        return boost::asio::async_initiate<Token, void(std::optional<journal_error>)>(
            [](auto handler, detail::journal_writer_impl* w) {
                detail::journal_async_close(*w, std::move(handler));
            },
            token, impl_.get());
    }

    journal_writer_stats stats() const;

    /// The run's segment (0 for a new run, the claimed one after async_claim); valid after
    /// the record or the claim was committed.
    std::uint32_t segment() const;

private:
    std::shared_ptr<detail::journal_writer_impl> impl_;
};

}  // namespace agentctl
