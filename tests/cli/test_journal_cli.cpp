// The run journal through the real CLI: bad databases are exit 5 naming the file and run
// nothing; runs list/show/gc; resume (reused/executed, uncertain refusals, live runs); a disk
// that fills during a run; agentctl SIGKILLed at random points of a 1 000-task run, resumed
// until done; no secret value in any file of the journal, nor the start of one a cap or a kill
// cut, in anything recorded or printed (docs/JOURNAL.md, docs/CLI.md, docs/SECRETS.md).
#include "../support/child_ids.hpp"
#include "command.hpp"

#include "../support/hot_journal.hpp"
#include "../support/private_cgroup.hpp"
#include "../support/skips.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace cli_test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

/// Two tasks: `a` prints "hello" and succeeds, `b` (after a) prints to stderr and exits 3.
/// Each appends its id to `marker` first.
std::string two_tasks(const std::string& marker) {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: pair}\nspec:\n"
           "  policy: {processAllowlist: [sh], approval: never}\n"
           "  actions:\n"
           "    hello: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo a >> " +
           marker +
           "; echo hello']}\n"
           "    fail: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo b >> " +
           marker +
           "; echo bad >&2; exit 3']}\n"
           "  tasks:\n"
           "    - {id: a, uses: 'action:hello'}\n"
           "    - {id: b, uses: 'action:fail', needs: [a]}\n";
}

// One task "nap" that appends a line to `marker`, then sleeps `seconds` as a probe tagged `nonce`.
std::string one_napping_task(const temp_dir& dir, const std::string& marker, int seconds,
                             const std::string& nonce = make_nonce()) {
    return dir.write("wf.yaml",
                     "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: nap}\nspec:\n"
                     "  policy: {processAllowlist: [sh], approval: never}\n"
                     "  actions:\n"
                     "    nap: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo x >> " +
                         marker + "; exec " + probe_bin() + " sleep " + std::to_string(seconds) +
                         " --nonce " + nonce +
                         "']}\n"
                         "  tasks:\n    - {id: nap, uses: 'action:nap'}\n");
}

// A workflow `name` whose actions may run /bin/sh, written to DIR/wf.yaml: `actions` and
// `tasks` are the lines under `actions:` and `tasks:`.
std::string sh_workflow(const temp_dir& dir, const std::string& name, const std::string& actions,
                        const std::string& tasks) {
    return dir.write("wf.yaml",
                     "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: " + name +
                         "}\nspec:\n  policy: {processAllowlist: [sh], approval: never}\n  actions:\n" +
                         actions + "  tasks:\n" + tasks);
}

std::string newest_run(const std::string& db) {
    auto r = agentctl({"--output", "json", "runs", "list", "--db", db, "--limit", "1"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto v = parse_json(r.out);
    auto& runs = v.at("data").at("runs").as_array();
    BOOST_REQUIRE(!runs.empty());
    return std::string(runs[0].at("runId").as_string());
}

// The members that change from run to run, fixed, so that documents compare exactly; and
// the warnings of a host whose Slurm commands cannot reach a controller or whose Docker
// daemon is not running (`runs gc` asks every engine in the PATH), dropped.
void normalise(json::value& v) {
    if (auto* o = v.if_object()) {
        if (auto* d = o->if_contains("diagnostics"); d && d->is_array()) {
            json::array kept;
            for (auto& x : d->as_array())
                if (!x.is_object() || !x.as_object().contains("code") ||
                    (x.at("code") != "slurm_sweep_failed" && x.at("code") != "container_sweep_failed"))
                    kept.push_back(x);
            *d = std::move(kept);
        }
        for (auto& m : *o) {
            std::string_view k = m.key();
            if (k == "runId" || k == "startedAt" || k == "journal" || k == "host" || k == "workflowPath")
                m.value() = "X";
            else if (k == "durationMs" && !m.value().is_null())
                m.value() = 0;
            else if (k == "pid" || k == "userMs" || k == "systemMs" || k == "maxRssKiB" ||
                     k == "bytesBefore" || k == "bytesAfter" || k == "journalBytes")
                m.value() = 0;
            else
                normalise(m.value());
        }
    } else if (auto* a = v.if_array()) {
        for (auto& e : *a) normalise(e);
    }
}

std::string normalised(const std::string& text) {
    json::value v = parse_json(text);
    normalise(v);
    return json::serialize(v);
}

/// A SQLite connection of the test's own, to look at the journal independently of agentctl.
class raw_db {
public:
    explicit raw_db(const std::string& path) {
        BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
    }
    ~raw_db() { sqlite3_close(db_); }
    void exec(const std::string& sql) {
        char* err = nullptr;
        int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
        BOOST_REQUIRE_MESSAGE(rc == SQLITE_OK, sql << ": " << (err ? err : ""));
    }
    /// Rows of text columns.
    std::vector<std::vector<std::string>> rows(const std::string& sql) {
        sqlite3_stmt* s = nullptr;
        BOOST_REQUIRE_MESSAGE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK, sql);
        std::vector<std::vector<std::string>> out;
        while (sqlite3_step(s) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int i = 0; i < sqlite3_column_count(s); ++i) {
                auto* t = sqlite3_column_text(s, i);
                row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
            }
            out.push_back(std::move(row));
        }
        sqlite3_finalize(s);
        return out;
    }

private:
    sqlite3* db_ = nullptr;
};

/// A tmpfs of `size` mounted at `dir` for one test, unmounted at the end.
class tmpfs_mount {
public:
    tmpfs_mount(const std::string& dir, const std::string& options) : dir_(dir) {
        fs::create_directories(dir);
        mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
        if (!mounted_) why_ = std::strerror(errno);
    }
    ~tmpfs_mount() {
        if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    }
    bool remount_read_only() {
        return ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
    }
    bool ok() const { return mounted_; }
    const std::string& why() const { return why_; }

private:
    std::string dir_;
    bool mounted_ = false;
    std::string why_;
};

// Needs root for mounts: said loudly, and a failure under CI.
bool require_mount(const tmpfs_mount& m) {
    if (m.ok()) return true;
    BOOST_TEST_MESSAGE("NOT TESTED: this test needs to mount a tmpfs (run as root): " << m.why());
    const char* ci = std::getenv("CI");
    BOOST_TEST(!(ci && std::string(ci) == "true"), "mount failed under CI: " << m.why());
    return false;
}

/// Runs `run --db db` on the two-task workflow and checks that it is refused with exit 5,
/// naming `named`, and that no task ran.
void refused(const std::string& db, const std::string& named, const std::string& what,
             bool readable = false) {
    temp_dir dir;
    std::string marker = dir.path() + "/marker";
    std::string wf = dir.write("wf.yaml", two_tasks(marker));
    auto r = agentctl({"run", wf, "--db", db});
    BOOST_TEST(r.exit_code == 5, what << ": exit " << r.exit_code << " " << r.err);
    BOOST_TEST(r.err.find(named) != std::string::npos, what << ": " << r.err);
    BOOST_TEST(!fs::exists(marker), what << ": a task ran");
    auto j = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST(j.exit_code == 5, what);
    BOOST_TEST(j.out.empty(), what);
    if (j.exit_code == 5) {
        auto e = parse_json(j.err);
        BOOST_TEST(e.at("error").at("exitCode").as_int64() == 5);
        BOOST_TEST(std::string(e.at("error").at("message").as_string()).find(named) != std::string::npos,
                   what);
    }
    auto list = agentctl({"runs", "list", "--db", db});
    BOOST_TEST(list.exit_code == (readable ? 0 : 5), what << " (runs list): " << list.err);
    auto resume = agentctl({"resume", "run-0000000000000000", "--db", db});
    BOOST_TEST(resume.exit_code == 5, what << " (resume): " << resume.err);
    BOOST_TEST(!fs::exists(marker), what << ": a task ran");
}

/// A journal with one run of the two-task workflow in `dir`.
std::string good_journal(const temp_dir& dir, const std::string& name) {
    std::string db = dir.path() + "/" + name;
    std::string wf = dir.write(name + ".yaml", two_tasks(dir.path() + "/" + name + ".marker"));
    auto r = agentctl({"run", wf, "--db", db});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 4, r.err);
    BOOST_REQUIRE(!fs::exists(db + "-wal") || fs::file_size(db + "-wal") == 0);
    return db;
}

// A foreach over `items` whose children run `sh -c SCRIPT ITEM`.
std::string fan_workflow(const std::string& script, const std::string& items) {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: fan}\nspec:\n"
           "  policy: {processAllowlist: [sh], approval: never}\n"
           "  actions:\n"
           "    say: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, '" +
           script +
           "', '${{ vars.item }}']}\n"
           "  tasks:\n"
           "    - {id: each, uses: 'action:say', foreach: {items: " +
           items + "}}\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(journal_cli)

BOOST_AUTO_TEST_CASE(every_bad_journal_is_exit_5_naming_the_file_and_runs_nothing) {
    temp_dir dir;
    refused(dir.path() + "/no/such/folder/j.db", dir.path() + "/no/such/folder/j.db", "missing folder");
    refused(dir.path(), dir.path(), "a directory");
    std::string fifo = dir.path() + "/fifo.db";
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    refused(fifo, fifo, "a fifo (unreadable)");
    refused(dir.write("text.db", std::string(8192, 'x')), "text.db", "not SQLite (foreign)");

    std::string other = dir.path() + "/other.db";
    {
        sqlite3* db = nullptr;
        BOOST_REQUIRE(sqlite3_open(other.c_str(), &db) == SQLITE_OK);
        sqlite3_exec(db, "CREATE TABLE notes(x); INSERT INTO notes VALUES (1);", nullptr, nullptr, nullptr);
        sqlite3_close(db);
    }
    std::string before = read_file(other);
    refused(other, other, "another application's SQLite database (foreign)");
    BOOST_TEST(read_file(other) == before, "another application's database was modified");

    std::string newer = good_journal(dir, "newer.db");
    raw_db(newer).exec("PRAGMA user_version = 99");
    refused(newer, newer, "a newer schema");

    // agentctl creates a journal whole under another name (docs/JOURNAL.md, "Creation"): an
    // empty file at a journal's path is not one of its own, and never silently a new journal.
    std::string empty = dir.write("empty.db", "");
    refused(empty, empty, "an empty (0-byte) file (corrupt)");
    BOOST_TEST(fs::file_size(empty) == 0u, "the empty file was made a journal");

    std::string truncated = good_journal(dir, "truncated.db");
    fs::resize_file(truncated, fs::file_size(truncated) / 2);
    refused(truncated, truncated, "a truncated journal (corrupt)");

    std::string damaged = good_journal(dir, "damaged.db");
    {
        std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(4096);
        std::string junk(3 * 4096, '\x5a');
        f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    refused(damaged, damaged, "a damaged page (corrupt)");

    // Read-only: a file system mounted read-only (root ignores file modes).
    tmpfs_mount ro(dir.path() + "/ro", "size=4m");
    if (require_mount(ro)) {
        std::string db = good_journal(dir, "ro/j.db");
        BOOST_REQUIRE(ro.remount_read_only());
        refused(db, db, "a read-only file system", /*readable=*/true);
    }
}

BOOST_AUTO_TEST_CASE(the_default_journal_is_in_the_state_folder_and_no_journal_records_nothing) {
    temp_dir dir;
    std::string state = dir.path() + "/state/deeper";
    std::string wf = dir.write("wf.yaml", two_tasks(dir.path() + "/marker"));
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state};
    auto empty = agentctl({"runs"}, o);
    BOOST_TEST(empty.exit_code == 0, empty.err);
    BOOST_TEST(empty.out == "no runs recorded in " + state + "/journal.db\n");
    auto r = agentctl({"run", wf}, o);
    BOOST_TEST(r.exit_code == 4);
    BOOST_TEST(fs::exists(state + "/journal.db"));
    BOOST_TEST(((fs::status(state).permissions() & fs::perms::all) == fs::perms::owner_all),
               "state folder mode");
    BOOST_TEST(!fs::exists(dir.path() + "/journal.db"), "the journal went into the workspace");
    auto none = agentctl({"run", wf, "--no-journal"}, o);
    BOOST_TEST(none.exit_code == 4);
    auto list = agentctl({"--output", "json", "runs", "list"}, o);
    BOOST_TEST(parse_json(list.out).at("data").at("runs").as_array().size() == 1u,
               "--no-journal recorded a run");
    auto both = agentctl({"run", wf, "--no-journal", "--db", dir.path() + "/x.db"}, o);
    BOOST_TEST(both.exit_code == 2);
    // A state folder that cannot be made (a file is in the way): exit 5 naming it.
    dir.write("blocker", "x");
    command_options blocked;
    blocked.env = {"AGENTCTL_STATE_DIR=" + dir.path() + "/blocker/state"};
    auto bad = agentctl({"run", wf}, blocked);
    BOOST_TEST(bad.exit_code == 5, bad.err);
    BOOST_TEST(bad.err.find(dir.path() + "/blocker") != std::string::npos, bad.err);
}

// A journal truncated to 0 bytes at the default location is exit 5 naming it, for `runs` too:
// never "no runs recorded", and never a new journal in its place.
BOOST_AUTO_TEST_CASE(an_emptied_default_journal_is_exit_5_not_an_empty_history) {
    temp_dir dir;
    std::string state = dir.path() + "/state";
    std::string wf = dir.write("wf.yaml", two_tasks(dir.path() + "/marker"));
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state};
    BOOST_TEST_REQUIRE(agentctl({"run", wf}, o).exit_code == 4);
    fs::resize_file(state + "/journal.db", 0);
    for (auto args : std::vector<std::vector<std::string>>{{"runs"}, {"runs", "gc"}, {"run", wf}}) {
        auto r = agentctl(args, o);
        BOOST_TEST(r.exit_code == 5, args[0] << ": exit " << r.exit_code << " " << r.out << r.err);
        BOOST_TEST(r.err.find(state + "/journal.db: the file is empty (0 bytes)") != std::string::npos,
                   r.err);
    }
    BOOST_TEST(fs::file_size(state + "/journal.db") == 0u, "the emptied journal was made a new one");
}

// A rollback journal left beside a database by a writer that died (agentctl's own journals
// never leave one; another program, or an older agentctl, can): the reading commands roll it
// back and read the last committed state, instead of failing with "attempt to write a
// readonly database".
BOOST_AUTO_TEST_CASE(reading_commands_roll_back_a_hot_rollback_journal) {
    temp_dir dir;
    std::string db = good_journal(dir, "j.db");
    std::string why;
    BOOST_TEST_REQUIRE(test_support::make_hot_rollback_journal(db, why), why);
    BOOST_TEST_REQUIRE(fs::exists(db + "-journal"));
    auto list = agentctl({"--output", "json", "runs", "--db", db});
    BOOST_TEST_REQUIRE(list.exit_code == 0, list.err);
    json::value listed = parse_json(list.out);
    const auto& runs = listed.at("data").at("runs").as_array();
    BOOST_TEST_REQUIRE(runs.size() == 1u);
    BOOST_TEST(runs[0].at("workflow").as_string() == "pair", "the torn write was rolled back");
    BOOST_TEST(!fs::exists(db + "-journal"));
    auto show = agentctl({"runs", "show", std::string(runs[0].at("runId").as_string()), "--db", db});
    BOOST_TEST(show.exit_code == 0, show.err);

    // runs show meets it first just as well.
    std::string db2 = good_journal(dir, "k.db");
    std::string id = newest_run(db2);
    BOOST_TEST_REQUIRE(test_support::make_hot_rollback_journal(db2, why), why);
    auto show2 = agentctl({"runs", "show", id, "--db", db2});
    BOOST_TEST(show2.exit_code == 0, show2.err);
    BOOST_TEST(show2.err.find("readonly") == std::string::npos, show2.err);
}

// A SIGKILL at any moment of the first run's journal creation leaves no journal or a whole
// one, never a half-made file (docs/JOURNAL.md, "Creation"). agentctl is killed right after
// the k-th change that inotify reports in the journal's folder, for k = 1, 2, ... until three
// kills in a row found the run recorded (or the run ended first). After each kill, `runs`
// reads the journal or says there is none, and a new run there succeeds and leaves nothing of
// the killed creation behind.
BOOST_AUTO_TEST_CASE(a_sigkill_during_the_journals_creation_leaves_none_or_a_whole_one) {
    temp_dir dir;
    std::string wf =
        dir.write("wf.yaml",
                  "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: one}\nspec:\n"
                  "  policy: {processAllowlist: [sh], approval: never}\n"
                  "  actions:\n    ok: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'exit 0']}\n"
                  "  tasks:\n    - {id: a, uses: 'action:ok'}\n");
    auto creation_left = [](const std::string& folder) {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(folder))
            if (e.path().filename().string().find("-new-") != std::string::npos)
                names.push_back(e.path().filename());
        return names;
    };
    int none = 0, inside = 0, whole = 0, recorded_in_a_row = 0;
    int k = 1;
    for (; k <= 500 && recorded_in_a_row < 3; ++k) {
        std::string folder = dir.path() + "/k" + std::to_string(k);
        fs::create_directory(folder);
        std::string db = folder + "/j.db";
        int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        BOOST_TEST_REQUIRE(watch >= 0);
        BOOST_TEST_REQUIRE(::inotify_add_watch(watch, folder.c_str(),
                                               IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE |
                                                   IN_MOVED_TO | IN_DELETE) >= 0);
        command_options o;
        o.on_start = [&](pid_t pid) {
            int exited = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
            int seen = 0;
            alignas(inotify_event) char buffer[8192];
            while (seen < k) {
                pollfd fds[2] = {{watch, POLLIN, 0}, {exited, POLLIN, 0}};
                if (::poll(fds, 2, 30000) <= 0) break;  // the test's bound: 30 s without a change
                for (;;) {
                    ssize_t n = ::read(watch, buffer, sizeof buffer);
                    if (n <= 0) break;
                    for (ssize_t at = 0; at < n;) {
                        auto* e = reinterpret_cast<inotify_event*>(buffer + at);
                        ++seen;
                        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
                    }
                }
                if (seen < k && (fds[1].revents & POLLIN)) break;  // it ended before the k-th change
            }
            if (seen >= k) ::kill(pid, SIGKILL);
            ::close(exited);
        };
        auto r = agentctl({"run", "--db", db, wf}, o);
        ::close(watch);
        if (!creation_left(folder).empty()) ++inside;
        if (!fs::exists(db)) {
            ++none;
            recorded_in_a_row = 0;
            auto list = agentctl({"runs", "--db", db});
            BOOST_TEST(list.exit_code == 5, "k=" << k << ": " << list.err);
            BOOST_TEST(list.err.find("no such file") != std::string::npos, "k=" << k << ": " << list.err);
        } else {
            ++whole;
            BOOST_TEST(!fs::exists(db + "-journal"), "k=" << k);
            auto list = agentctl({"--output", "json", "runs", "--db", db});
            BOOST_TEST(list.exit_code == 0, "k=" << k << ": " << list.err);
            bool recorded =
                list.exit_code == 0 && !parse_json(list.out).at("data").at("runs").as_array().empty();
            recorded_in_a_row = recorded ? recorded_in_a_row + 1 : 0;
        }
        if (r.signal != SIGKILL) recorded_in_a_row = 3;  // it ended before the k-th change: done
        auto again = agentctl({"run", "--db", db, wf});
        BOOST_TEST(again.exit_code == 0, "k=" << k << ": " << again.err);
        BOOST_TEST(creation_left(folder).empty(), "k=" << k << ": a killed creation's files are left");
    }
    BOOST_TEST_MESSAGE(k - 1 << " kills: " << none << " left no journal, " << inside
                             << " were inside the creation, " << whole << " left a whole journal");
    BOOST_TEST(none > 0);
    BOOST_TEST(inside > 0, "no kill landed inside the creation");
    BOOST_TEST(whole > 0);
}

BOOST_AUTO_TEST_CASE(unknown_run_ids_are_exit_5) {
    temp_dir dir;
    std::string db = good_journal(dir, "j.db");
    for (auto args : std::vector<std::vector<std::string>>{{"resume", "run-nope", "--db", db},
                                                           {"resume", "run-nope", "--db", db, "--dry-run"},
                                                           {"runs", "show", "run-nope", "--db", db}}) {
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 5, r.err);
        BOOST_TEST(r.err.find("run-nope") != std::string::npos, r.err);
        BOOST_TEST(r.err.find(db) != std::string::npos, r.err);
    }
    std::string id = newest_run(db);
    auto task = agentctl({"runs", "show", id, "--task", "zzz", "--db", db});
    BOOST_TEST(task.exit_code == 5);
    BOOST_TEST(task.err.find("zzz") != std::string::npos, task.err);
    auto usage = agentctl({"runs", "show", id, "--stdout", "--db", db});
    BOOST_TEST(usage.exit_code == 2, "--stdout without --task");
}

BOOST_AUTO_TEST_CASE(runs_list_show_gc_outputs) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string wf = dir.write("wf.yaml", two_tasks(marker));
    auto run = agentctl({"run", wf, "--db", db});
    BOOST_REQUIRE_EQUAL(run.exit_code, 4);
    std::string id = newest_run(db);

    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    BOOST_TEST(list.exit_code == 0);
    BOOST_TEST(
        normalised(list.out) ==
        R"({"apiVersion":"agentctl.dev/cli/v1","kind":"RunList","ok":true,"data":{"journal":"X","journalBytes":0,"runs":[)"
        R"({"runId":"X","workflow":"pair","workflowPath":"X","state":"failed","startedAt":"X","durationMs":0,)"
        R"("segment":0,"tasks":{"total":2,"recorded":2,"reused":0,"states":{"failed":1,"succeeded":1}},)"
        R"("owner":{"host":"X","pid":0}}]},"diagnostics":[]})");

    auto human = agentctl({"runs", "--db", db});
    BOOST_TEST(human.exit_code == 0);
    std::regex row("RUN ID {16}WORKFLOW {3}STATE {7}STARTED {5}TIME {3}TASKS\n" + id +
                   "  pair {7}failed {6}\\d\\d-\\d\\d \\d\\d:\\d\\d [0-9.]+ (ms|s|min|h) +2/2 ✗1\n"
                   "journal " +
                   db + ": [0-9.]+ KiB\n");
    BOOST_TEST(std::regex_match(human.out, row), human.out);

    auto out = agentctl({"runs", "show", id, "--task", "a", "--stdout", "--db", db});
    BOOST_TEST(out.exit_code == 0);
    BOOST_TEST(out.out == "hello\n");
    auto err = agentctl({"runs", "show", id, "--task", "b", "--stderr", "--db", db});
    BOOST_TEST(err.out == "bad\n");

    auto show = agentctl({"--output", "json", "runs", "show", id, "--db", db});
    BOOST_TEST(show.exit_code == 0, show.err);
    json::value v = parse_json(show.out);
    BOOST_TEST(v.at("kind").as_string() == "RunRecord");
    auto& d = v.at("data");
    BOOST_TEST(d.at("runId").as_string() == id);
    BOOST_TEST(d.at("state").as_string() == "failed");
    BOOST_TEST(d.at("tasks").at("a").at("stdout").as_string() == "hello\n");
    BOOST_TEST(d.at("tasks").at("b").at("stderr").as_string() == "bad\n");
    BOOST_TEST(d.at("tasks").at("b").at("exitCode").as_int64() == 3);
    BOOST_TEST(d.at("argv").as_array().size() == 5u);  // agentctl run FILE --db DB
    BOOST_TEST(d.at("uncertain").as_array().empty());
    // The run's own report and `runs show` agree on every task.
    auto report = agentctl({"--output", "json", "run", wf, "--db", db});
    json::value rv = parse_json(report.out);
    std::string id2(rv.at("data").at("runId").as_string());
    auto show2 = agentctl({"--output", "json", "runs", "show", id2, "--db", db});
    json::value sv = parse_json(show2.out);
    for (const char* t : {"a", "b"}) {
        json::value x = rv.at("data").at("tasks").at(t), y = sv.at("data").at("tasks").at(t);
        normalise(x);
        normalise(y);
        BOOST_TEST(json::serialize(x) == json::serialize(y), t);
    }

    auto human_show = agentctl({"runs", "show", id, "--db", db});
    std::regex show_text("run " + id +
                         " \\(pair, .*wf.yaml\\): failed, started [-0-9T:]+Z, [0-9.]+ m?s\n"
                         "✓ a  succeeded \\(exit 0\\)  [0-9.]+ m?s\n"
                         "✗ b  failed \\(exit 3\\)  [0-9.]+ m?s: exited with status 3\n"
                         "  \\| bad\n"
                         "2 of 2 tasks have a result\n");
    BOOST_TEST(std::regex_match(human_show.out, show_text), human_show.out);

    auto gc = agentctl({"--output", "json", "runs", "gc", "--keep", "1", "--db", db});
    BOOST_TEST(gc.exit_code == 0, gc.err);
    BOOST_TEST(
        normalised(gc.out) ==
        R"({"apiVersion":"agentctl.dev/cli/v1","kind":"GcReport","ok":true,"data":{"journal":"X",)"
        R"("leftovers":{"cgroups":[],"containers":[]},"interrupted":[],"runsRemoved":1,"runsKept":1,)"
        R"("liveRunsKept":0,"orphanStreamsRemoved":0,"bytesBefore":0,"bytesAfter":0},"diagnostics":[]})");
    auto after = agentctl({"--output", "json", "runs", "list", "--db", db});
    json::value after_v = parse_json(after.out);
    auto& left = after_v.at("data").at("runs").as_array();
    BOOST_REQUIRE_EQUAL(left.size(), 1u);
    BOOST_TEST(left[0].at("runId").as_string() == id2, "gc kept the older run");
    auto gone = agentctl({"runs", "show", id, "--db", db});
    BOOST_TEST(gone.exit_code == 5);
    auto gc_human = agentctl({"runs", "gc", "--keep", "0", "--db", db});
    BOOST_TEST(
        std::regex_match(gc_human.out, std::regex("removed 1 run, kept 0; .*j.db: \\d+ -> \\d+ bytes\n")),
        gc_human.out);
    auto empty = agentctl({"runs", "--db", db});
    BOOST_TEST(empty.out == "no runs recorded in " + db + "\n");
}

// `runs` fits 80 columns, counts the tasks that run (a foreach's children, never its parent),
// and ends with the journal's size, suggesting `runs gc` once it passes 1 GiB.
BOOST_AUTO_TEST_CASE(runs_fits_80_columns_counts_tasks_not_parents_and_suggests_gc) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string wf = sh_workflow(
        dir, "a-workflow-with-a-long-name",
        "    t: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'exit $0', '${{ vars.item }}']}\n",
        "    - {id: one, uses: 'action:t', failure: continue, vars: {item: '0'}}\n"
        "    - {id: t, uses: 'action:t', failure: continue, foreach: {items: ['0', '1', '0', '1', '0', "
        "'1']}}\n"
        "    - {id: none, uses: 'action:t', foreach: {items: []}}\n");
    auto r = agentctl({"run", wf, "--db", db});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.err);
    auto j = agentctl({"--output", "json", "runs", "--db", db});
    json::value v = parse_json(j.out);
    const auto& tasks = v.at("data").at("runs").at(0).at("tasks");
    BOOST_TEST(tasks.at("total").as_int64() == 7, j.out);  // one, and t's six: not t, not none
    BOOST_TEST(tasks.at("recorded").as_int64() == 7, j.out);
    BOOST_TEST(tasks.at("states").at("succeeded").as_int64() == 4, j.out);
    BOOST_TEST(tasks.at("states").at("failed").as_int64() == 3, j.out);
    BOOST_TEST(v.at("data").at("journalBytes").as_int64() > 0, j.out);

    auto human = agentctl({"runs", "--db", db});
    BOOST_TEST(human.exit_code == 0, human.err);
    std::istringstream lines(human.out);
    for (std::string line; std::getline(lines, line);) {
        std::size_t chars = 0;
        for (unsigned char c : line) chars += (c & 0xc0) != 0x80;
        BOOST_TEST(chars < 80u, "a line of " << chars << " characters: " << line);
    }
    BOOST_TEST(human.out.find(" a-workflo… failed ") != std::string::npos, human.out);
    BOOST_TEST(human.out.find(" 7/7 ✗3\n") != std::string::npos, human.out);
    BOOST_TEST(human.out.find("journal " + db + ": ") != std::string::npos, human.out);
    BOOST_TEST(human.out.find("runs gc") == std::string::npos, human.out);

    // Past 1 GiB (an orphan stream file a crash left, sparse here), `runs gc` is suggested; it
    // removes that file, and the suggestion goes.
    fs::create_directories(db + "-streams/999");
    { std::ofstream(db + "-streams/999/0-1") << "x"; }
    fs::resize_file(db + "-streams/999/0-1", std::uintmax_t(3) << 29);
    auto big = agentctl({"runs", "--db", db});
    BOOST_TEST(big.out.find("journal " + db + ": 1.5 GiB; agentctl runs gc --keep 20 --db " + db +
                            " removes all but the newest 20 runs\n") != std::string::npos,
               big.out);
    BOOST_TEST(agentctl({"runs", "gc", "--db", db}).exit_code == 0);
    BOOST_TEST(agentctl({"runs", "--db", db}).out.find("runs gc") == std::string::npos);
}

// --last names the newest run (resume, runs show); --failed shows only what failed.
BOOST_AUTO_TEST_CASE(last_run_and_failed_tasks) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string wf = dir.write("wf.yaml", two_tasks(marker));
    auto none = agentctl({"runs", "show", "--last", "--db", db});
    BOOST_TEST(none.exit_code == 5, none.err);
    BOOST_TEST(agentctl({"run", wf, "--db", db}).exit_code == 4);
    std::string older = newest_run(db);
    BOOST_TEST(agentctl({"run", wf, "--db", db}).exit_code == 4);
    std::string id = newest_run(db);
    BOOST_REQUIRE(id != older);

    auto last = agentctl({"runs", "show", "--last", "--db", db});
    BOOST_TEST(last.exit_code == 0, last.err);
    BOOST_TEST(last.out.find("run " + id + " ") == 0u, last.out);
    auto failed = agentctl({"runs", "show", "--last", "--failed", "--db", db});
    BOOST_TEST(failed.exit_code == 0, failed.err);
    BOOST_TEST(failed.out.find("✗ b  failed (exit 3)") != std::string::npos, failed.out);
    BOOST_TEST(failed.out.find("✓ a") == std::string::npos, failed.out);
    BOOST_TEST(failed.out.find("2 of 2 tasks have a result; 1 failed\n") != std::string::npos, failed.out);
    auto j = agentctl({"--output", "json", "runs", "show", older, "--failed", "--db", db});
    json::value v = parse_json(j.out);
    BOOST_TEST(v.at("data").at("runId").as_string() == older);
    BOOST_TEST(v.at("data").at("tasks").as_object().size() == 1u, j.out);
    BOOST_TEST(v.at("data").at("tasks").as_object().contains("b"), j.out);
    auto dry = agentctl({"resume", "--last", "--dry-run", "--db", db});
    BOOST_TEST(dry.exit_code == 0, dry.err);
    BOOST_TEST(dry.out.find("resume " + id + " would reuse 2 and run 0 of 2 tasks") != std::string::npos,
               dry.out);

    for (const std::vector<std::string>& bad : {std::vector<std::string>{"runs", "show", id, "--last"},
                                                {"resume", id, "--last"},
                                                {"runs", "--last"},
                                                {"runs", "gc", "--failed"},
                                                {"runs", "show", id, "--failed", "--task", "a"}}) {
        auto args = bad;
        args.insert(args.end(), {"--db", db});
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 2, r.err);
    }
}

// --attempt N reaches each attempt of a retried task: its end and its own streams.
BOOST_AUTO_TEST_CASE(earlier_attempts_are_shown_with_their_streams) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string wf =
        sh_workflow(dir, "flaky",
                    "    t: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'n=$(cat count "
                    "2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo try-$n; echo err-$n "
                    ">&2; [ $n -ge 3 ]']}\n",
                    "    - {id: t, uses: 'action:t', retry: {maxAttempts: 3, on: [exit_nonzero]}}\n");
    auto r = agentctl({"run", wf, "--db", db});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    std::string id = newest_run(db);
    auto first = agentctl({"runs", "show", id, "--task", "t", "--attempt", "1", "--stdout", "--db", db});
    BOOST_TEST(first.exit_code == 0, first.err);
    BOOST_TEST(first.out == "try-1\n");
    auto second = agentctl({"runs", "show", id, "--task", "t", "--attempt", "2", "--stderr", "--db", db});
    BOOST_TEST(second.out == "err-2\n");
    BOOST_TEST(agentctl({"runs", "show", id, "--task", "t", "--stdout", "--db", db}).out == "try-3\n");
    auto human = agentctl({"runs", "show", id, "--task", "t", "--attempt", "1", "--db", db});
    BOOST_TEST(human.exit_code == 0, human.err);
    BOOST_TEST(human.out.find("attempt 1 of t (segment 0, ") == 0u, human.out);
    BOOST_TEST(human.out.find("✗ t  failed (exit 1)") != std::string::npos, human.out);
    BOOST_TEST(human.out.find("  | try-1\n") != std::string::npos, human.out);
    BOOST_TEST(human.out.find("  | err-1\n") != std::string::npos, human.out);
    auto j = agentctl({"--output", "json", "runs", "show", id, "--task", "t", "--attempt", "2", "--db", db});
    json::value v = parse_json(j.out);
    BOOST_TEST(v.at("data").at("attempt").as_int64() == 2);
    BOOST_TEST(v.at("data").at("result").at("stdout").as_string() == "try-2\n", j.out);
    BOOST_TEST(v.at("data").at("result").at("exitCode").as_int64() == 1, j.out);
    BOOST_TEST(v.at("data").at("attempts").as_array().size() == 1u, j.out);
    auto missing = agentctl({"runs", "show", id, "--task", "t", "--attempt", "4", "--db", db});
    BOOST_TEST(missing.exit_code == 5, missing.err);
    BOOST_TEST(missing.err.find("has no attempt 4 of task \"t\"") != std::string::npos, missing.err);
    BOOST_TEST(agentctl({"runs", "show", id, "--attempt", "1", "--db", db}).exit_code == 2);
    BOOST_TEST(agentctl({"runs", "show", id, "--task", "t", "--attempt", "0", "--db", db}).exit_code == 2);
}

// A foreach's aggregate lets its items go once recorded (memory stays flat): the JSON report
// reads them back from the journal and is the report a run without a journal prints.
BOOST_AUTO_TEST_CASE(a_released_aggregate_reports_as_if_it_had_been_kept) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string wf = dir.write("wf.yaml", fan_workflow("echo $0", "[red, green, blue]"));
    auto journaled = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST(journaled.exit_code == 0, journaled.err);
    auto memory = agentctl({"--output", "json", "run", wf, "--no-journal"});
    BOOST_TEST(memory.exit_code == 0, memory.err);
    BOOST_TEST(normalised(journaled.out) == normalised(memory.out));
    auto v = parse_json(journaled.out);
    const auto& items = v.at("data").at("tasks").at("each").at("output").at("items").as_array();
    BOOST_TEST_REQUIRE(items.size() == 3u, journaled.out);
    BOOST_TEST(items[2].at("taskId").as_string() == child_id_in(journaled.out, "each--0002"));
    BOOST_TEST(v.at("data").at("output").at("each").at("items").as_array().size() == 3u);
    // Named twice, read back once: the second is the text of the first (wire.cpp, released_outputs).
    BOOST_TEST(v.at("data").at("output").at("each") == v.at("data").at("tasks").at("each").at("output"));
    BOOST_TEST(items[1].at("output").at("exitCode") == 0);
}

// The items of a released aggregate are gathered as the report's `tasks` reads its children
// back (wire.cpp, released_outputs): a failed child, and children a stop left unstarted (one
// journal range for all of them), are listed as the children's own results say.
BOOST_AUTO_TEST_CASE(a_released_aggregate_of_a_stopped_run_lists_its_unstarted_children) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string wf = dir.write("wf.yaml", fan_workflow("echo $0; test $0 != 2", "[1, 2, 3, 4]"));
    auto journaled = agentctl({"--output", "json", "run", wf, "--db", db, "--jobs", "1"});
    BOOST_TEST(journaled.exit_code == 4, journaled.err);
    auto memory = agentctl({"--output", "json", "run", wf, "--no-journal", "--jobs", "1"});
    BOOST_TEST(normalised(journaled.out) == normalised(memory.out));
    auto v = parse_json(journaled.out);
    const auto& output = v.at("data").at("tasks").at("each").at("output");
    BOOST_TEST(v.at("data").at("output").at("each") == output);
    const auto& items = output.at("items").as_array();
    BOOST_TEST_REQUIRE(items.size() == 4u, journaled.out);
    BOOST_TEST(items[0].at("state").as_string() == "succeeded");
    BOOST_TEST(items[1].at("state").as_string() == "failed");
    BOOST_TEST(items[1].at("error").at("code").as_string() == "exit_nonzero");
    for (std::size_t i : {2, 3}) {
        BOOST_TEST(items[i].at("state").as_string() == "skipped");
        BOOST_TEST(items[i].at("error").at("code").as_string() == "run_stopped");
        BOOST_TEST(items[i].at("taskId").as_string() ==
                   child_id_in(journaled.out, "each--000" + std::to_string(i)));
    }
}

BOOST_AUTO_TEST_CASE(resume_reuses_what_succeeded_and_reports_reused_and_executed) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string wf = dir.write("wf.yaml", two_tasks(marker));
    BOOST_REQUIRE_EQUAL(agentctl({"run", wf, "--db", db}).exit_code, 4);
    std::string id = newest_run(db);
    BOOST_TEST(read_file(marker) == "a\nb\n");

    // The workflow file changes after the run: resume runs what was recorded, not this.
    dir.write("wf.yaml", "not: a workflow\n");

    auto dry = agentctl({"--output", "json", "resume", id, "--db", db, "--dry-run", "--retry-failed"});
    BOOST_TEST(dry.exit_code == 0, dry.err);
    BOOST_TEST(
        normalised(dry.out) ==
        R"({"apiVersion":"agentctl.dev/cli/v1","kind":"ResumePlan","ok":true,"data":{"runId":"X",)"
        R"("workflow":"pair","segment":0,"wouldRun":true,"tasks":[{"taskId":"a","action":"reuse",)"
        R"("reason":"succeeded in segment 0"},{"taskId":"b","action":"run","reason":"failed (exit 3); )"
        R"(--retry-failed"}]},"diagnostics":[]})");
    BOOST_TEST(read_file(marker) == "a\nb\n", "--dry-run ran something");

    // Without --retry-failed the failed task's result is kept: nothing runs.
    auto keep = agentctl({"--output", "json", "resume", id, "--db", db});
    BOOST_TEST(keep.exit_code == 4, keep.err);
    BOOST_TEST(read_file(marker) == "a\nb\n");
    auto kv = parse_json(keep.out);
    BOOST_TEST(json::serialize(kv.at("data").at("resume")) == R"({"reused":["a","b"],"executed":[]})");

    auto r = agentctl({"--output", "json", "resume", id, "--db", db, "--retry-failed"});
    BOOST_TEST(r.exit_code == 4, r.err);
    BOOST_TEST(read_file(marker) == "a\nb\nb\n", "a succeeded and was run again, or b did not run");
    auto v = parse_json(r.out);
    auto& d = v.at("data");
    BOOST_TEST(d.at("runId").as_string() == id, "the resumed run keeps its id");
    BOOST_TEST(json::serialize(d.at("resume")) == R"({"reused":["a"],"executed":["b"]})");
    BOOST_TEST(d.at("tasks").at("a").at("reused").as_bool());
    BOOST_TEST(d.at("tasks").at("a").at("stdout").as_string() == "hello\n", "a reused stream read back");
    BOOST_TEST(!d.at("tasks").at("b").as_object().contains("reused"));
    BOOST_TEST(d.at("tasks").at("b").at("attempts").as_int64() == 2, "attempts number on across segments");

    auto shown = agentctl({"--output", "json", "runs", "show", id, "--db", db});
    json::value sv = parse_json(shown.out);
    BOOST_TEST(sv.at("data").at("tasks").at("a").at("reused").as_bool(), "runs show: a was taken over");
    BOOST_TEST(!sv.at("data").at("tasks").at("b").as_object().contains("reused"), "runs show: b ran");
    BOOST_TEST(sv.at("data").at("segment").as_int64() == 2);

    auto human = agentctl({"resume", id, "--db", db, "--retry-failed"});
    BOOST_TEST(human.err.find("resumed run " + id + ": 1 tasks reused, 1 executed\n") != std::string::npos,
               human.err);
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    json::value list_v = parse_json(list.out);
    auto& runs = list_v.at("data").at("runs").as_array();
    BOOST_TEST(runs.size() == 1u);
    BOOST_TEST(runs[0].at("segment").as_int64() == 3);
}

BOOST_AUTO_TEST_CASE(a_live_run_is_never_resumed_and_uncertain_attempts_refuse_resume) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string started = dir.path() + "/started";
    std::string nonce = make_nonce();
    std::string wf = one_napping_task(dir, started, 30, nonce);
    command_result live_resume, live_dry;
    bool asked = false;
    command_options o;
    o.poll = [&](pid_t pid) {
        if (!fs::exists(started)) return false;
        std::string id = newest_run(db);
        live_resume = agentctl({"resume", id, "--db", db, "--rerun-uncertain"});
        live_dry = agentctl({"resume", id, "--db", db, "--dry-run"});
        asked = true;
        ::kill(pid, SIGKILL);
        return true;
    };
    auto r = agentctl({"run", wf, "--db", db}, o);
    BOOST_REQUIRE(asked);
    BOOST_TEST(r.signal == SIGKILL);
    BOOST_TEST(live_resume.exit_code == 5, live_resume.err);
    BOOST_TEST(live_resume.err.find("live") != std::string::npos, live_resume.err);
    BOOST_TEST(live_dry.exit_code == 5, live_dry.err);
    BOOST_TEST(read_file(started) == "x\n", "a live run was resumed");
    // Its watchdog ends the killed run's task; until then a resume also warns
    // dead_run_still_running (docs/CRASH_SAFETY.md), which is another test's case.
    for (auto until = std::chrono::steady_clock::now() + 10s;
         !processes_with(nonce).empty() && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(10ms);
    BOOST_TEST_REQUIRE(processes_with(nonce).empty(), "the killed run's task outlived its watchdog's 10 s");

    std::string id = newest_run(db);
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    BOOST_TEST(parse_json(list.out).at("data").at("runs").at(0).at("state").as_string() == "interrupted");
    auto refused = agentctl({"--output", "json", "resume", id, "--db", db});
    BOOST_TEST(refused.exit_code == 3, refused.err);
    auto e = parse_json(refused.err);
    BOOST_TEST(std::string(e.at("error").at("message").as_string()).find("nap") != std::string::npos);
    BOOST_TEST(e.at("diagnostics").at(0).at("code").as_string() == "resume_uncertain");
    BOOST_TEST(read_file(started) == "x\n", "an uncertain task ran without --rerun-uncertain");
    auto dry = agentctl({"resume", id, "--db", db, "--dry-run"});
    BOOST_TEST(dry.exit_code == 3);
    BOOST_TEST(dry.out.find("uncertain   nap: uncertain: attempt 1 started") == 0u, dry.out);
}

// After a Ctrl-C, a resume that refuses says so in one line for the run (how many tasks, where
// to see them) and gives the command that continues: the one typed, with --rerun-uncertain.
BOOST_AUTO_TEST_CASE(a_refused_resume_is_one_line_with_the_command_that_continues) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/started";
    std::string wf =
        sh_workflow(dir, "naps",
                    "    nap: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo x >> " + marker +
                        "; exec sleep 30', '${{ vars.item }}']}\n",
                    "    - {id: nap, uses: 'action:nap', foreach: {items: [1, 2, 3]}}\n");
    command_options o;
    o.poll = [&](pid_t pid) {
        if (read_file(marker) != "x\nx\n") return false;  // both running
        ::kill(pid, SIGINT);
        return true;
    };
    auto r = agentctl({"run", wf, "--db", db, "-j", "2"}, o);
    BOOST_TEST(r.exit_code == 130, r.err);
    std::string id = newest_run(db);
    auto refused = agentctl({"--color", "never", "resume", id, "--db", db});
    BOOST_TEST(refused.exit_code == 3, refused.err);
    BOOST_TEST(refused.err ==
                   "agentctl: run " + id +
                       ": 2 tasks were running when it stopped and may have had their effect; nothing was "
                       "run (--dry-run lists them). To run them again: " +
                       agentctl_bin() + " --color never resume --rerun-uncertain " + id + " --db " + db +
                       "\n",
               refused.err);
    // Machines still get one diagnostic per task.
    auto j = agentctl({"--output", "json", "resume", id, "--db", db});
    BOOST_TEST(j.exit_code == 3);
    BOOST_TEST(parse_json(j.err).at("diagnostics").as_array().size() == 2u, j.err);
    BOOST_TEST(read_file(marker) == "x\nx\n", "a refused resume ran something");
}

// --timeout and --retries set every task's timeout and attempts over what the workflow says;
// they are recorded with the run, and a resume compiles the same plan with them.
BOOST_AUTO_TEST_CASE(every_tasks_timeout_and_retries_from_the_command_line) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string count = dir.path() + "/count";
    std::string wf =
        sh_workflow(dir, "limits",
                    "    slow: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'exec sleep 300'], "
                    "timeoutSeconds: 600}\n"
                    "    bad: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo x >> " +
                        count + "; exit 1']}\n",
                    "    - {id: slow, uses: 'action:slow', failure: continue}\n"
                    "    - {id: bad, uses: 'action:bad', failure: continue, retry: {maxAttempts: 1}}\n");
    auto begun = std::chrono::steady_clock::now();
    auto r = agentctl({"--output", "json", "run", wf, "--db", db, "--timeout", "0.5", "--retries", "3"});
    BOOST_TEST((std::chrono::steady_clock::now() - begun < 60s), "the action's 600 s timeout was kept");
    BOOST_TEST(r.exit_code == 4, r.err);
    json::value v = parse_json(r.out);
    const auto& slow = v.at("data").at("tasks").at("slow");
    BOOST_TEST(slow.at("state").as_string() == "timed_out", r.out);
    BOOST_TEST(slow.at("attempts").as_int64() == 3, r.out);  // a timeout is retried too
    BOOST_TEST(slow.at("error").at("message").as_string() == "timed out after 0.5s and was terminated",
               r.out);
    BOOST_TEST(v.at("data").at("tasks").at("bad").at("attempts").as_int64() == 3, r.out);
    BOOST_TEST(read_file(count) == "x\nx\nx\n");
    std::string id(v.at("data").at("runId").as_string());
    json::value shown = parse_json(agentctl({"--output", "json", "runs", "show", id, "--db", db}).out);
    BOOST_TEST(shown.at("data").at("options").at("taskTimeoutSeconds").as_double() == 0.5);
    BOOST_TEST(shown.at("data").at("options").at("retries").as_int64() == 3);
    // The resume compiles the run's plan (without them it would be another plan, refused).
    auto resumed =
        agentctl({"--output", "json", "resume", id, "--db", db, "--retry-failed", "--rerun-uncertain"});
    BOOST_TEST(resumed.exit_code == 4, resumed.err);
    BOOST_TEST(read_file(count) == "x\nx\nx\nx\nx\nx\n", "the resume did not retry as the run did");
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"run", wf, "--timeout", "0"},
                                                {"run", wf, "--timeout", "abc"},
                                                {"run", wf, "--retries", "0"},
                                                {"run", wf, "--retries", "21"},
                                                {"check", wf, "--timeout", "5"}}) {
        auto u = agentctl(bad);
        BOOST_TEST(u.exit_code == 2, u.err);
    }
    BOOST_TEST(agentctl({"plan", wf, "--timeout", "5", "--retries", "2"}).exit_code == 0);
}

// A run's --timeout-seconds is stored with it and bounds the resumed part too: a resume of a
// run that timed out does not run unbounded. The run's duration is then the whole run's: both
// segments.
BOOST_AUTO_TEST_CASE(resume_keeps_the_runs_timeout) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/started";
    std::string wf = one_napping_task(dir, marker, 60);
    auto first = agentctl({"run", wf, "--db", db, "--timeout-seconds", "1"});
    BOOST_TEST(first.exit_code == 130, first.err);
    std::string id = newest_run(db);
    auto duration = [&] {
        json::value v = parse_json(agentctl({"--output", "json", "runs", "show", id, "--db", db}).out);
        return v.at("data").at("durationMs").as_int64();
    };
    // A segment's clock starts just after its run timer: a 1 s segment records a little under
    // 1000 ms (991 under load), so the checks below allow half of it.
    const std::int64_t before = duration();
    BOOST_TEST(before >= 500);
    auto begun = std::chrono::steady_clock::now();
    auto resumed = agentctl({"resume", id, "--db", db, "--rerun-uncertain"});
    auto took = std::chrono::steady_clock::now() - begun;
    BOOST_TEST(resumed.exit_code == 130, resumed.err);
    BOOST_TEST(resumed.err.find("--timeout-seconds") != std::string::npos, resumed.err);
    BOOST_TEST(read_file(marker) == "x\nx\n", "the resume did not run the task again");
    BOOST_TEST(took < 30s, "the resume ran without the run's timeout");
    BOOST_TEST(duration() >= before + 500, "the resumed run's duration is not the whole run's");
}

/// A foreach over `items` (one a line) of `probe sleep 60` tagged `nonce`, then `after`, which
/// needs it.
std::string napping_foreach(const temp_dir& dir, const std::string& nonce, int max_items) {
    return dir.write("wf.yaml",
                     "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: many}\nspec:\n"
                     "  inputs: {items: []}\n"
                     "  policy: {processAllowlist: [probe], approval: never}\n"
                     "  actions:\n"
                     "    nap: {kind: builtin.shell.exec, command: " +
                         probe_bin() + ", args: [sleep, '60', --nonce, " + nonce +
                         "]}\n"
                         "  tasks:\n"
                         "    - {id: each, uses: 'action:nap', foreach: {items: '${{ inputs.items }}', "
                         "maxItems: " +
                         std::to_string(max_items) +
                         "}}\n"
                         "    - {id: after, uses: 'action:nap', needs: [each]}\n");
}

std::string numbered_lines(int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += std::to_string(i) + "\n";
    return out;
}

// Issue 25: a run timeout that left 100 000 tasks unstarted recorded a final row, and sent an
// event, for each of them after the deadline: 1.8 s late at 70 MiB (12.8 s, 197 MiB at a
// million). Each stretch of them is one `unstarted` row now. What this asserts is that
// mechanism, not the time (bench/run-timeout.sh measures it, docs/CRASH_SAFETY.md has the
// figures): no row per unstarted task, a peak RSS close to what the plan itself takes
// (`agentctl check` of the same items), and each task still reported as before.
BOOST_AUTO_TEST_CASE(a_run_timeout_records_100000_unstarted_tasks_in_a_few_rows) {
    temp_dir dir;
    const int n = 100000;
    std::string nonce = make_nonce();
    std::string wf = napping_foreach(dir, nonce, n);
    std::string items = "items=" + dir.write("items.txt", numbered_lines(n));
    std::string db = dir.path() + "/j.db";
    command_options o = without_asan_quarantine();
    auto check = agentctl({"check", wf, "--items", items}, o);
    BOOST_TEST_REQUIRE(check.exit_code == 0, check.err);
    auto r = agentctl({"run", wf, "--items", items, "--jobs", "2", "--timeout-seconds", "1", "--db", db}, o);
    BOOST_TEST_REQUIRE(r.exit_code == 130, r.err);
    BOOST_TEST(processes_with(nonce).empty(), "a task outlived the run");

    raw_db raw(db);
    auto count = [&](const std::string& sql) { return std::stoll(raw.rows(sql).at(0).at(0)); };
    // The tasks running at the deadline (at most 2) and the aggregate: no row per unstarted task.
    BOOST_TEST(count("SELECT count(*) FROM results") <= 3);
    // Within 16 MiB of the plan's own peak; recording a final each cost 57 MiB more (a journal
    // queue up to its 64 MiB high-water mark, SQLite's pages).
    BOOST_TEST_MESSAGE("peak RSS: run " << r.max_rss_kib << " KiB, check " << check.max_rss_kib << " KiB");
    BOOST_TEST(r.max_rss_kib < check.max_rss_kib + 16 * 1024,
               "run " << r.max_rss_kib << " KiB, check " << check.max_rss_kib << " KiB");
    BOOST_TEST(count("SELECT count(*) FROM unstarted") == 2, "the children not started, and `after`");
    BOOST_TEST(count("SELECT sum(end_task - first_task) FROM unstarted") >= n - 2 + 1);

    // Counted, listed one by one, and resumed as tasks that never started.
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    json::value lv = parse_json(list.out);
    const auto& tasks = lv.at("data").at("runs").at(0).at("tasks");
    // n children and `after`; the foreach parent is not a task that runs (not counted).
    BOOST_TEST(tasks.at("recorded").as_int64() == n + 1);
    BOOST_TEST(tasks.at("states").at("cancelled").as_int64() == n + 1, list.out);
    auto unstarted_id = [&] {
        // The summary names the first tasks not started: "N tasks not started: ID, ...".
        auto at = r.err.find(" tasks not started: ");
        BOOST_REQUIRE_MESSAGE(at != std::string::npos, r.err);
        at += 20;
        return r.err.substr(at, r.err.find(',', at) - at);
    }();
    std::string id = newest_run(db);
    auto shown = agentctl({"--output", "json", "runs", "show", id, "--task", unstarted_id, "--db", db});
    BOOST_TEST_REQUIRE(shown.exit_code == 0, shown.err);
    json::value sv = parse_json(shown.out);
    const auto& result = sv.at("data").at("result");
    BOOST_TEST(result.at("state").as_string() == "cancelled", shown.out);
    BOOST_TEST(result.at("attempts").as_int64() == 0);
    BOOST_TEST(result.at("error").at("message").as_string() == "not started: the run was cancelled");
    BOOST_TEST(sv.at("data").at("attempts").as_array().empty());
    auto stream = agentctl({"runs", "show", id, "--task", unstarted_id, "--stdout", "--db", db});
    BOOST_TEST(stream.exit_code == 0, stream.err);
    BOOST_TEST(stream.out.empty());
    // Refused (exit 3) when a task was running at the deadline: it is uncertain.
    auto dry = agentctl({"--output", "json", "resume", id, "--db", db, "--dry-run"});
    BOOST_TEST_REQUIRE((dry.exit_code == 0 || dry.exit_code == 3), dry.err);
    std::size_t never_started = 0, uncertain = 0;
    json::value plan = parse_json(dry.out);
    for (const auto& t : plan.at("data").at("tasks").as_array()) {
        never_started += t.at("reason") == "never started (cancelled)";
        uncertain += t.at("action") == "uncertain";
    }
    BOOST_TEST(uncertain <= 2u, "only the tasks running at the deadline");
    BOOST_TEST(never_started + uncertain == std::size_t(n + 1), dry.out.substr(0, 2000));
}

// The tasks a cancellation left unstarted report as they did when each had a final row: in
// `run --output json` with a journal (read back from its ranges) as without one (held in
// memory), in `runs show` as in `run`, one taskFinished line each in jsonl, matching the
// final document, and in the human `runs show`.
BOOST_AUTO_TEST_CASE(unstarted_tasks_report_as_if_each_had_a_final_of_its_own) {
    temp_dir dir;
    std::string nonce = make_nonce();
    std::string wf = napping_foreach(dir, nonce, 100);
    std::string items = "items=" + dir.write("items.txt", numbered_lines(6));
    std::string db = dir.path() + "/j.db";
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"run", wf, "--items", items, "--jobs", "1", "--timeout-seconds", "0.5"};
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 130, r.err);
        return r;
    };
    // The tasks of a RunOutcome or RunRecord document that never started.
    auto unstarted = [](const std::string& text) {
        json::value v = parse_json(text);
        normalise(v);
        json::object out;
        for (const auto& [id, t] : v.at("data").at("tasks").as_object())
            if (t.at("attempts") == 0) out[id] = t;
        return out;
    };
    auto journaled = run({"--output", "json", "--db", db});
    auto memory = run({"--output", "json", "--no-journal"});
    auto mine = unstarted(journaled.out);
    BOOST_TEST(mine.size() >= 6u, journaled.out);  // 5 or 6 children, `after`, the aggregate
    auto theirs = unstarted(memory.out);
    for (const auto& [id, t] : mine)
        if (theirs.contains(id)) BOOST_TEST(json::serialize(t) == json::serialize(theirs.at(id)), id);
    BOOST_TEST(theirs.size() >= 6u);

    std::string id = newest_run(db);
    auto shown = agentctl({"--output", "json", "runs", "show", id, "--db", db});
    BOOST_TEST(json::serialize(unstarted(shown.out)) == json::serialize(mine));
    auto human = agentctl({"runs", "show", id, "--db", db});
    BOOST_TEST(human.out.find("7 of 7 tasks have a result") != std::string::npos, human.out);
    BOOST_TEST(human.out.find(child_id_in(journaled.out, "each--0005") +
                              "  cancelled  0 ms: not started: the run was cancelled\n") != std::string::npos,
               human.out);

    auto lines = run({"--output", "jsonl", "--db", db});
    std::vector<std::string> rows;
    for (std::size_t at = 0, nl; (nl = lines.out.find('\n', at)) != std::string::npos; at = nl + 1)
        rows.push_back(lines.out.substr(at, nl - at));
    BOOST_REQUIRE(!rows.empty());
    json::value final_doc = parse_json(rows.back());
    std::size_t finished = 0;
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
        json::value e = parse_json(rows[i]);
        if (e.at("event") != "taskFinished") continue;
        ++finished;
        std::string task(e.at("taskId").as_string());
        if (task == "each") continue;  // an aggregate's event has no items (write_event)
        normalise(e);
        json::value t = final_doc.at("data").at("tasks").at(task);
        normalise(t);
        BOOST_TEST(json::serialize(e.at("result")) == json::serialize(t), task);
    }
    BOOST_TEST(finished == 8u, "a taskFinished line for each task, the aggregate's included");
    BOOST_TEST(processes_with(nonce).empty(), "a task outlived its run");
}

BOOST_AUTO_TEST_CASE(a_disk_that_fills_fails_the_run_clearly_and_keeps_what_was_recorded) {
    temp_dir dir;
    tmpfs_mount full(dir.path() + "/small", "size=1m");
    if (!require_mount(full)) return;
    std::string db = dir.path() + "/small/j.db";
    // 40 tasks of 100 KiB of stdout each: 4 MB into a 1 MB file system.
    std::string wf = dir.write(
        "wf.yaml",
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: fill}\nspec:\n"
        "  policy: {processAllowlist: [sh], approval: never}\n"
        "  runtime: {maxConcurrency: 2}\n"
        "  actions:\n"
        "    big: {kind: builtin.shell.exec, command: /bin/sh, stdoutLimitBytes: 200000,"
        " args: [-c, 'head -c 102400 /dev/zero | tr \"\\\\0\" y']}\n"
        "  tasks:\n    - {id: t, uses: 'action:big', foreach: {items: [" +
            [] {
                std::string s;
                for (int i = 0; i < 40; ++i) s += (i ? "," : "") + std::to_string(i);
                return s;
            }() +
            "]}}\n");
    auto r = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST(r.exit_code == 5, r.exit_code << " " << r.err);
    json::value v = parse_json(r.out.empty() ? r.err : r.out);
    std::string message = json::serialize(v);
    BOOST_TEST((message.find("full") != std::string::npos || message.find("No space") != std::string::npos),
               message);
    BOOST_TEST(message.find("journal") != std::string::npos, message);
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    BOOST_TEST(list.exit_code == 0, list.err);
    json::value list_v = parse_json(list.out);
    auto& runs = list_v.at("data").at("runs").as_array();
    BOOST_REQUIRE_EQUAL(runs.size(), 1u);
    std::string id(runs[0].at("runId").as_string());
    auto show = agentctl({"--output", "json", "runs", "show", id, "--db", db});
    BOOST_TEST(show.exit_code == 0, show.err);
    // Whatever a result says was recorded reads back whole.
    json::value shown = parse_json(show.out);
    if (show.exit_code == 0)
        for (const auto& t : shown.at("data").at("tasks").as_object()) {
            if (t.value().at("state").as_string() != "succeeded") continue;
            const json::value* out = t.value().as_object().if_contains("stdout");
            BOOST_TEST((out && out->is_string() && out->as_string().size() == 102400u),
                       t.key() << ": " << json::serialize(t.value()).substr(0, 600));
        }
}

BOOST_AUTO_TEST_CASE(sigkill_at_random_points_of_1000_tasks_then_resume_until_done) {
    temp_dir dir;
    std::string db = dir.path() + "/state/journal.db";
    std::string marker = dir.path() + "/marker";
    const std::string secret = "hunter2-" + make_nonce();
    std::string items;
    for (int i = 0; i < 1000; ++i) items += (i ? "," : "") + std::to_string(i);
    std::string wf = dir.write(
        "wf.yaml",
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: thousand}\nspec:\n"
        "  policy: {processAllowlist: [sh], secretProcessAllowlist: [sh], environmentAllowlist: [TOKEN],"
        " approval: never}\n"
        "  runtime: {maxConcurrency: 64}\n"
        "  actions:\n"
        "    mark:\n"
        "      kind: builtin.shell.exec\n"
        "      command: /bin/sh\n"
        "      args: [-c, 'echo \"$1\" >> \"$2\"; echo \"token=$TOKEN\"; sleep 0.05', sh, 't${{ vars.i }}', "
        "'" +
            marker +
            "']\n"
            "      env: {TOKEN: {env: TOKEN}}\n"
            "  tasks:\n    - {id: t, uses: 'action:mark', foreach: {items: [" +
            items + "], as: i}}\n");
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + dir.path() + "/state", "TOKEN=" + secret};
    o.bound = 120s;
    std::mt19937 rng(std::random_device{}());
    auto lines = [&] {
        std::ifstream in(marker);
        std::size_t n = 0;
        std::string l;
        while (std::getline(in, l)) ++n;
        return n;
    };
    // Killed when the marker holds `at` lines (or more).
    auto killed_at = [&](std::size_t at) {
        command_options k = o;
        k.poll = [&, at](pid_t pid) {
            if (lines() < at) return false;
            ::kill(pid, SIGKILL);
            return true;
        };
        return k;
    };
    auto first = agentctl({"run", wf}, killed_at(std::uniform_int_distribution<std::size_t>(1, 700)(rng)));
    BOOST_TEST_MESSAGE("first run killed after " << lines() << " marker lines");
    BOOST_REQUIRE_MESSAGE(first.signal == SIGKILL, "the run ended before it was killed: " << first.err);
    std::string id = newest_run(db);
    // No file of the journal holds the secret (after a kill: the database, -wal and -shm);
    // the redacted text is there (the scan works).
    auto scan = [&](const char* when, bool output_expected) {
        bool redacted_seen = false;
        std::set<std::string> kinds;
        for (const auto& e : fs::recursive_directory_iterator(dir.path() + "/state")) {
            if (!e.is_regular_file()) continue;
            std::string name = e.path().filename();
            kinds.insert(name.size() > 4 && name.compare(name.size() - 4, 4, "-wal") == 0   ? "wal"
                         : name.size() > 4 && name.compare(name.size() - 4, 4, "-shm") == 0 ? "shm"
                                                                                            : "other");
            std::string bytes = read_file(e.path());
            BOOST_TEST(bytes.find(secret) == std::string::npos, e.path()
                                                                    << " holds the secret (" << when << ")");
            redacted_seen |= bytes.find("token=[REDACTED]") != std::string::npos;
        }
        BOOST_TEST(kinds.count("other") == 1u, when);
        if (output_expected)
            BOOST_TEST(redacted_seen, "the scan found no captured output at all (" << when << ")");
        return kinds;
    };
    auto kinds = scan("after the kill", false);
    BOOST_TEST(kinds.count("wal") == 1u, "no -wal after a kill");
    BOOST_TEST(kinds.count("shm") == 1u, "no -shm after a kill");

    // Without --rerun-uncertain a resume refuses while tasks were in flight at the kill.
    auto refused = agentctl({"resume", id}, o);
    BOOST_TEST((refused.exit_code == 3 || refused.exit_code == 0), refused.err);

    int kills = 1, resumes = 0;
    for (; resumes < 10; ++resumes) {
        std::size_t now = lines();
        bool kill = kills < 5 && now < 950;
        auto r = kill ? agentctl({"resume", id, "--rerun-uncertain"},
                                 killed_at(now + std::uniform_int_distribution<std::size_t>(1, 120)(rng)))
                      : agentctl({"resume", id, "--rerun-uncertain"}, o);
        if (r.signal == SIGKILL) {
            ++kills;
            BOOST_TEST_MESSAGE("resume killed after " << lines() << " marker lines");
            continue;
        }
        BOOST_TEST_MESSAGE("resume ended with " << r.exit_code);
        if (r.exit_code == 0) break;
        BOOST_TEST(r.exit_code == 0, r.err.substr(0, 2000));
    }
    BOOST_TEST(resumes < 10, "never finished");

    // Every task: exactly one succeeded end; marker lines >= 1, and 2 or more only where an
    // earlier attempt was uncertain (no end: killed in flight).
    raw_db raw(db);
    std::map<std::string, int> succeeded, uncertain, attempts;
    for (auto& row : raw.rows("SELECT a.task_id, a.state, a.ended_ms IS NULL FROM attempts a JOIN runs r "
                              "USING (run_seq) WHERE r.run_id = '" +
                              id + "'")) {
        const std::string task = test_support::short_id(row[0]);  // by position: t--0042
        ++attempts[task];
        if (row[1] == "succeeded") ++succeeded[task];
        if (row[2] == "1" || row[1] == "cancelled") ++uncertain[task];
    }
    std::map<std::string, int> marks;
    {
        std::ifstream in(marker);
        std::string l;
        while (std::getline(in, l)) ++marks[l];
    }
    int twice = 0;
    for (int i = 0; i < 1000; ++i) {
        std::string task = "t--" + std::string(4 - std::min<std::size_t>(4, std::to_string(i).size()), '0') +
                           std::to_string(i);
        std::string mark = "t" + std::to_string(i);
        BOOST_TEST(succeeded[task] == 1, task << " has " << succeeded[task] << " succeeded ends");
        BOOST_TEST(marks[mark] >= 1, mark << " never ran");
        if (marks[mark] >= 2) {
            ++twice;
            BOOST_TEST(uncertain[task] >= marks[mark] - 1,
                       task << " ran " << marks[mark] << " times, uncertain " << uncertain[task] << " times");
        }
        BOOST_TEST(marks[mark] <= attempts[task], task);
    }
    BOOST_TEST_MESSAGE(kills << " kills, " << twice << " tasks ran twice");
    auto show = agentctl({"--output", "json", "runs", "show", id}, o);
    BOOST_TEST(show.exit_code == 0);
    BOOST_TEST(parse_json(show.out).at("data").at("state").as_string() == "succeeded");

    scan("at the end", true);
    BOOST_TEST(show.out.find(secret) == std::string::npos);
}

namespace {

/// Runs four trees of 4 processes tagged `nonce` (12 probes) and SIGKILLs agentctl and its
/// watchdog once they are up: what their cgroups hold stays behind for the next sweep.
void leave_trees_behind(const std::string& wf, const std::string& db, const std::string& nonce) {
    command_options o;
    o.bound = 60s;
    bool killed_both = false;
    o.poll = [&](pid_t agentctl) {
        if (processes_with(nonce).size() < 12) return false;
        pid_t watchdog = watchdog_of(agentctl);
        if (watchdog <= 0) return false;
        ::kill(agentctl, SIGSTOP);  // else it stops the run the moment its watchdog dies
        ::kill(watchdog, SIGKILL);
        ::kill(agentctl, SIGKILL);
        killed_both = true;
        return true;
    };
    auto first = agentctl({"run", "--jobs", "4", wf, "--db", db}, o);
    BOOST_TEST_REQUIRE(killed_both, "agentctl's watchdog was not found");
    BOOST_TEST_REQUIRE(wait_for_processes(nonce, 12, 2s), "the trees did not stay behind");
}

std::string four_trees(const std::string& nonce) {
    std::string p = probe_bin();
    std::string script = p + " sleep 300 --nonce " + nonce + " & setsid " + p + " sleep 301 --nonce " + nonce +
                         " & " + p + " sleep 302 --nonce " + nonce + "; wait";
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: trees}\nspec:\n"
           "  policy: {processAllowlist: [sh], approval: never}\n"
           "  actions:\n    trees: {kind: builtin.shell.exec, command: /bin/sh, timeoutSeconds: 3, args: [-c, \"" +
           script +
           "\"]}\n"
           "  tasks:\n    - {id: t, uses: action:trees, foreach: {items: [1, 2, 3, 4]}}\n";
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(runs_gc_removes_and_reports_what_a_dead_run_left, test_support::private_cgroup,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            agentctl_uses_cgroups))) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string nonce = make_nonce();
    leave_trees_behind(dir.write("wf.yaml", four_trees(nonce)), db, nonce);
    std::string id = newest_run(db);
    auto gc = agentctl({"--output", "json", "runs", "gc", "--db", db});
    BOOST_TEST(gc.exit_code == 0, gc.err);
    BOOST_TEST(processes_with(nonce).empty(), "runs gc left the dead run's trees running");
    json::value v = parse_json(gc.out);
    auto& d = v.at("data");
    BOOST_TEST(json::serialize(d.at("interrupted")) == "[\"" + id + "\"]");
    auto& cgroups = d.at("leftovers").at("cgroups").as_array();
    BOOST_TEST(cgroups.size() >= 1u);
    std::uint64_t killed = 0;
    for (const auto& c : cgroups) {
        BOOST_TEST(c.at("removed").as_bool());
        killed += c.at("processesKilled").to_number<std::uint64_t>();
    }
    BOOST_TEST(killed == 16u, "processes killed: " << killed);
    BOOST_TEST(d.at("runsRemoved").as_int64() == 0, "gc without --keep removed a run");
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db});
    BOOST_TEST(parse_json(list.out).at("data").at("runs").at(0).at("state").as_string() == "interrupted");
}

BOOST_FIXTURE_TEST_CASE(resume_removes_what_the_dead_run_left_before_it_runs, test_support::private_cgroup,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            agentctl_uses_cgroups))) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string nonce = make_nonce();
    leave_trees_behind(dir.write("wf.yaml", four_trees(nonce)), db, nonce);
    std::string id = newest_run(db);
    // The tasks time out after 3 s when run again: the resume ends, its own trees gone too.
    auto r = agentctl({"resume", id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST(r.exit_code == 4, r.err);
    BOOST_TEST(r.err.find("removed what a dead run left: cgroup") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("16 processes killed") != std::string::npos, r.err);
    BOOST_TEST(processes_with(nonce).empty());
}

namespace {

// `count` x's on stdout, then `tail` (shell words), from a shell.
std::string xs_then(std::size_t count, const std::string& tail) {
    return "/usr/bin/head -c " + std::to_string(count) + " /dev/zero | /usr/bin/tr \\\\0 x; " + tail;
}

}  // namespace

// The probe of the issue: the 1 MiB-class cap ended inside a 23-byte secret and its first 16
// bytes were stored and printed. Here every cap cuts it, and a timeout and a kill cut its write
// short (docs/SECRETS.md, "What is guaranteed").
BOOST_AUTO_TEST_CASE(a_secret_cut_by_a_cap_a_timeout_or_a_kill_is_redacted_wherever_output_goes) {
    temp_dir dir;
    const std::string secret = ("Zq" + make_nonce() + "0123456789abcdefghijklmn").substr(0, 23);
    BOOST_REQUIRE(secret.size() == 23u);
    const std::string first8 = secret.substr(0, 8);  // any kept part of 8 bytes or more holds this
    // Task (and its action) → the stream cut, the action's settings, what must be stored.
    struct expectation {
        std::string stream;
        std::string command;
        std::string stored;
    };
    const std::string big(131072 - 16, 'x');  // a stream file of the journal (over 64 KiB)
    std::map<std::string, expectation> tasks = {
        // stdout cap inside the secret, 16 of its bytes kept
        {"stdout16",
         {"stdout",
          "stdoutLimitBytes: 131072, args: [-c, '" + xs_then(big.size(), "printf %s \"$TOKEN\"") + "']",
          big + "[REDACTED]"}},
        // stdout cap after its first byte
        {"stdout1",
         {"stdout", "stdoutLimitBytes: 1024, args: [-c, '" + xs_then(1023, "printf %s \"$TOKEN\"") + "']",
          std::string(1023, 'x') + "[REDACTED]"}},
        // stderr cap, 16 kept
        {"stderr16",
         {"stderr",
          "stderrLimitBytes: 1024, args: [-c, 'exec >&2; " + xs_then(1008, "printf %s \"$TOKEN\"") + "']",
          std::string(1008, 'x') + "[REDACTED]"}},
        // the combined cap, 22 kept
        {"combined22",
         {"stdout",
          "combinedOutputLimitBytes: 1024, args: [-c, '" + xs_then(1002, "printf %s \"$TOKEN\"") + "']",
          std::string(1002, 'x') + "[REDACTED]"}},
        // killed after writing the first 16 bytes
        {"killed16",
         {"stdout", "args: [-c, 'printf \"x%s\" \"${TOKEN%???????}\"; kill -KILL $$']", "x[REDACTED]"}},
        // timed out after writing the first 16 bytes
        {"timeout16",
         {"stdout", "timeoutSeconds: 1, args: [-c, 'printf \"x%s\" \"${TOKEN%???????}\"; /bin/sleep 60']",
          "x[REDACTED]"}},
        // a status above 128 (a shell's or an engine's report of a signal) counts as cut
        {"status137",
         {"stdout", "args: [-c, 'printf \"x%s\" \"${TOKEN%???????}\"; exit 137']", "x[REDACTED]"}},
        // a program that failed by itself wrote what it meant to: its last byte, the first of
        // the secret, is not taken for a cut secret
        {"failed1", {"stdout", "args: [-c, 'printf x%.1s \"$TOKEN\"; exit 3']", "x" + secret.substr(0, 1)}},
    };
    std::string wf =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: cut-secrets}\nspec:\n"
        "  policy: {processAllowlist: [sh], secretProcessAllowlist: [sh], environmentAllowlist: [TOKEN],"
        " approval: never}\n"
        "  actions:\n";
    for (const auto& [id, t] : tasks)
        wf += "    " + id + ": {kind: builtin.shell.exec, command: /bin/sh, env: {TOKEN: {env: TOKEN}}, " +
              t.command + "}\n";
    wf += "  tasks:\n";
    for (const auto& [id, t] : tasks) wf += "    - {id: " + id + ", uses: 'action:" + id + "'}\n";
    std::string path = dir.write("wf.yaml", wf);
    std::string state = dir.path() + "/state";
    std::string db = state + "/journal.db";
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state, "TOKEN=" + secret};
    o.bound = std::chrono::seconds(120);

    auto check_result = [&](const json::value& result, const std::string& id, const char* where) {
        const expectation& t = tasks.at(id);
        const json::object& r = result.as_object();
        for (const char* stream : {"stdout", "stderr"}) {
            const json::value* got = r.if_contains(stream);
            BOOST_REQUIRE_MESSAGE(got && got->is_string(), where << ": " << id << " has no " << stream);
            std::string text(got->as_string());
            if (t.stream == stream)
                BOOST_TEST(text == t.stored,
                           where << ": " << id << " " << stream << " ends \""
                                 << text.substr(text.size() - std::min<std::size_t>(text.size(), 40))
                                 << "\"");
            BOOST_TEST(text.find(first8) == std::string::npos, where << ": " << id << " " << stream);
        }
        BOOST_TEST(json::serialize(result).find(first8) == std::string::npos, where << ": " << id);
    };

    // --output json
    auto run = agentctl({"--output", "json", "run", path, "--keep-going"}, o);
    BOOST_TEST(run.exit_code == 4, run.err);
    BOOST_TEST(run.out.find(first8) == std::string::npos);
    BOOST_TEST(run.err.find(first8) == std::string::npos);
    json::value outcome = parse_json(run.out);
    for (const auto& [id, t] : tasks)
        check_result(outcome.at("data").at("tasks").at(id), id, "--output json");

    // --output jsonl: each taskFinished event
    auto lines = agentctl({"--output", "jsonl", "run", path, "--keep-going"}, o);
    BOOST_TEST(lines.exit_code == 4, lines.err);
    BOOST_TEST(lines.out.find(first8) == std::string::npos);
    std::size_t finished = 0;
    std::istringstream in(lines.out);
    for (std::string line; std::getline(in, line);) {
        json::value e = parse_json(line);
        if (e.as_object().if_contains("event") && e.at("event") == "taskFinished") {
            check_result(e.at("result"), std::string(e.at("taskId").as_string()), "--output jsonl");
            ++finished;
        }
    }
    BOOST_TEST(finished == tasks.size());

    // --show-output: each task's stdout, then the summary with the tails of stderr
    auto shown = agentctl({"run", path, "--show-output", "--keep-going"}, o);
    BOOST_TEST(shown.exit_code == 4, shown.err);
    BOOST_TEST(shown.out.find(first8) == std::string::npos);
    BOOST_TEST(shown.err.find(first8) == std::string::npos);
    BOOST_TEST(shown.out.find(std::string(1023, 'x') + "[REDACTED]") != std::string::npos, shown.out.size());
    BOOST_TEST(shown.out.find("x[REDACTED]") != std::string::npos);

    // The journal's files: the database, its -wal, the stream files.
    std::size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(state)) {
        if (!e.is_regular_file()) continue;
        ++files;
        BOOST_TEST(read_file(e.path()).find(first8) == std::string::npos, e.path()
                                                                              << " holds part of the secret");
    }
    BOOST_TEST(files >= 2u);

    // runs show: the result of the last run, and each stream raw.
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db, "--limit", "1"}, o);
    BOOST_REQUIRE_MESSAGE(list.exit_code == 0, list.err);
    std::string id(parse_json(list.out).at("data").at("runs").as_array().at(0).at("runId").as_string());
    auto show = agentctl({"--output", "json", "runs", "show", id, "--db", db}, o);
    BOOST_REQUIRE_MESSAGE(show.exit_code == 0, show.err);
    json::value report = parse_json(show.out);
    for (const auto& [task, t] : tasks)
        check_result(report.at("data").at("tasks").at(task), task, "runs show");
    auto human = agentctl({"runs", "show", id, "--db", db}, o);
    BOOST_TEST(human.out.find(first8) == std::string::npos);
    for (const auto& [task, t] : tasks) {
        auto raw = agentctl({"runs", "show", id, "--db", db, "--task", task, "--" + t.stream}, o);
        BOOST_TEST(raw.exit_code == 0, raw.err);
        BOOST_TEST(
            (raw.out == t.stored),
            "runs show --" << t.stream << " of " << task << " ends \""
                           << raw.out.substr(raw.out.size() - std::min<std::size_t>(raw.out.size(), 40))
                           << "\"");
    }
}

BOOST_AUTO_TEST_SUITE_END()

// A bounded loop (docs/CONTROL_FLOW.md) SIGKILLed in the middle of its second iteration, then
// resumed: the first iteration is taken over, the interrupted one (uncertain: its program was
// killed with agentctl) runs again with --rerun-uncertain, and the loop goes on to its end.
BOOST_AUTO_TEST_CASE(a_loop_killed_mid_iteration_resumes_at_that_iteration) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string started = dir.path() + "/started";
    std::string nonce = make_nonce();
    // Each iteration appends its index; the second one, the first time only, says it started
    // and then waits to be killed.
    std::string wf =
        dir.write("wf.yaml",
                  "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: looping}\nspec:\n"
                  "  policy: {processAllowlist: [sh], approval: never}\n"
                  "  actions:\n"
                  "    step: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo $0 >> " +
                      marker + "; if [ $0 = 1 ] && [ ! -e " + started + " ]; then echo x > " + started +
                      "; exec " + probe_bin() + " sleep 60 --nonce " + nonce +
                      "; fi', '${{ vars.loopIndex }}']}\n"
                      "  tasks:\n"
                      "    - id: poll\n      uses: action:step\n"
                      "      loop: {maxIterations: 4, while: \"${{ vars.loopIndex < 3 }}\"}\n");
    command_options o;
    o.bound = 60s;
    bool killed = false;
    o.poll = [&](pid_t pid) {
        if (!fs::exists(started) || processes_with(nonce).empty()) return false;
        ::kill(pid, SIGKILL);
        killed = true;
        return true;
    };
    auto first = agentctl({"run", wf, "--db", db}, o);
    BOOST_TEST_REQUIRE(killed, "the second iteration never started");
    BOOST_TEST(first.signal == SIGKILL);
    for (auto until = std::chrono::steady_clock::now() + 10s;
         !processes_with(nonce).empty() && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(10ms);  // the watchdog ends the killed run's programs
    BOOST_TEST_REQUIRE(processes_with(nonce).empty());
    BOOST_TEST(read_file(marker) == "0\n1\n");

    std::string id = newest_run(db);
    auto dry = agentctl({"resume", id, "--db", db, "--dry-run"});
    BOOST_TEST(dry.exit_code == 3, dry.err);
    BOOST_TEST(dry.out.find("uncertain   poll--0001-") != std::string::npos, dry.out);
    auto r = agentctl({"--output", "json", "resume", id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(read_file(marker) == "0\n1\n1\n2\n", "an iteration ran twice, or one did not run");
    auto v = parse_json(r.out);
    const auto& d = v.at("data");
    const auto& reused = d.at("resume").at("reused").as_array();
    BOOST_TEST_REQUIRE(reused.size() == 1u, json::serialize(d.at("resume")));
    BOOST_TEST(std::string(reused[0].as_string()).rfind("poll--0000-", 0) == 0u);
    const auto& loop = d.at("tasks").at("poll").at("output");
    BOOST_TEST(loop.at("iterations").as_int64() == 3, json::serialize(loop));
    BOOST_TEST(loop.at("items").at(3).at("state").as_string() == "skipped");
}

// A routed run (docs/CONTROL_FLOW.md, "Routers") SIGKILLed while the selected destination
// runs, then resumed: the decision is taken over from the journal (the router does not decide
// again), the interrupted destination runs again with --rerun-uncertain, the destination not
// taken stays skipped with the route's record and never runs, and the run goes on to its end.
BOOST_AUTO_TEST_CASE(a_routed_run_killed_in_its_destination_resumes_with_the_same_decision) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string started = dir.path() + "/started";
    std::string nonce = make_nonce();
    // Each task appends its name; `work`, the first time only, says it started and then waits
    // to be killed.
    std::string wf =
        dir.write("wf.yaml",
                  "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: routing}\nspec:\n"
                  "  policy: {processAllowlist: [sh], approval: never}\n"
                  "  inputs: {lane: work}\n"
                  "  actions:\n"
                  "    assign: {kind: builtin.assign}\n"
                  "    step: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo $0 >> " +
                      marker + "; if [ $0 = work ] && [ ! -e " + started + " ]; then echo x > " + started +
                      "; exec " + probe_bin() + " sleep 60 --nonce " + nonce +
                      "; fi', '${{ with.name }}']}\n"
                      "  tasks:\n"
                      "    - {id: decide, uses: action:assign, with: {lane: \"${{ inputs.lane }}\"}}\n"
                      "    - id: route\n      uses: router\n      needs: [decide]\n"
                      "      route:\n        select: \"${{ tasks.decide.output.output.lane }}\"\n"
                      "        cases: [{equals: work, tasks: [work]}]\n        default: [other]\n"
                      "    - {id: work, uses: action:step, needs: [route], with: {name: work}}\n"
                      "    - {id: other, uses: action:step, needs: [route], with: {name: other}}\n"
                      "    - {id: after, uses: action:step, needs: [work], with: {name: after}}\n");
    command_options o;
    o.bound = 60s;
    bool killed = false;
    o.poll = [&](pid_t pid) {
        if (!fs::exists(started) || processes_with(nonce).empty()) return false;
        ::kill(pid, SIGKILL);
        killed = true;
        return true;
    };
    auto first = agentctl({"run", wf, "--db", db}, o);
    BOOST_TEST_REQUIRE(killed, "the routed destination never started");
    BOOST_TEST(first.signal == SIGKILL);
    for (auto until = std::chrono::steady_clock::now() + 10s;
         !processes_with(nonce).empty() && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(10ms);  // the watchdog ends the killed run's programs
    BOOST_TEST_REQUIRE(processes_with(nonce).empty());
    BOOST_TEST(read_file(marker) == "work\n");

    std::string id = newest_run(db);
    auto dry = agentctl({"resume", id, "--db", db, "--dry-run"});
    BOOST_TEST(dry.exit_code == 3, dry.err);
    BOOST_TEST(dry.out.find("uncertain   work") != std::string::npos, dry.out);
    auto r = agentctl({"--output", "json", "resume", id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(read_file(marker) == "work\nwork\nafter\n", "a task ran twice, or the one not taken ran");
    auto v = parse_json(r.out);
    const auto& d = v.at("data");
    const auto& reused = d.at("resume").at("reused").as_array();
    BOOST_TEST(json::serialize(reused) == R"(["decide","route"])", json::serialize(d.at("resume")));
    const auto& tasks = d.at("tasks");
    BOOST_TEST(tasks.at("route").at("output") ==
                   json::parse(R"({"selected":"work","matched":true,"destinations":["work"]})"),
               json::serialize(tasks.at("route")));
    BOOST_TEST(tasks.at("other").at("state").as_string() == "skipped");
    BOOST_TEST(tasks.at("other").at("output").at("reason").as_string() == "route not selected");
    BOOST_TEST(tasks.at("after").at("state").as_string() == "succeeded");
}

// A sub-workflow (docs/CONTROL_FLOW.md, "Sub-workflows") SIGKILLed while one of its tasks runs,
// then resumed: the tasks that succeeded (before it, the input boundary, the sub-workflow's
// first task) are taken over and never run again, the interrupted one runs again with
// --rerun-uncertain, and the rest of the sub-workflow, its aggregate and what needs it run.
BOOST_AUTO_TEST_CASE(a_subworkflow_killed_in_one_of_its_tasks_resumes_inside_it) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string marker = dir.path() + "/marker";
    std::string started = dir.path() + "/started";
    std::string nonce = make_nonce();
    // Each task appends its name; `work`, the first time only, says it started and then waits
    // to be killed.
    std::string wf =
        dir.write("wf.yaml",
                  "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: nested}\nspec:\n"
                  "  policy: {processAllowlist: [sh], approval: never}\n"
                  "  actions:\n"
                  "    assign: {kind: builtin.assign}\n"
                  "    step: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo $0 >> " +
                      marker + "; if [ $0 = work ] && [ ! -e " + started + " ]; then echo x > " + started +
                      "; exec " + probe_bin() + " sleep 60 --nonce " + nonce +
                      "; fi', '${{ with.name }}']}\n"
                      "  subworkflows:\n"
                      "    pipeline:\n"
                      "      version: 1.0.0\n"
                      "      inputSchema: {type: object, required: [label]}\n"
                      "      outputSchema: {type: object, required: [result]}\n"
                      "      outputs: {result: \"${{ tasks.last.output.output.label }}\"}\n"
                      "      tasks:\n"
                      "        - {id: first, uses: action:step, with: {name: first}}\n"
                      "        - {id: work, uses: action:step, needs: [first], with: {name: work}}\n"
                      "        - {id: last, uses: action:assign, needs: [work], with: {label: \"${{ "
                      "inputs.label }}\"}}\n"
                      "  tasks:\n"
                      "    - {id: before, uses: action:step, with: {name: before}}\n"
                      "    - {id: call, uses: workflow:pipeline, needs: [before], with: {label: done}}\n"
                      "    - {id: after, uses: action:step, needs: [call], with: {name: \"${{ "
                      "tasks.call.output.result }}\"}}\n");
    command_options o;
    o.bound = 60s;
    bool killed = false;
    o.poll = [&](pid_t pid) {
        if (!fs::exists(started) || processes_with(nonce).empty()) return false;
        ::kill(pid, SIGKILL);
        killed = true;
        return true;
    };
    auto first = agentctl({"run", wf, "--db", db}, o);
    BOOST_TEST_REQUIRE(killed, "the sub-workflow's task never started");
    BOOST_TEST(first.signal == SIGKILL);
    for (auto until = std::chrono::steady_clock::now() + 10s;
         !processes_with(nonce).empty() && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(10ms);  // the watchdog ends the killed run's programs
    BOOST_TEST_REQUIRE(processes_with(nonce).empty());
    BOOST_TEST(read_file(marker) == "before\nfirst\nwork\n");

    std::string id = newest_run(db);
    auto dry = agentctl({"resume", id, "--db", db, "--dry-run"});
    BOOST_TEST(dry.exit_code == 3, dry.err);
    BOOST_TEST(dry.out.find("uncertain   call--work") != std::string::npos, dry.out);
    auto r = agentctl({"--output", "json", "resume", id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(read_file(marker) == "before\nfirst\nwork\nwork\ndone\n",
               "a task ran twice, or one did not run");
    auto v = parse_json(r.out);
    const auto& d = v.at("data");
    const auto& reused = d.at("resume").at("reused").as_array();
    BOOST_TEST(json::serialize(reused) == R"(["before","call--inputs-b5737603","call--first"])",
               json::serialize(d.at("resume")));
    const auto& tasks = d.at("tasks");
    BOOST_TEST(tasks.at("call").at("output") == json::parse(R"({"result":"done"})"),
               json::serialize(tasks.at("call")));
    BOOST_TEST(tasks.at("call--last").at("state").as_string() == "succeeded");
    BOOST_TEST(tasks.at("after").at("state").as_string() == "succeeded");

    // `runs show` names every task of the sub-workflow by its namespaced id.
    auto shown = agentctl({"--output", "json", "runs", "show", id, "--db", db});
    BOOST_TEST(shown.exit_code == 0, shown.err);
    for (std::string_view task : {"call--inputs-b5737603", "call--first", "call--work", "call--last", "call"})
        BOOST_TEST(shown.out.find("\"" + std::string(task) + "\"") != std::string::npos, task);
}
