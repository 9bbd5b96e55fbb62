#include "harness.hpp"

#include <sqlite3.h>

#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace agentctl;

namespace journal_test {

bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && std::string_view(ci) == "true";
}

boost::test_tools::assertion_result needs_root::operator()(boost::unit_test::test_unit_id) const {
    if (::geteuid() == 0 || in_ci()) return true;  // under CI the test runs and fails at its mount
    boost::test_tools::assertion_result r(false);
    r.message() << "SKIPPED: this test mounts a tmpfs and needs root (CI=true makes it fail instead)";
    return r;
}

temp_dir::temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/agentctl-journal-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) BOOST_FAIL("mkdtemp failed: " << std::strerror(errno));
    path_ = buf.data();
}

temp_dir::~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

tmpfs_mount::tmpfs_mount(std::uint64_t bytes) {
    std::string opts = "size=" + std::to_string(bytes) + ",mode=0700";
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
        error_ = std::string("mount -t tmpfs failed (this test needs root): ") + std::strerror(errno);
        return;
    }
    mounted_ = true;
}

tmpfs_mount::~tmpfs_mount() {
    if (mounted_ && ::umount2(dir_.path().c_str(), MNT_DETACH) != 0)
        BOOST_TEST_MESSAGE("umount " << dir_.path() << ": " << std::strerror(errno));
}

bool tmpfs_mount::remount_read_only() {
    if (::mount(nullptr, dir_.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                nullptr) != 0) {
        error_ = std::string("remount read-only failed: ") + std::strerror(errno);
        return false;
    }
    return true;
}

journal open_or_fail(const std::string& path, journal_access access, const journal_open_options& options) {
    auto j = journal::open(path, access, options);
    if (!j)
        BOOST_FAIL("opening " << path << " failed: " << to_string(j.error().code) << ": "
                              << j.error().message);
    return std::move(*j);
}

journal_error open_error(const std::string& path, journal_access access) {
    auto j = journal::open(path, access);
    if (j) BOOST_FAIL("opening " << path << " succeeded; it must fail");
    return j.error();
}

writer_env::writer_env(journal db, journal_writer_options options, bool start) {
    guard_.emplace(worker.get_executor());
    writer =
        std::make_unique<journal_writer>(io.get_executor(), worker.get_executor(), std::move(db), options);
    if (start) start_worker();
}

void writer_env::start_worker() {
    thread_ = std::thread([this] { worker.run(); });
}

void writer_env::join_worker() {
    guard_.reset();
    if (thread_.joinable()) thread_.join();
}

writer_env::~writer_env() {
    writer.reset();  // queues its close on the worker
    join_worker();
}

std::optional<journal_error> writer_env::wait(
    std::function<void(std::function<void(std::optional<journal_error>)>)> start,
    std::chrono::milliseconds bound) {
    bool done = false;
    std::optional<journal_error> result;
    start([&](std::optional<journal_error> e) {
        result = std::move(e);
        done = true;
    });
    BOOST_TEST(!done, "a completion ran inside its initiating call");
    io.restart();
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (!done && std::chrono::steady_clock::now() < deadline) io.run_one_for(10ms);
    if (!done) BOOST_FAIL("the journal operation did not complete within " << bound.count() << " ms");
    return result;
}

std::optional<journal_error> writer_env::sync(std::chrono::milliseconds bound) {
    return wait([this](auto h) { writer->async_sync(std::move(h)); }, bound);
}

std::optional<journal_error> writer_env::close(std::chrono::milliseconds bound) {
    return wait([this](auto h) { writer->async_close(std::move(h)); }, bound);
}

std::optional<journal_error> writer_env::claim(const std::string& run_id, const journal_owner& owner,
                                               owner_alive_fn alive) {
    return wait([&](auto h) { writer->async_claim(run_id, owner, std::move(alive), std::move(h)); }, 30s);
}

journal_owner fake_owner(std::int64_t pid) {
    journal_owner o = this_process_owner();
    o.pid = pid;
    o.start_time = 12345;
    return o;
}

std::string task_id(std::uint32_t task) {
    std::string s = std::to_string(task);
    return "t" + std::string(s.size() < 4 ? 4 - s.size() : 0, '0') + s;
}

journal_run make_run(const std::string& id, std::uint32_t tasks, journal_owner owner) {
    journal_run r;
    r.run_id = id;
    r.workflow_name = "wf";
    r.workflow_path = "/work/wf.yaml";
    r.workflow_source = "apiVersion: agentctl.dev/v1\nkind: Workflow\n";
    r.workflow_digest = "sha256:00";
    r.plan_digest = "sha256:11";
    r.base_dir = "/work";
    r.inputs_json = R"({"n":3})";
    r.argv_json = R"(["agentctl","run","wf.yaml"])";
    r.options_json = R"({"jobs":64})";
    r.agentctl_version = "0.1.0";
    r.task_count = tasks;
    r.owner = std::move(owner);
    return r;
}

attempt_intent make_intent(std::uint32_t task, std::uint32_t attempt) {
    attempt_intent a;
    a.task_index = task;
    a.task_id = task_id(task);
    a.attempt = attempt;
    a.isolation = "process";
    a.argv = {"/bin/echo", "hello", task_id(task)};
    a.env_names = {"PATH", "TOKEN"};
    a.cwd = "sub";
    a.limits = boost::json::object{{"timeoutMs", 120000}, {"stdoutBytes", 1048576}};
    return a;
}

task_result make_result(task_state state, std::string out, std::string err, bool streams_in_output) {
    task_result r;
    r.state = state;
    r.attempts = 1;
    if (state == task_state::succeeded)
        r.exit_code = 0;
    else if (state == task_state::failed)
        r.exit_code = 1;
    r.duration_ms = 12;
    r.command = "/bin/echo";
    r.isolation = "process";
    r.containment = "cgroup";
    r.usage = resource_usage{100, 200, 3000};
    r.output_bytes = out.size() + err.size();
    if (state != task_state::succeeded) r.error = task_error{error_code::exit_nonzero, "the process exited with 1"};
    if (streams_in_output) {
        r.output = boost::json::object{{"status", "changed"}, {"changed", true}, {"exitCode", 0},
                                       {"stdout", out},       {"stderr", err},   {"after", "kept in order"}};
        r.streams_in_output = true;
    } else {
        r.stdout_text = std::move(out);
        r.stderr_text = std::move(err);
        r.output = boost::json::object{{"value", 1}};
    }
    return r;
}

attempt_end make_end(std::uint32_t task, std::uint32_t attempt, task_result r) {
    attempt_end e;
    e.task_index = task;
    e.attempt = attempt;
    r.attempts = attempt;
    e.result = std::move(r);
    return e;
}

task_final make_final(std::uint32_t task, task_result r, std::optional<std::uint32_t> from_attempt) {
    task_final f;
    f.task_index = task;
    f.task_id = task_id(task);
    f.result = std::move(r);
    f.streams_attempt = from_attempt;
    return f;
}

std::string pattern(std::uint32_t task, std::uint32_t attempt, std::size_t n) {
    std::string s(n, '\0');
    std::uint32_t x = task * 2654435761u + attempt * 40503u + 1;
    for (std::size_t i = 0; i < n; ++i) {
        x = x * 1103515245u + 12345u;
        s[i] = static_cast<char>('a' + (x >> 16) % 26);
        if (i % 80 == 79) s[i] = '\n';
    }
    return s;
}

namespace {

struct sqlite_handle {
    sqlite3* db = nullptr;
    ~sqlite_handle() {
        if (db) sqlite3_close_v2(db);
    }
};

void find_in_file(const std::string& path, std::string_view needle, scan_result& out) {
    std::string bytes = read_file(path);
    ++out.files_scanned;
    if (bytes.find(needle) != std::string::npos) out.files.push_back(path);
}

}  // namespace

scan_result scan_journal(const std::string& db_path, std::string_view needle) {
    scan_result out;
    // Raw bytes first, before a connection of ours changes -wal or -shm.
    for (const char* suffix : {"", "-wal", "-shm"})
        if (fs::exists(db_path + suffix)) find_in_file(db_path + suffix, needle, out);
    if (fs::exists(db_path + "-streams"))
        for (const auto& e : fs::recursive_directory_iterator(db_path + "-streams"))
            if (e.is_regular_file()) find_in_file(e.path().string(), needle, out);

    sqlite_handle h;
    if (sqlite3_open_v2(db_path.c_str(), &h.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        BOOST_FAIL("scan: cannot open " << db_path);
    }
    std::vector<std::string> tables;
    {
        sqlite3_stmt* s = nullptr;
        sqlite3_prepare_v2(h.db, "SELECT name FROM sqlite_schema WHERE type = 'table'", -1, &s, nullptr);
        while (sqlite3_step(s) == SQLITE_ROW)
            tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
        sqlite3_finalize(s);
    }
    BOOST_TEST_REQUIRE(!tables.empty());
    for (const auto& t : tables) {
        sqlite3_stmt* s = nullptr;
        std::string sql = "SELECT * FROM \"" + t + "\"";
        BOOST_TEST_REQUIRE(sqlite3_prepare_v2(h.db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
        int n = sqlite3_column_count(s);
        while (sqlite3_step(s) == SQLITE_ROW) {
            for (int i = 0; i < n; ++i) {
                // Every type as its bytes: text and blobs as stored, numbers as text.
                auto* p = static_cast<const char*>(sqlite3_column_blob(s, i));
                int len = sqlite3_column_bytes(s, i);
                ++out.values_scanned;
                if (p && std::string_view(p, static_cast<std::size_t>(len)).find(needle) !=
                             std::string_view::npos) {
                    std::string where = t + "." + sqlite3_column_name(s, i);
                    if (std::find(out.columns.begin(), out.columns.end(), where) == out.columns.end())
                        out.columns.push_back(where);
                }
            }
        }
        sqlite3_finalize(s);
    }
    return out;
}

std::int64_t count_rows(const std::string& db_path, const std::string& table, const std::string& where) {
    sqlite_handle h;
    if (sqlite3_open_v2(db_path.c_str(), &h.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return -1;
    std::string sql = "SELECT count(*) FROM " + table + (where.empty() ? "" : " WHERE " + where);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h.db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return -1;
    std::int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return n;
}

bool exec_sql(const std::string& db_path, const std::string& sql) {
    sqlite_handle h;
    if (sqlite3_open_v2(db_path.c_str(), &h.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK)
        return false;
    char* err = nullptr;
    int rc = sqlite3_exec(h.db, sql.c_str(), nullptr, nullptr, &err);
    if (err) {
        BOOST_TEST_MESSAGE("exec_sql: " << err);
        sqlite3_free(err);
    }
    return rc == SQLITE_OK;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::string& path, std::string_view data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds bound) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
        if (fs::exists(path)) return true;
        std::this_thread::sleep_for(1ms);  // polling the marker, not timing the child
    }
    return fs::exists(path);
}

}  // namespace journal_test
