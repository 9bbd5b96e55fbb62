// One open journal database: its connection, where its stream files live, and the helpers
// that readers and the writer share. Private to src/journal.
#pragma once

#include <agentctl/journal.hpp>

#include "exec/sys.hpp"
#include "journal/sqlite.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace agentctl::detail {

struct journal_db {
    journal_detail::connection conn;
    std::string path;
    journal_access access = journal_access::read;
    journal_open_options options;
    /// The schema version as opened (a writer's is journal_schema_version, after migrating):
    /// what the readers may find, `unstarted` from version 4 on.
    std::int64_t schema_version = journal_schema_version;
    std::string streams_path;              ///< path + "-streams": stream files, one folder per run
    exec::unique_fd streams_dir;           ///< opened on first use
    journal_detail::statement blob_query;  ///< SELECT data FROM streams (declared after conn: closed first)
    /// BEGIN IMMEDIATE and COMMIT, prepared once: the writer commits hundreds of times a second.
    journal_detail::statement begin_immediate, commit;

    /// The integrity check (docs/JOURNAL.md, "The integrity check"): whether this open ran
    /// quick_check, and when the check that the file's state descends from ran (ms since the
    /// epoch). A writing connection that closes without trouble seals the file with it.
    bool quick_checked = false;
    std::int64_t checked_ms = 0;
    bool seal_on_close = false;
    /// A failure was met: the close leaves no seal, and the next open checks.
    mutable bool trouble = false;

    journal_db() = default;
    journal_db(const journal_db&) = delete;
    journal_db& operator=(const journal_db&) = delete;
    /// Closes the connection, then writes the seal (seal_on_close, no trouble).
    ~journal_db();

    journal_error error(int rc, std::string_view what) const {
        trouble = true;
        return journal_detail::sqlite_error(rc, conn.get(), path, what);
    }
    /// The extended code of the connection's last failure.
    int last_rc() const { return sqlite3_extended_errcode(conn.get()); }
};

}  // namespace agentctl::detail

namespace agentctl::journal_detail {

/// Opens and checks the database (identification, schema, truncation, quick_check), creating
/// it whole for write access when it is missing, and migrating an older schema.
journal_result<std::unique_ptr<detail::journal_db>> open_db(const std::string& path, journal_access access,
                                                            const journal_open_options& options);

/// The streams folder, opened (and with `create`, created) on first use. 0 or an errno value.
int streams_dir(detail::journal_db& db, bool create);

/// A stream is four columns: LENGTH, CRC, FILE (relative to the streams folder, or NULL) and
/// BLOB (the `streams` row holding the bytes when there is no file). Delivers the bytes of the stream whose
/// columns start at `first` to `chunk`, then checks length and checksum (`what` names it in errors). A NULL
/// or zero length is an empty stream.
std::optional<journal_error> read_stored_stream(detail::journal_db& db, const journal_detail::statement& s,
                                                int first, std::string_view what,
                                                const std::function<void(std::string_view)>& chunk);

/// Wraps a body in BEGIN IMMEDIATE ... COMMIT, rolling back when it fails.
std::optional<journal_error> in_write_transaction(detail::journal_db& db, std::string_view what,
                                                  const std::function<std::optional<journal_error>()>& body);

std::int64_t now_ms();

/// The run's final-result counts as stored in runs.counts_json when it ends.
std::string counts_json_of(detail::journal_db& db, std::int64_t run_seq, std::optional<journal_error>& error);

/// journal::claim_run() inside the caller's write transaction: the run's key and new segment.
journal_result<std::pair<std::int64_t, std::uint32_t>> claim_in_transaction(detail::journal_db& db,
                                                                            std::string_view run_id,
                                                                            const journal_owner& owner,
                                                                            const owner_alive_fn& alive);

}  // namespace agentctl::journal_detail
