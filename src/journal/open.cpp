// Opening a journal: what is at the path, whether it is ours, its schema, its integrity.
#include "journal/db.hpp"

#include "exec/state_files.hpp"
#include "journal/codec.hpp"

#include <agentctl/version.hpp>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>

namespace agentctl::journal_detail {

namespace {

// "agct": PRAGMA application_id of every agentctl journal.
constexpr std::int64_t application_id = 0x61676374;

// The schema of journal_schema_version: the tables of version 1 (version 2 only lets
// results.result_json be '' for "that of the end of streams_attempt"; version 3 lets an
// aggregate's final hold `output_released`, its items being its children's finals), then
// version 4's. One row per attempt (its intent, then its handle and its end filled in), one
// per task's final result; a stream below the file threshold is a row of `streams` (a rowid
// table, so a few KiB stay on their page), a larger one a file named by the row.
// docs/JOURNAL.md describes every column.
constexpr const char* schema = R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE runs(
  run_seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL UNIQUE,
  workflow_name TEXT NOT NULL,
  workflow_path TEXT NOT NULL,
  workflow_source BLOB NOT NULL,
  workflow_digest TEXT NOT NULL,
  plan_digest TEXT NOT NULL,
  base_dir TEXT NOT NULL,
  inputs_json TEXT NOT NULL,
  argv_json TEXT NOT NULL,
  options_json TEXT NOT NULL,
  agentctl_version TEXT NOT NULL,
  task_count INTEGER NOT NULL,
  owner_host TEXT NOT NULL,
  owner_boot_id TEXT NOT NULL,
  owner_pid INTEGER NOT NULL,
  owner_start INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  segment INTEGER NOT NULL DEFAULT 0,
  claimed_ms INTEGER,
  state TEXT NOT NULL,
  ended_ms INTEGER,
  duration_ms INTEGER,
  error_code TEXT,
  error_message TEXT,
  counts_json TEXT
);
CREATE INDEX runs_by_age ON runs(created_ms, run_seq);
CREATE TABLE attempts(
  run_seq INTEGER NOT NULL,
  task_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  segment INTEGER NOT NULL,
  task_id TEXT NOT NULL,
  intent_ms INTEGER NOT NULL,
  backend TEXT NOT NULL,
  isolation TEXT NOT NULL,
  argv_json TEXT NOT NULL,
  env_names_json TEXT NOT NULL,
  cwd TEXT,
  limits_json TEXT NOT NULL,
  handle_ms INTEGER,
  pid INTEGER,
  pid_start INTEGER,
  cgroup TEXT,
  container TEXT,
  container_engine TEXT,
  slurm_job_id TEXT,
  ended_ms INTEGER,
  state TEXT,
  exit_code INTEGER,
  signal INTEGER,
  duration_ms INTEGER,
  error_code TEXT,
  error_message TEXT,
  cleanup_failed INTEGER,
  result_json TEXT,
  stdout_length INTEGER,
  stdout_crc INTEGER,
  stdout_file TEXT,
  stderr_length INTEGER,
  stderr_crc INTEGER,
  stderr_file TEXT,
  stdout_blob INTEGER,
  stderr_blob INTEGER,
  PRIMARY KEY(run_seq, task_index, attempt)
) WITHOUT ROWID;
CREATE TABLE results(
  run_seq INTEGER NOT NULL,
  task_index INTEGER NOT NULL,
  task_id TEXT NOT NULL,
  segment INTEGER NOT NULL,
  recorded_ms INTEGER NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  exit_code INTEGER,
  signal INTEGER,
  duration_ms INTEGER NOT NULL,
  error_code TEXT,
  error_message TEXT,
  reused INTEGER NOT NULL,
  streams_attempt INTEGER,
  result_json TEXT NOT NULL,
  stdout_length INTEGER NOT NULL,
  stdout_crc INTEGER,
  stdout_file TEXT,
  stderr_length INTEGER NOT NULL,
  stderr_crc INTEGER,
  stderr_file TEXT,
  stdout_blob INTEGER,
  stderr_blob INTEGER,
  PRIMARY KEY(run_seq, task_index)
) WITHOUT ROWID;
CREATE TABLE streams(
  stream_id INTEGER PRIMARY KEY,
  data BLOB NOT NULL
);
)sql";

// Version 4's tables. `unstarted`: tasks [first_task, end_task) that segment `segment` left
// unstarted, each one's final being result_json (the same for all), unless `results` has a
// row for it, which is always the later record. `run_documents`: a run's workflow source and
// inputs, which grow with its items (a million of them are megabytes), in a row of their
// own, so that a claim or a run's end updates a small `runs` row instead of rewriting them.
// docs/JOURNAL.md, "unstarted" and "run_documents".
constexpr const char* version_4_tables = R"sql(
CREATE TABLE unstarted(
  run_seq INTEGER NOT NULL,
  first_task INTEGER NOT NULL,
  end_task INTEGER NOT NULL,
  segment INTEGER NOT NULL,
  recorded_ms INTEGER NOT NULL,
  state TEXT NOT NULL,
  result_json TEXT NOT NULL,
  PRIMARY KEY(run_seq, first_task)
) WITHOUT ROWID;
CREATE TABLE run_documents(
  run_seq INTEGER PRIMARY KEY,
  workflow_source BLOB NOT NULL,
  inputs_json TEXT NOT NULL
);
)sql";

// Migrations: migrations[v - 1] turns schema version v into v + 1, inside one write
// transaction (nullptr: nothing to change but the version). Version 1 is the first; add the
// SQL of each new version here.
constexpr std::array<const char*, journal_schema_version - 1> migrations{
    nullptr,           // 1 -> 2: results.result_json may be ''; version 1 rows all carry their own JSON
    nullptr,           // 2 -> 3: an aggregate's final may say output_released; older ones carry their items
    version_4_tables,  // 3 -> 4: older runs have a final per task, their documents in `runs`
};

// The oldest version a reader reads as it is, without a migration: version 1 to 3 rows read
// the same under version 4's rules (none of them is '', none says output_released; readers
// look for ranges and documents in version 4's tables only from version 4 on).
constexpr std::int64_t oldest_readable_version = 1;

journal_error make_error(journal_errc code, std::string message) {
    return journal_error{code, std::move(message)};
}

std::string errno_message(int err) {
    return exec::errno_text(err);
}

std::string parent_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

bool has_sqlite_magic(const std::string& path) {
    static constexpr std::string_view magic("SQLite format 3\0", 16);
    return exec::read_prefix(path, 16) == magic;
}

// Errors of the identification step: a file SQLite does not take as a database is foreign
// unless it starts like one (then its header is damaged).
journal_error identify_error(detail::journal_db& db, int rc, std::string_view what) {
    if ((rc & 0xff) == SQLITE_NOTADB) {
        if (has_sqlite_magic(db.path))
            return make_error(journal_errc::corrupt, "journal " + db.path + ": the SQLite header is damaged");
        return make_error(
            journal_errc::foreign,
            "journal " + db.path + ": not an agentctl journal (the file is not a SQLite database)");
    }
    return db.error(rc, what);
}

std::optional<journal_error> apply_pragmas(detail::journal_db& db) {
    std::string sql = "PRAGMA busy_timeout=" + std::to_string(db.options.busy_timeout.count()) + ";";
    if (int rc = db.conn.exec(sql.c_str()); rc != SQLITE_OK) return db.error(rc, "setting the busy timeout");
    if (db.access == journal_access::read) return std::nullopt;
    const char* sync = db.options.durability == journal_durability::full ? "PRAGMA synchronous=FULL;"
                                                                         : "PRAGMA synchronous=NORMAL;";
    if (int rc = db.conn.exec(sync); rc != SQLITE_OK) return db.error(rc, "setting synchronous");
    std::string checkpoint =
        "PRAGMA wal_autocheckpoint=" + std::to_string(db.options.wal_autocheckpoint) + ";";
    if (int rc = db.conn.exec(checkpoint.c_str()); rc != SQLITE_OK)
        return db.error(rc, "setting wal_autocheckpoint");
    // A checkpoint leaves the WAL at its largest size unless this caps it.
    if (int rc = db.conn.exec("PRAGMA journal_size_limit=67108864;"); rc != SQLITE_OK)
        return db.error(rc, "setting journal_size_limit");
    return std::nullopt;
}

std::optional<journal_error> ensure_wal(detail::journal_db& db) {
    int rc = SQLITE_OK;
    auto mode = db.conn.query_text("PRAGMA journal_mode=WAL;", rc);
    if (rc != SQLITE_OK) return db.error(rc, "switching to WAL");
    if (!mode || *mode != "wal")
        return make_error(journal_errc::io_error,
                          "journal " + db.path + ": cannot use write-ahead logging (journal_mode is " +
                              mode.value_or("unknown") + "; the file system may not support shared memory)");
    return std::nullopt;
}

// Creates the schema in the empty database of a journal being created (create_whole).
std::optional<journal_error> initialise(detail::journal_db& db) {
    // Before the first table: the page size cannot change once in WAL mode, and auto_vacuum
    // only takes effect on an empty database.
    std::string pragmas =
        "PRAGMA page_size=" + std::to_string(db.options.page_size) + "; PRAGMA auto_vacuum=INCREMENTAL;";
    if (int rc = db.conn.exec(pragmas.c_str()); rc != SQLITE_OK) return db.error(rc, "creating the journal");
    if (auto e = ensure_wal(db)) return e;
    return in_write_transaction(db, "creating the journal", [&]() -> std::optional<journal_error> {
        int rc = db.conn.exec(schema);
        if (rc == SQLITE_OK) rc = db.conn.exec(version_4_tables);
        if (rc != SQLITE_OK) return db.error(rc, "creating the schema");
        std::string pragmas = "PRAGMA application_id=" + std::to_string(application_id) +
                              "; PRAGMA user_version=" + std::to_string(journal_schema_version) + ";";
        if (rc = db.conn.exec(pragmas.c_str()); rc != SQLITE_OK) return db.error(rc, "creating the schema");
        statement s = db.conn.prepare("INSERT INTO meta(key, value) VALUES(?, ?)", rc);
        if (!s) return db.error(rc, "creating the schema");
        std::string created = std::to_string(now_ms());
        std::pair<const char*, std::string_view> rows[] = {
            {"application", "agentctl"}, {"created_by", version()}, {"created_ms", created}};
        for (auto& [k, v] : rows) {
            s.bind(1, k);
            s.bind(2, v);
            rc = s.step();
            s.reset();
            if (rc != SQLITE_DONE) return db.error(db.last_rc(), "creating the schema");
        }
        return std::nullopt;
    });
}

// SQLite's URI for `path` (URI filenames, so that `immutable=1` can be added): what the URI
// syntax would read is escaped.
std::string uri_of(const std::string& path) {
    std::string uri = "file:";
    for (char c : path) {
        if (c == '%' || c == '?' || c == '#') {
            static constexpr char hex[] = "0123456789ABCDEF";
            uri += '%';
            uri += hex[(static_cast<unsigned char>(c) >> 4) & 15];
            uri += hex[static_cast<unsigned char>(c) & 15];
        } else {
            uri += c;
        }
    }
    return uri;
}

constexpr int open_flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_URI;

// Creation (docs/JOURNAL.md, "Creation"): a journal is built whole under a name of its own
// beside `path`, `J-new-PID-START-N`, then given its name, so that whatever kills agentctl
// leaves either no journal or a complete one, never an empty or half-made file at `path`.
// What a killed creation left under such a name is removed by the next write open.
std::string creation_prefix(const std::string& path) {
    return path.substr(path.rfind('/') + 1) + "-new-";
}

void remove_dead_creations(const std::string& path) {
    exec::unique_fd dir;
    if (exec::open_directory(AT_FDCWD, parent_of(path), false, dir) != 0) return;
    const std::string prefix = creation_prefix(path);
    for (const auto& name : exec::list_directory(dir.get())) {
        if (!name.starts_with(prefix)) continue;
        // PID-START-N, and SQLite's -wal, -shm or -journal after it.
        const char* first = name.data() + prefix.size();
        const char* last = name.data() + name.size();
        pid_t pid = 0;
        std::uint64_t start = 0;
        auto p = std::from_chars(first, last, pid);
        if (p.ec != std::errc() || p.ptr == last || *p.ptr != '-') continue;
        auto q = std::from_chars(p.ptr + 1, last, start);
        if (q.ec != std::errc() || q.ptr == last || *q.ptr != '-') continue;
        if (!exec::process_alive(pid, start)) (void)exec::remove_tree(dir.get(), name);
    }
}

std::optional<journal_error> create_whole(const std::string& path, const journal_open_options& options) {
    static std::atomic<unsigned> created{0};
    pid_t pid = exec::current_pid();
    const std::string temporary =
        path.substr(0, path.rfind('/') + 1) + creation_prefix(path) + std::to_string(pid) + "-" +
        std::to_string(exec::process_start_time(pid).value_or(0)) + "-" + std::to_string(created++);
    auto remove_temporary = [&] {
        for (const char* suffix : {"", "-wal", "-shm", "-journal"})
            (void)exec::remove_tree(AT_FDCWD, temporary + suffix);
    };
    std::optional<journal_error> failed;
    {
        detail::journal_db db;
        db.path = path;  // messages name the journal
        db.access = journal_access::write;
        db.options = options;
        int flags = open_flags | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        if (int rc = db.conn.open(uri_of(temporary), flags); rc != SQLITE_OK)
            failed = journal_detail::sqlite_error(rc, nullptr, path, "cannot create");
        else if (auto e = apply_pragmas(db))
            failed = e;
        else
            failed = initialise(db);
        // The close checkpoints the WAL into the file and removes it: the file is whole.
    }
    exec::path_info wal = exec::probe_path(temporary + "-wal");
    if (!failed && wal.error == 0 && wal.size > 0)  // the checkpoint failed (a full disk)
        failed = make_error(journal_errc::io_error,
                            "journal " + path + ": cannot be created: the schema did not reach the file");
    if (!failed) {
        int err = exec::publish_file(temporary, path);
        // EEXIST: another process created it meanwhile; theirs is as good.
        if (err != 0 && err != EEXIST)
            failed =
                make_error(err == ENOSPC || err == EDQUOT ? journal_errc::disk_full : journal_errc::io_error,
                           "journal " + path + ": cannot be created: " + errno_message(err));
        exec::unique_fd dir;
        if (!failed && options.durability == journal_durability::full &&
            exec::open_directory(AT_FDCWD, parent_of(path), false, dir) == 0)
            (void)exec::sync_directory(dir.get());  // the new name survives a power cut
    }
    remove_temporary();
    return failed;
}

// SQLite rolls back a rollback journal that a writer which died left beside a database (a
// "hot" journal) when it next reads it, which a read-only connection cannot do: it fails with
// SQLITE_READONLY_ROLLBACK, "attempt to write a readonly database". agentctl's journals use
// write-ahead logging from their creation and never leave one; another program, or an
// agentctl before the creation above, can. So every open first lets a writable connection
// roll it back, when there is one beside a SQLite file (nothing else is ever written to).
std::optional<journal_error> roll_back_hot_journal(const std::string& path,
                                                   const journal_open_options& options) {
    exec::path_info journal = exec::probe_path(path + "-journal");
    if (journal.error != 0 || journal.size == 0 || !has_sqlite_magic(path)) return std::nullopt;
    connection c;
    if (c.open(uri_of(path), open_flags | SQLITE_OPEN_READWRITE) != SQLITE_OK) return std::nullopt;
    std::string busy = "PRAGMA busy_timeout=" + std::to_string(options.busy_timeout.count()) + ";";
    c.exec(busy.c_str());
    int rc = SQLITE_OK;
    (void)c.query_int("PRAGMA schema_version;", rc);
    if ((rc & 0xff) == SQLITE_READONLY)
        return make_error(journal_errc::read_only,
                          "journal " + path + ": " + path +
                              "-journal holds an interrupted write that must be rolled back, and "
                              "this process cannot write the journal");
    return std::nullopt;  // any other failure is met again, and reported, by the open itself
}

std::optional<journal_error> migrate(detail::journal_db& db, std::int64_t from) {
    return in_write_transaction(db, "migrating the schema", [&]() -> std::optional<journal_error> {
        int rc = SQLITE_OK;
        auto version = db.conn.query_int("PRAGMA user_version;", rc);
        if (rc != SQLITE_OK) return db.error(rc, "migrating the schema");
        for (std::int64_t v = version.value_or(from); v < journal_schema_version; ++v) {
            const char* step = migrations[static_cast<std::size_t>(v - 1)];
            if (step && (rc = db.conn.exec(step)) != SQLITE_OK) return db.error(rc, "migrating the schema");
        }
        std::string set = "PRAGMA user_version=" + std::to_string(journal_schema_version) + ";";
        if (rc = db.conn.exec(set.c_str()); rc != SQLITE_OK) return db.error(rc, "migrating the schema");
        return std::nullopt;
    });
}

// The seal (docs/JOURNAL.md, "The integrity check"): one line that a writing connection
// leaves when it closes without trouble, naming the file as it left it and when the check
// that its state descends from ran. Anything else in the file is no seal.
constexpr std::string_view seal_magic = "agentctl-journal-seal 1";

std::string seal_path(const std::string& path) {
    return path + "-seal";
}

std::string seal_text(const exec::path_info& f, std::int64_t checked_ms) {
    return std::string(seal_magic) + " device=" + std::to_string(f.device) +
           " inode=" + std::to_string(f.inode) + " size=" + std::to_string(f.size) +
           " mtime=" + std::to_string(f.modified_ns) + " ctime=" + std::to_string(f.changed_ns) +
           " checked=" + std::to_string(checked_ms) + "\n";
}

// When the check that the sealed state descends from ran, if `file` is that state (and no
// WAL is left over) and the check is younger than `interval`.
std::optional<std::int64_t> sealed_check(const std::string& path, const exec::path_info& file,
                                         std::chrono::milliseconds interval) {
    if (interval.count() <= 0 || !file.is_regular || file.size == 0) return std::nullopt;
    std::string text = exec::read_prefix(seal_path(path), 512);
    auto checked_at = text.rfind(" checked=");
    if (text.empty() || text.back() != '\n' || checked_at == std::string::npos) return std::nullopt;
    std::int64_t checked = 0;
    const char* last = text.data() + text.size() - 1;  // the newline
    if (std::from_chars(text.data() + checked_at + 9, last, checked).ptr != last) return std::nullopt;
    if (text != seal_text(file, checked)) return std::nullopt;
    // A WAL left over is work some connection did not finish: check.
    exec::path_info wal = exec::probe_path(path + "-wal");
    if (wal.error == 0 && wal.size > 0) return std::nullopt;
    std::int64_t age = now_ms() - checked;
    if (age < 0 || age >= interval.count()) return std::nullopt;
    return checked;
}

// The checks that need the schema: ours, not newer, not truncated, structurally sound.
std::optional<journal_error> check_ours(detail::journal_db& db, std::int64_t app_id,
                                        std::int64_t user_version, bool unchanged, bool& needs_migration) {
    needs_migration = false;
    if (app_id != application_id)
        return make_error(
            journal_errc::foreign,
            "journal " + db.path + ": not an agentctl journal (a SQLite database of another application)");
    if (user_version > journal_schema_version)
        return make_error(journal_errc::newer_schema,
                          "journal " + db.path + ": written by a newer agentctl (schema version " +
                              std::to_string(user_version) + "; this agentctl " + std::string(version()) +
                              " knows up to " + std::to_string(journal_schema_version) + ")");
    if (user_version < 1)
        return make_error(journal_errc::corrupt, "journal " + db.path + ": the schema version is missing");
    int rc = SQLITE_OK;
    auto app = db.conn.query_text("SELECT value FROM meta WHERE key = 'application';", rc);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_ERROR) return identify_error(db, rc, "reading its schema");
    if (rc != SQLITE_OK || app.value_or("") != "agentctl")
        return make_error(journal_errc::corrupt,
                          "journal " + db.path + ": its meta table is missing or damaged");

    // A file shorter than its pages (cut, or copied while half written) reads as zeros past
    // its end. With a WAL present the file may legitimately be short, so only check without.
    auto page_size = db.conn.query_int("PRAGMA page_size;", rc);
    if (rc != SQLITE_OK) return identify_error(db, rc, "reading its header");
    auto page_count = db.conn.query_int("PRAGMA page_count;", rc);
    if (rc != SQLITE_OK) return identify_error(db, rc, "reading its header");
    auto wal = exec::probe_path(db.path + "-wal");
    auto file = exec::probe_path(db.path);
    if ((wal.error != 0 || wal.size == 0) && file.error == 0 && page_size && page_count) {
        std::uint64_t expected =
            static_cast<std::uint64_t>(*page_size) * static_cast<std::uint64_t>(*page_count);
        if (file.size < expected)
            return make_error(journal_errc::corrupt,
                              "journal " + db.path + ": truncated (" + std::to_string(file.size) +
                                  " bytes; its header says " + std::to_string(expected) + ")");
    }
    if (db.options.quick_check && !unchanged) {
        db.quick_checked = true;
        db.checked_ms = now_ms();
        statement s = db.conn.prepare("PRAGMA quick_check;", rc);
        if (!s) return identify_error(db, rc, "checking its integrity");
        rc = s.step();
        // Damage found (or the check failed): no seal may vouch for this file again.
        if (rc != SQLITE_ROW || s.text(0) != "ok") (void)exec::remove_tree(AT_FDCWD, seal_path(db.path));
        if (rc != SQLITE_ROW) return identify_error(db, db.last_rc(), "checking its integrity");
        if (s.text(0) != "ok")
            return make_error(journal_errc::corrupt, "journal " + db.path + ": damaged (quick_check: " +
                                                         std::string(s.text(0)) + ")");
    }
    needs_migration = user_version < journal_schema_version;
    return std::nullopt;
}

}  // namespace

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::optional<journal_error> in_write_transaction(detail::journal_db& db, std::string_view what,
                                                  const std::function<std::optional<journal_error>()>& body) {
    auto run = [&](statement& s, const char* sql) {
        int rc = SQLITE_OK;
        if (!s) s = db.conn.prepare(sql, rc);
        if (!s) return rc;
        reset_guard guard(s);
        rc = s.step();
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
    };
    if (int rc = run(db.begin_immediate, "BEGIN IMMEDIATE;"); rc != SQLITE_OK) return db.error(rc, what);
    auto e = body();
    if (!e) {
        if (int rc = run(db.commit, "COMMIT;"); rc != SQLITE_OK) e = db.error(rc, what);
    }
    // A failed COMMIT (SQLITE_FULL, I/O) may leave the transaction open: end it.
    if (e && !sqlite3_get_autocommit(db.conn.get())) db.conn.exec("ROLLBACK;");
    return e;
}

int streams_dir(detail::journal_db& db, bool create) {
    if (db.streams_dir) return 0;
    return exec::open_directory(AT_FDCWD, db.streams_path, create, db.streams_dir);
}

std::optional<journal_error> read_stored_stream(detail::journal_db& db, const statement& s, int first,
                                                std::string_view what,
                                                const std::function<void(std::string_view)>& chunk) {
    if (s.is_null(first) || s.uint64(first) == 0) return std::nullopt;  // empty: nothing stored
    std::uint64_t length = s.uint64(first);
    auto crc = static_cast<std::uint32_t>(s.int64(first + 1));
    std::uint64_t got = 0;
    std::uint32_t sum = 0;
    std::string where;
    if (s.is_null(first + 2)) {
        int rc = SQLITE_OK;
        if (!db.blob_query)
            db.blob_query = db.conn.prepare("SELECT data FROM streams WHERE stream_id = ?", rc);
        if (!db.blob_query) return db.error(rc, "reading a stream");
        reset_guard guard(db.blob_query);
        db.blob_query.bind(1, s.int64(first + 3));
        rc = db.blob_query.step();
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error(db.last_rc(), "reading a stream");
        std::string_view data = rc == SQLITE_ROW ? db.blob_query.blob(0) : std::string_view();
        got = data.size();
        sum = crc32c(data);
        chunk(data);
        where = std::string(what) + " in journal " + db.path;
    } else {
        std::string file(s.text(first + 2));
        where = std::string(what) + " (file " + db.streams_path + "/" + file + ")";
        if (int err = streams_dir(db, false); err != 0)
            return make_error(journal_errc::corrupt,
                              "journal " + db.path + ": " + where + ": " + errno_message(err));
        int err = exec::read_file(db.streams_dir.get(), file, [&](std::string_view bytes) {
            got += bytes.size();
            sum = crc32c(bytes, sum);
            chunk(bytes);
        });
        if (err != 0)
            return make_error(err == ENOENT ? journal_errc::corrupt : journal_errc::io_error,
                              "journal " + db.path + ": " + where + ": " + errno_message(err));
    }
    if (got != length || sum != crc)
        return make_error(journal_errc::corrupt, "journal " + db.path + ": " + where +
                                                     " is damaged: " + std::to_string(got) + " bytes, " +
                                                     std::to_string(length) + " recorded" +
                                                     (got == length ? " (checksum differs)" : ""));
    return std::nullopt;
}

journal_result<std::unique_ptr<detail::journal_db>> open_db(const std::string& path, journal_access access,
                                                            const journal_open_options& options) {
    auto db = std::make_unique<detail::journal_db>();
    db->path = path;
    db->access = access;
    db->options = options;
    db->streams_path = path + "-streams";
    bool writing = access == journal_access::write;

    if (auto e = roll_back_hot_journal(path, options)) return *e;
    if (writing) remove_dead_creations(path);
    exec::path_info info = exec::probe_path(path);
    if (info.error == ENOENT) {
        if (!writing)
            return make_error(journal_errc::missing,
                              "journal " + path + ": no such file (no run recorded there)");
        std::string parent = parent_of(path);
        exec::path_info dir = exec::probe_path(parent);
        if (dir.error != 0 || !dir.is_directory)
            return make_error(
                journal_errc::missing,
                "journal " + path + ": its folder " + parent +
                    (dir.error ? " cannot be used: " + errno_message(dir.error) : " is not a folder"));
        if (int err = exec::directory_writable(parent); err != 0)
            return make_error(
                err == EROFS ? journal_errc::read_only : journal_errc::unreadable,
                "journal " + path + ": cannot be created in " + parent + ": " + errno_message(err));
        if (auto e = create_whole(path, options)) return *e;
        info = exec::probe_path(path);
        if (info.error != 0)
            return make_error(journal_errc::unreadable, "journal " + path + ": " + errno_message(info.error));
    } else if (info.error != 0) {
        return make_error(journal_errc::unreadable, "journal " + path + ": " + errno_message(info.error));
    } else if (info.is_directory) {
        return make_error(journal_errc::unreadable,
                          "journal " + path + ": is a directory, not a journal file");
    } else if (!info.is_regular) {
        return make_error(journal_errc::unreadable, "journal " + path + ": not a regular file");
    } else if (info.size == 0) {
        // Never agentctl's: it creates a journal whole under another name (create_whole).
        return make_error(journal_errc::corrupt,
                          "journal " + path +
                              ": the file is empty (0 bytes): truncated, or made by another program "
                              "(agentctl never leaves an empty journal); move it away to start a new one");
    }

    // Before SQLite opens it (a writer's open may change it): is the file as sealed?
    bool unchanged = false;
    if (options.quick_check && info.error == 0) {
        if (auto checked = sealed_check(path, info, options.quick_check_interval)) {
            unchanged = true;
            db->checked_ms = *checked;
        }
    }

    // Readers of a journal on a read-only file system cannot create its -shm file; nothing
    // can write there either, so SQLite may read it as immutable.
    bool immutable = false;
    if (!writing && exec::directory_writable(parent_of(path)) == EROFS) immutable = true;
    // Never SQLITE_OPEN_CREATE: a file that vanished since is not created here, half made.
    int flags = open_flags | (writing ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
    std::string uri = uri_of(path);
    if (immutable) uri += "?immutable=1";
    if (int rc = db->conn.open(uri, flags); rc != SQLITE_OK) {
        journal_error e = journal_detail::sqlite_error(rc, nullptr, path, "cannot open");
        if (e.code == journal_errc::internal) e.code = journal_errc::unreadable;
        return e;
    }
    sqlite3_extended_result_codes(db->conn.get(), 1);
    if (writing && sqlite3_db_readonly(db->conn.get(), "main") == 1)
        return make_error(journal_errc::read_only,
                          "journal " + path + ": cannot be written (read-only file or file system)");
    if (auto e = apply_pragmas(*db)) return *e;

    int rc = SQLITE_OK;
    auto app_id = db->conn.query_int("PRAGMA application_id;", rc);
    if (rc != SQLITE_OK) return identify_error(*db, rc, "reading its header");
    auto user_version = db->conn.query_int("PRAGMA user_version;", rc);
    if (rc != SQLITE_OK) return identify_error(*db, rc, "reading its header");
    auto tables = db->conn.query_int("SELECT count(*) FROM sqlite_schema;", rc);
    if (rc != SQLITE_OK) return identify_error(*db, rc, "reading its schema");
    if (app_id.value_or(0) == 0 && tables.value_or(0) == 0 && user_version.value_or(0) == 0)
        return make_error(journal_errc::foreign,
                          "journal " + path +
                              ": not an agentctl journal (an empty SQLite database: agentctl never leaves "
                              "one); move it away to start a new journal");
    bool needs_migration = false;
    if (auto e = check_ours(*db, app_id.value_or(0), user_version.value_or(0), unchanged, needs_migration))
        return *e;
    if (writing) {
        if (auto e = ensure_wal(*db)) return *e;
        if (needs_migration)
            if (auto e = migrate(*db, *user_version)) return *e;
    } else if (needs_migration && *user_version < oldest_readable_version) {
        return make_error(journal_errc::unreadable,
                          "journal " + path + ": schema version " + std::to_string(*user_version) +
                              " must be migrated first (open it for writing: run, resume or runs gc)");
    }
    db->schema_version = writing ? journal_schema_version : *user_version;
    db->seal_on_close = writing;
    return db;
}

}  // namespace agentctl::journal_detail

namespace agentctl::detail {

journal_db::~journal_db() {
    if (!conn) return;
    // Statements first: a connection with live statements closes only when they go.
    blob_query = journal_detail::statement();
    begin_immediate = journal_detail::statement();
    commit = journal_detail::statement();
    streams_dir.reset();
    bool seal = seal_on_close && !trouble;
    // The last connection's close checkpoints and removes the WAL: the seal names the file after it.
    conn.close();
    if (seal_on_close && trouble) {
        // Damage met (or a failure that may hide it) on a file that may be unchanged: the
        // old seal must not vouch for it.
        (void)exec::remove_tree(AT_FDCWD, journal_detail::seal_path(path));
        return;
    }
    if (!seal) return;
    exec::path_info file = exec::settled_probe(path);
    if (file.error != 0 || !file.is_regular) return;
    exec::path_info wal = exec::probe_path(path + "-wal");
    if (wal.error == 0 && wal.size > 0) return;  // another connection holds the WAL: the next open checks
    // Nothing to do when it fails (a full disk): without a seal, the next open checks.
    (void)exec::replace_file(journal_detail::seal_path(path), journal_detail::seal_text(file, checked_ms));
}

}  // namespace agentctl::detail
