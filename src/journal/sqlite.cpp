#include "journal/sqlite.hpp"

namespace agentctl::journal_detail {

journal_errc errc_of(int rc) {
    switch (rc & 0xff) {
        case SQLITE_FULL:
            return journal_errc::disk_full;
        case SQLITE_CORRUPT:
            return journal_errc::corrupt;
        case SQLITE_NOTADB:
            return journal_errc::foreign;
        case SQLITE_READONLY:
            return journal_errc::read_only;
        case SQLITE_CANTOPEN:
        case SQLITE_PERM:
        case SQLITE_AUTH:
            return journal_errc::unreadable;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            return journal_errc::busy;
        case SQLITE_IOERR:
            // A short read is a file that ends before its header says it does.
            if (rc == SQLITE_IOERR_SHORT_READ) return journal_errc::corrupt;
            return journal_errc::io_error;
        default:
            return journal_errc::internal;
    }
}

journal_error sqlite_error(int rc, sqlite3* db, const std::string& path, std::string_view what) {
    journal_error e;
    e.code = errc_of(rc);
    e.message = "journal " + path + ": " + std::string(what) + ": ";
    // sqlite3_errmsg describes the last failure of this connection; fall back to the code.
    const char* text = db ? sqlite3_errmsg(db) : nullptr;
    if (!text || !*text || (db && sqlite3_extended_errcode(db) != rc)) text = sqlite3_errstr(rc);
    e.message += text;
    switch (e.code) {
        case journal_errc::disk_full:
            e.message += " (the file system is full)";
            break;
        case journal_errc::corrupt:
            e.message += " (the database is damaged or truncated)";
            break;
        case journal_errc::busy:
            e.message += " (another process holds its lock)";
            break;
        default:
            break;
    }
    return e;
}

int connection::open(const std::string& filename, int flags) {
    close();
    int rc = sqlite3_open_v2(filename.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        if (db_) rc = sqlite3_extended_errcode(db_);
        close();
    }
    return rc;
}

void connection::close() {
    if (db_) sqlite3_close_v2(db_);
    db_ = nullptr;
}

statement connection::prepare(std::string_view sql, int& rc) {
    sqlite3_stmt* s = nullptr;
    rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s,
                            nullptr);
    if (rc != SQLITE_OK) {
        rc = sqlite3_extended_errcode(db_);
        if (s) sqlite3_finalize(s);
        return statement();
    }
    return statement(s);
}

int connection::exec(const char* sql) {
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? rc : sqlite3_extended_errcode(db_);
}

namespace {

// The first column of the row `sql` yields, as `read` takes it; none when it yields no row
// (rc is then SQLITE_OK) or on an error (rc says which).
template <typename T, typename Read>
std::optional<T> query_one(connection& c, const char* sql, int& rc, Read read) {
    statement s = c.prepare(sql, rc);
    if (!s) return std::nullopt;
    rc = s.step();
    if (rc == SQLITE_ROW) {
        rc = SQLITE_OK;
        return read(s);
    }
    if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
        return std::nullopt;
    }
    rc = sqlite3_extended_errcode(c.get());
    return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> connection::query_int(const char* sql, int& rc) {
    return query_one<std::int64_t>(*this, sql, rc, [](const statement& s) { return s.int64(0); });
}

std::optional<std::string> connection::query_text(const char* sql, int& rc) {
    return query_one<std::string>(*this, sql, rc, [](const statement& s) { return std::string(s.text(0)); });
}

}  // namespace agentctl::journal_detail
