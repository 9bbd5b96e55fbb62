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
    std::string streams_path;     ///< path + "-streams": stream files, one folder per run
    exec::unique_fd streams_dir;  ///< opened on first use

    journal_error error(int rc, std::string_view what) const {
        return journal_detail::sqlite_error(rc, conn.get(), path, what);
    }
    /// The extended code of the connection's last failure.
    int last_rc() const { return sqlite3_extended_errcode(conn.get()); }
};

}  // namespace agentctl::detail

namespace agentctl::journal_detail {

/// Opens and checks the database (identification, schema, truncation, quick_check), creating
/// it for write access when it is missing or empty, and migrating an older schema.
journal_result<std::unique_ptr<detail::journal_db>> open_db(const std::string& path, journal_access access,
                                                            const journal_open_options& options);

/// The streams folder, opened (and with `create`, created) on first use. 0 or an errno value.
int streams_dir(detail::journal_db& db, bool create);

/// A stored stream: its row, and its bytes from the row or from its file.
struct stream_row {
    std::uint64_t length = 0;
    std::uint32_t crc = 0;
    std::string file;  ///< relative to the streams folder; empty when the bytes are in `data`
};

/// Streams the bytes of stream `id` to `chunk`, then checks length and checksum.
std::optional<journal_error> read_stream_bytes(detail::journal_db& db, std::int64_t id,
                                               const std::function<void(std::string_view)>& chunk);
std::optional<journal_error> load_stream(detail::journal_db& db, std::optional<std::int64_t> id,
                                         std::string& out);

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
