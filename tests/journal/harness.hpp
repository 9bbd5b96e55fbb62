// Test harness for the run journal: temporary folders and tmpfs mounts, a writer on a worker
// thread, record builders, and a scanner that looks for bytes in every column and file.
#pragma once

#include <agentctl/journal.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace agentctl {
inline std::ostream& operator<<(std::ostream& os, journal_errc e) {
    return os << to_string(e);
}
inline std::ostream& operator<<(std::ostream& os, journal_run_state s) {
    return os << to_string(s);
}
inline std::ostream& operator<<(std::ostream& os, task_state s) {
    return os << to_string(s);
}
}  // namespace agentctl

namespace journal_test {

using namespace std::chrono_literals;

/// Whether CI=true: then a test that cannot run fails instead of being skipped.
bool in_ci();

/// Precondition of tests that mount file systems: root, or CI (where they must run and fail).
struct needs_root {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const;
};

/// A fresh folder under $TMPDIR (or /tmp), removed with everything in it.
class temp_dir {
public:
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

/// A tmpfs of `bytes` mounted on a fresh folder (needs root); unmounted when destroyed.
class tmpfs_mount {
public:
    explicit tmpfs_mount(std::uint64_t bytes);
    ~tmpfs_mount();
    tmpfs_mount(const tmpfs_mount&) = delete;
    tmpfs_mount& operator=(const tmpfs_mount&) = delete;
    bool ok() const { return mounted_; }
    const std::string& error() const { return error_; }
    const std::string& path() const { return dir_.path(); }
    std::string file(const std::string& name) const { return dir_.file(name); }
    bool remount_read_only();

private:
    temp_dir dir_;
    bool mounted_ = false;
    std::string error_;
};

/// The error message of a result, or "" when it holds a value (for test messages).
template <typename T>
std::string why(const agentctl::journal_result<T>& r) {
    return r.has_value() ? std::string() : r.error().message;
}

/// A journal opened or the test fails.
agentctl::journal open_or_fail(const std::string& path, agentctl::journal_access access,
                               const agentctl::journal_open_options& options = {});

/// The error of an open that must fail (the test fails if it succeeds).
agentctl::journal_error open_error(const std::string& path, agentctl::journal_access access);

/// A writer whose worker runs on its own thread; completions run on `io` (the test thread).
class writer_env {
public:
    explicit writer_env(agentctl::journal db, agentctl::journal_writer_options options = {},
                        bool start_worker = true);
    ~writer_env();
    /// Starts the worker thread (when constructed with start_worker = false).
    void start_worker();
    /// async_sync() and wait for it (bounded: a hang fails the test).
    std::optional<agentctl::journal_error> sync(std::chrono::milliseconds bound = 30s);
    std::optional<agentctl::journal_error> close(std::chrono::milliseconds bound = 30s);
    std::optional<agentctl::journal_error> claim(const std::string& run_id,
                                                 const agentctl::journal_owner& owner,
                                                 agentctl::owner_alive_fn alive);
    /// Stops the worker after it has done everything posted to it.
    void join_worker();

    boost::asio::io_context io;      // the "run's" executor
    boost::asio::io_context worker;  // where SQLite work happens
    std::unique_ptr<agentctl::journal_writer> writer;

private:
    std::optional<agentctl::journal_error> wait(
        std::function<void(std::function<void(std::optional<agentctl::journal_error>)>)> start,
        std::chrono::milliseconds bound);
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
    std::thread thread_;
};

/// An owner that no process has (pid far above pid_max).
agentctl::journal_owner fake_owner(std::int64_t pid);

agentctl::journal_run make_run(const std::string& id, std::uint32_t tasks = 10,
                               agentctl::journal_owner owner = agentctl::this_process_owner());
agentctl::attempt_intent make_intent(std::uint32_t task, std::uint32_t attempt = 1);
/// A process-like result whose streams are kept in output (as the built-in runner does).
agentctl::task_result make_result(agentctl::task_state state, std::string out, std::string err = {},
                                  bool streams_in_output = true);
agentctl::attempt_end make_end(std::uint32_t task, std::uint32_t attempt, agentctl::task_result r);
agentctl::task_final make_final(std::uint32_t task, agentctl::task_result r,
                                std::optional<std::uint32_t> from_attempt);

/// Deterministic text of `n` bytes for (task, attempt): what the SIGKILL test checks.
std::string pattern(std::uint32_t task, std::uint32_t attempt, std::size_t n);

/// "t0007"-style task id.
std::string task_id(std::uint32_t task);

/// Where a byte string occurs: "table.column" for every column value holding it, and every
/// file (database, -wal, -shm, stream files) whose raw bytes hold it.
struct scan_result {
    std::vector<std::string> columns;
    std::vector<std::string> files;
    std::size_t values_scanned = 0;
    std::size_t files_scanned = 0;
};
scan_result scan_journal(const std::string& db_path, std::string_view needle);

/// Rows of a table, straight from SQLite.
std::int64_t count_rows(const std::string& db_path, const std::string& table, const std::string& where = "");
/// Runs one SQL statement on its own connection (to damage or doctor a database). True on success.
bool exec_sql(const std::string& db_path, const std::string& sql);

/// The whole content of a file (empty if missing).
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view data);

/// Waits (bounded) until `path` exists.
bool wait_for_file(const std::string& path, std::chrono::milliseconds bound);

/// The child modes of the test binary (main.cpp): `writer DB MARKER RUN_ID` records ends in
/// a loop until it is killed, creating MARKER once it has committed some.
int child_main(int argc, char** argv);

}  // namespace journal_test
