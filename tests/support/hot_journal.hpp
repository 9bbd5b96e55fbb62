// A SQLite database with a "hot" rollback journal beside it: the state a writer in rollback
// mode leaves when it dies between writing pages of a transaction into the database and
// committing it. SQLite rolls such a journal back at the next read, and a read-only connection
// cannot ("attempt to write a readonly database"). Used by tests/journal and tests/cli.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <string>

namespace test_support {

/// Turns the closed database at `path` into one with a hot journal: in rollback mode, a
/// transaction that renames every run's workflow to "torn" and adds 400 KB to `meta`, spilled
/// into the file (a cache of 2 pages) and never committed. Returns false, with `why`, on a
/// SQLite failure. The bytes of both files are taken mid-transaction, then the transaction is
/// rolled back and the copies put in place, as if the writer had been killed at that moment.
inline bool make_hot_rollback_journal(const std::string& path, std::string& why) {
    namespace fs = std::filesystem;
    const std::string db_copy = path + ".torn", journal_copy = path + ".torn-journal";
    sqlite3* db = nullptr;
    bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
    auto exec = [&](const char* sql) {
        char* err = nullptr;
        if (ok && sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
            ok = false;
            why = std::string(sql) + ": " + (err ? err : sqlite3_errmsg(db));
        }
        sqlite3_free(err);
    };
    exec("PRAGMA journal_mode=DELETE;");
    exec("PRAGMA cache_size=2;");
    exec("BEGIN;");
    exec("UPDATE runs SET workflow_name = 'torn';");
    exec("INSERT INTO meta(key, value) VALUES('torn', hex(randomblob(200000)));");
    std::error_code ec;
    if (ok && !fs::exists(path + "-journal")) {
        ok = false;
        why = "no rollback journal while the transaction is open";
    }
    if (ok) fs::copy_file(path, db_copy, fs::copy_options::overwrite_existing, ec);
    if (ok && !ec) fs::copy_file(path + "-journal", journal_copy, fs::copy_options::overwrite_existing, ec);
    exec("ROLLBACK;");
    sqlite3_close(db);
    if (ok && !ec) fs::rename(db_copy, path, ec);
    if (ok && !ec) fs::rename(journal_copy, path + "-journal", ec);
    if (ec) {
        ok = false;
        why = "copying the files: " + ec.message();
    }
    return ok;
}

}  // namespace test_support
