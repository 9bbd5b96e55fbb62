// A run as the journal records it, and the journal's errors: what the engine and the reports
// name without the journal itself (journal.hpp). Plain values, no Asio, no SQLite.
#pragma once

#include <agentctl/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl {

/// Why a journal operation failed. The CLI reports every one as exit 5 (persistence).
enum class journal_errc {
    missing = 1,   ///< no journal at the path (or an empty file) when one is read
    unreadable,    ///< cannot be opened or read: a directory, not a regular file, no permission
    read_only,     ///< must be written but cannot: read-only file, folder or file system
    foreign,       ///< not agentctl's: another application's SQLite database, or not SQLite at all
    newer_schema,  ///< written by a newer agentctl (schema version above journal_schema_version)
    corrupt,       ///< damaged or truncated database, or a stream whose length or checksum is wrong
    run_live,      ///< the run's owner is alive: it is not claimed twice
    unknown_run,   ///< no run with that id
    run_exists,    ///< a new run was given the id of a recorded one
    disk_full,     ///< the file system is full (SQLITE_FULL, ENOSPC)
    io_error,      ///< another I/O error while reading or writing
    busy,          ///< another process held the database lock for longer than the busy timeout
    closed,        ///< the writer was closed, or has no run yet
    internal,      ///< misuse or an unexpected SQLite result (the message has SQLite's text)
};
/// Stable snake_case code: "missing", "unreadable", "read_only", "foreign", "newer_schema",
/// "corrupt", "run_live", "unknown_run", "run_exists", "disk_full", "io_error", "busy",
/// "closed", "internal".
std::string_view to_string(journal_errc);

/// A journal failure. The message names the database file (or the stream file) concerned.
struct journal_error {
    journal_errc code = journal_errc::internal;
    std::string message;
};

/// The process that drives a run: (host, boot, pid, start time) names it uniquely.
struct journal_owner {
    std::string host;
    std::string boot_id;  ///< /proc/sys/kernel/random/boot_id; pids compare within a boot only
    std::int64_t pid = 0;
    std::uint64_t start_time = 0;  ///< clock ticks after boot: field 22 of /proc/<pid>/stat
};

/// A run's state as stored. `interrupted` is set when a dead owner's leftovers were swept;
/// readers also report a `running` run whose owner is dead as interrupted.
enum class journal_run_state { running, succeeded, failed, cancelled, interrupted };
std::string_view to_string(journal_run_state);
std::optional<journal_run_state> parse_journal_run_state(std::string_view);

/// A run, recorded before any effect. Strings are stored as given; the *_json fields must hold
/// JSON text (the journal stores them without parsing).
struct journal_run {
    std::string run_id;
    std::string workflow_name;
    std::string workflow_path;    ///< as given on the command line
    std::string workflow_source;  ///< the source bytes, so that resume runs exactly this
    std::string workflow_digest;  ///< "sha256:<hex>"
    std::string plan_digest;
    std::string base_dir;             ///< the workspace root
    std::string inputs_json = "{}";   ///< merged inputs (never secret values)
    std::string argv_json = "[]";     ///< agentctl's own argv
    std::string options_json = "{}";  ///< jobs, keep_going, backend, ...
    std::string agentctl_version;
    /// Tasks that run: foreach and matrix children included, their parents (aggregates) not.
    /// (Runs recorded by earlier versions counted the parents too.)
    std::uint32_t task_count = 0;
    journal_owner owner;
    // Filled by the journal; ignored by record_run():
    std::int64_t created_ms = 0;  ///< Unix time
    std::uint32_t segment = 0;    ///< 0, then +1 per resume claim
    std::int64_t claimed_ms = 0;  ///< last claim (resume), 0 if never
    journal_run_state state = journal_run_state::running;
    std::optional<std::int64_t> ended_ms;
    std::optional<std::uint64_t> duration_ms;
    std::optional<task_error> error;  ///< run-level failure
};

}  // namespace agentctl
