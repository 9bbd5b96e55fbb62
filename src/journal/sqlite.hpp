// A small RAII layer over the SQLite C API, and the mapping of SQLite results to
// journal_error. Private to src/journal.
#pragma once

#include <agentctl/journal.hpp>

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::journal_detail {

/// Maps a SQLite result code (extended codes included) to a journal_errc.
journal_errc errc_of(int rc);

/// "journal PATH: WHAT: <sqlite message>" with the code mapped.
journal_error sqlite_error(int rc, sqlite3* db, const std::string& path, std::string_view what);

/// One prepared statement. Bound text and blobs are not copied (SQLITE_STATIC): they must stay
/// alive until the statement is reset.
class statement {
public:
    statement() = default;
    explicit statement(sqlite3_stmt* s) : s_(s) {}
    statement(statement&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    statement& operator=(statement&& o) noexcept {
        if (this != &o) {
            if (s_) sqlite3_finalize(s_);
            s_ = o.s_;
            o.s_ = nullptr;
        }
        return *this;
    }
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;
    ~statement() {
        if (s_) sqlite3_finalize(s_);
    }
    explicit operator bool() const { return s_ != nullptr; }
    sqlite3_stmt* get() const { return s_; }

    void bind(int i, std::int64_t v) { sqlite3_bind_int64(s_, i, v); }
    void bind(int i, std::uint64_t v) { sqlite3_bind_int64(s_, i, static_cast<std::int64_t>(v)); }
    void bind(int i, std::uint32_t v) { sqlite3_bind_int64(s_, i, v); }
    void bind(int i, int v) { sqlite3_bind_int64(s_, i, v); }
    void bind(int i, bool v) { sqlite3_bind_int64(s_, i, v ? 1 : 0); }
    void bind(int i, std::string_view v) {
        sqlite3_bind_text64(s_, i, v.data() ? v.data() : "", v.size(), SQLITE_STATIC, SQLITE_UTF8);
    }
    void bind(int i, const std::string& v) { bind(i, std::string_view(v)); }
    void bind(int i, const char* v) { bind(i, std::string_view(v)); }
    void bind_blob(int i, std::string_view v) {
        sqlite3_bind_blob64(s_, i, v.data() ? v.data() : "", v.size(), SQLITE_STATIC);
    }
    void bind_null(int i) { sqlite3_bind_null(s_, i); }
    template <typename T>
    void bind(int i, const std::optional<T>& v) {
        if (v)
            bind(i, *v);
        else
            bind_null(i);
    }
    /// NULL for an empty string.
    void bind_nonempty(int i, std::string_view v) {
        if (v.empty())
            bind_null(i);
        else
            bind(i, v);
    }
    /// `values` to the parameters from `first` on, in order.
    template <typename... V>
    void bind_from(int first, const V&... values) {
        (bind(first++, values), ...);
    }

    /// sqlite3_step(): SQLITE_ROW, SQLITE_DONE or an error code.
    int step() { return sqlite3_step(s_); }
    void reset() {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
    }

    bool is_null(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }
    std::int64_t int64(int i) const { return sqlite3_column_int64(s_, i); }
    std::uint64_t uint64(int i) const { return static_cast<std::uint64_t>(sqlite3_column_int64(s_, i)); }
    std::uint32_t uint32(int i) const { return static_cast<std::uint32_t>(sqlite3_column_int64(s_, i)); }
    std::string_view text(int i) const {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
        int n = sqlite3_column_bytes(s_, i);
        return p ? std::string_view(p, static_cast<std::size_t>(n)) : std::string_view();
    }
    std::string_view blob(int i) const {
        auto* p = static_cast<const char*>(sqlite3_column_blob(s_, i));
        int n = sqlite3_column_bytes(s_, i);
        return p ? std::string_view(p, static_cast<std::size_t>(n)) : std::string_view();
    }
    std::optional<std::int64_t> opt_int64(int i) const {
        if (is_null(i)) return std::nullopt;
        return int64(i);
    }
    /// The text columns from `first` on into `out`, in order.
    template <typename... S>
    void texts_from(int first, S&... out) const {
        ((out = text(first++)), ...);
    }

private:
    sqlite3_stmt* s_ = nullptr;
};

/// Resets a statement when leaving a scope, so that its bindings never outlive their data.
class reset_guard {
public:
    explicit reset_guard(statement& s) : s_(s) {}
    ~reset_guard() { s_.reset(); }
    reset_guard(const reset_guard&) = delete;
    reset_guard& operator=(const reset_guard&) = delete;

private:
    statement& s_;
};

/// One connection.
class connection {
public:
    connection() = default;
    connection(connection&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
    connection& operator=(connection&& o) noexcept {
        if (this != &o) {
            close();
            db_ = o.db_;
            o.db_ = nullptr;
        }
        return *this;
    }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    ~connection() { close(); }

    /// sqlite3_open_v2; on failure the handle is closed and the code returned.
    int open(const std::string& filename, int flags);
    void close();
    sqlite3* get() const { return db_; }
    explicit operator bool() const { return db_ != nullptr; }

    /// Prepares `sql` (persistent: kept for reuse). Returns an empty statement and sets `rc`
    /// on failure.
    statement prepare(std::string_view sql, int& rc);
    /// sqlite3_exec of statements without results.
    int exec(const char* sql);
    /// The first column of the first row as an integer (PRAGMAs). nullopt on error (`rc`).
    std::optional<std::int64_t> query_int(const char* sql, int& rc);
    std::optional<std::string> query_text(const char* sql, int& rc);

private:
    sqlite3* db_ = nullptr;
};

}  // namespace agentctl::journal_detail
