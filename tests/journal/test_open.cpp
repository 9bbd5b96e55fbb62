// Opening journals: create, reopen, and every typed error, each naming the file.
#include "harness.hpp"

#include "../support/hot_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

using namespace agentctl;
using namespace journal_test;

namespace {

// A journal with one recorded and ended run, closed cleanly.
void make_journal(const std::string& path, const std::string& run_id = "run-1") {
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run(run_id, 1));
    env.writer->record_intent(make_intent(0));
    env.writer->record_end(make_end(0, 1, make_result(task_state::succeeded, "out")));
    env.writer->record_final(make_final(0, make_result(task_state::succeeded, "out"), 1));
    env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 5, std::nullopt});
    BOOST_TEST_REQUIRE(!env.close().has_value());
}

// A journal of 500 ends with 500-byte streams: enough pages to damage, closed cleanly.
void make_journal_of_500_ends(const std::string& path) {
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1", 500));
    for (std::uint32_t i = 0; i < 500; ++i) {
        env.writer->record_intent(make_intent(i));
        env.writer->record_end(make_end(i, 1, make_result(task_state::succeeded, pattern(i, 1, 500))));
    }
    BOOST_TEST_REQUIRE(!env.close().has_value());
}

// Scribbles over b-tree pages in the middle (page headers included), keeping the size.
void scribble_over_pages(const std::string& path) {
    std::string bytes = read_file(path);
    BOOST_TEST_REQUIRE(bytes.size() > 40'000u);
    for (std::size_t p = 4; p < bytes.size() / 4096; p += 2)
        for (std::size_t i = 0; i < 64; ++i) bytes[p * 4096 + i] = static_cast<char>(0xa5 ^ i);
    write_file(path, bytes);
}

void make_hot_rollback_journal(const std::string& path) {
    std::string why;
    BOOST_TEST_REQUIRE(test_support::make_hot_rollback_journal(path, why), why);
}

void expect_error(const std::string& path, journal_access access, journal_errc code) {
    auto e = open_error(path, access);
    BOOST_TEST(e.code == code, e.message);
    BOOST_TEST(e.message.find(path) != std::string::npos, "the message names the file: " << e.message);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(opening)

BOOST_AUTO_TEST_CASE(create_open_reopen) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    BOOST_TEST(std::filesystem::exists(path));
    {
        journal j = open_or_fail(path, journal_access::read);
        auto runs = j.list_runs(10);
        BOOST_TEST_REQUIRE(runs.has_value());
        BOOST_TEST_REQUIRE(runs->size() == 1u);
        BOOST_TEST((*runs)[0].run_id == "run-1");
        BOOST_TEST((*runs)[0].state == journal_run_state::succeeded);
    }
    // Again for writing: a second run goes in beside the first.
    make_journal(path, "run-2");
    journal j = open_or_fail(path, journal_access::read);
    BOOST_TEST(j.list_runs(10)->size() == 2u);
    BOOST_TEST(count_rows(path, "meta", "key = 'application' AND value = 'agentctl'") == 1);
}

BOOST_AUTO_TEST_CASE(missing) {
    temp_dir tmp;
    expect_error(tmp.file("none.db"), journal_access::read, journal_errc::missing);
    expect_error(tmp.file("no/such/folder/j.db"), journal_access::write, journal_errc::missing);
    BOOST_TEST(!std::filesystem::exists(tmp.file("none.db")), "a reader never creates the file");
}

// agentctl creates a journal whole under another name (docs/JOURNAL.md, "Creation"), so an
// empty file, or an empty SQLite database, at a journal's path is never one of its own: it is
// refused, never taken for a new journal (which would silently drop the history it held).
BOOST_AUTO_TEST_CASE(an_empty_file_or_database_is_refused_never_made_a_new_journal) {
    temp_dir tmp;
    std::string path = tmp.file("empty.db");
    write_file(path, "");
    expect_error(path, journal_access::read, journal_errc::corrupt);
    expect_error(path, journal_access::write, journal_errc::corrupt);
    BOOST_TEST(open_error(path, journal_access::read).message.find("empty (0 bytes)") != std::string::npos);
    BOOST_TEST(read_file(path).empty(), "the file is untouched");

    std::string database = tmp.file("database.db");
    BOOST_TEST_REQUIRE(exec_sql(database, "PRAGMA journal_mode=WAL;"));  // a header, no table
    BOOST_TEST_REQUIRE(read_file(database).size() > 0u);
    expect_error(database, journal_access::read, journal_errc::foreign);
    expect_error(database, journal_access::write, journal_errc::foreign);
    BOOST_TEST(count_rows(database, "sqlite_schema") == 0, "nothing was created in it");
}

// Creation leaves nothing beside the journal but its own files; a write open removes what
// creations that were killed left (their process is gone: also after the journal got its
// name), and leaves a live creator's files alone; a read open removes nothing.
BOOST_AUTO_TEST_CASE(creation_leaves_nothing_and_writers_remove_what_dead_creations_left) {
    temp_dir tmp;
    std::string path = tmp.file("j.db");
    // A process that has exited: its pid with any start time is dead (or another process).
    pid_t dead = ::fork();
    if (dead == 0) ::_exit(0);
    BOOST_TEST_REQUIRE(dead > 0);
    int status = 0;
    ::waitpid(dead, &status, 0);
    std::string left = "j.db-new-" + std::to_string(dead) + "-1-0";
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) write_file(tmp.file(left + suffix), "x");
    std::string live = "j.db-new-" + std::to_string(::getpid()) + "-" +
                       std::to_string(this_process_owner().start_time) + "-99";
    write_file(tmp.file(live), "x");
    std::string other = "k.db-new-" + std::to_string(dead) + "-1-0";  // another journal's
    write_file(tmp.file(other), "x");

    make_journal(path);
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path())) names.insert(e.path().filename());
    auto listing = [&] {
        std::string all;
        for (const auto& n : names) all += " " + n;
        return all;
    };
    BOOST_TEST((names == std::set<std::string>{"j.db", "j.db-seal", live, other}), listing());

    // Killed after the journal got its name, before the temporary name was removed.
    BOOST_TEST_REQUIRE(::link(path.c_str(), tmp.file(left).c_str()) == 0);
    open_or_fail(path, journal_access::read);
    BOOST_TEST(std::filesystem::exists(tmp.file(left)), "a reader removed a file");
    open_or_fail(path, journal_access::write);
    BOOST_TEST(!std::filesystem::exists(tmp.file(left)));
    BOOST_TEST(open_or_fail(path, journal_access::read).list_runs(10)->size() == 1u);
}

// Many creators at once: each opens the one journal that won, none fails, nothing is left over.
BOOST_AUTO_TEST_CASE(concurrent_creators_all_open_the_one_journal) {
    temp_dir tmp;
    std::string path = tmp.file("j.db");
    constexpr int creators = 8;
    std::vector<std::string> errors(creators);
    std::vector<std::thread> threads;
    for (int i = 0; i < creators; ++i)
        threads.emplace_back([&, i] {
            auto j = journal::open(path, journal_access::write);
            if (!j) errors[static_cast<std::size_t>(i)] = j.error().message;
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) BOOST_TEST(e.empty(), e);
    for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
        BOOST_TEST(e.path().filename().string().find("-new-") == std::string::npos, e.path());
    make_journal(path);
    BOOST_TEST(open_or_fail(path, journal_access::read).list_runs(10)->size() == 1u);
}

// A rollback journal left by a writer that died ("hot"; agentctl's own journals use WAL and
// never leave one, another program may): SQLite rolls it back at the next read, which a
// read-only connection cannot do ("attempt to write a readonly database"). Every open rolls
// it back first, so readers see the last committed state.
BOOST_AUTO_TEST_CASE(a_hot_rollback_journal_is_rolled_back_by_readers_too) {
    temp_dir tmp;
    std::string path = tmp.file("j.db");
    make_journal(path);
    make_hot_rollback_journal(path);
    BOOST_TEST_REQUIRE(std::filesystem::exists(path + "-journal"));
    journal j = open_or_fail(path, journal_access::read);
    auto runs = j.list_runs(10);
    BOOST_TEST_REQUIRE(runs.has_value(), why(runs));
    BOOST_TEST_REQUIRE(runs->size() == 1u);
    BOOST_TEST((*runs)[0].workflow_name == "wf", "the torn write is rolled back");
    BOOST_TEST(!std::filesystem::exists(path + "-journal"));
}

// Tests run as root, for whom mode 000 hides nothing; a directory where the file should be
// is unreadable for everyone.
BOOST_AUTO_TEST_CASE(unreadable) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    std::filesystem::create_directory(path);
    expect_error(path, journal_access::read, journal_errc::unreadable);
    expect_error(path, journal_access::write, journal_errc::unreadable);
    if (::geteuid() != 0) {
        std::string file = tmp.file("private.db");
        make_journal(file);
        ::chmod(file.c_str(), 0);
        expect_error(file, journal_access::read, journal_errc::unreadable);
    }
}

BOOST_AUTO_TEST_CASE(read_only_file_system, *boost::unit_test::precondition(needs_root())) {
    tmpfs_mount fs(8 << 20);
    BOOST_TEST_REQUIRE(fs.ok(), fs.error());
    std::string path = fs.file("journal.db");
    make_journal(path);
    BOOST_TEST_REQUIRE(fs.remount_read_only(), fs.error());
    expect_error(path, journal_access::write, journal_errc::read_only);
    expect_error(fs.file("new.db"), journal_access::write, journal_errc::read_only);
    // Reading still works there.
    journal j = open_or_fail(path, journal_access::read);
    auto runs = j.list_runs(10);
    BOOST_TEST_REQUIRE(runs.has_value(), why(runs));
    BOOST_TEST(runs->size() == 1u);
    std::string out;
    BOOST_TEST(!j.read_stream("run-1", task_id(0), journal_stream::stdout_stream,
                              [&](std::string_view b) { out.append(b); }));
    BOOST_TEST(out == "out");
}

BOOST_AUTO_TEST_CASE(foreign_sqlite_database) {
    temp_dir tmp;
    std::string path = tmp.file("other.db");
    BOOST_TEST_REQUIRE(exec_sql(path, "CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES('x');"));
    expect_error(path, journal_access::read, journal_errc::foreign);
    expect_error(path, journal_access::write, journal_errc::foreign);
    BOOST_TEST(count_rows(path, "contacts") == 1, "the other application's data is untouched");
    BOOST_TEST(!std::filesystem::exists(path + "-wal"));

    std::string tagged = tmp.file("tagged.db");
    BOOST_TEST_REQUIRE(exec_sql(tagged, "PRAGMA application_id = 1234; CREATE TABLE t(x);"));
    expect_error(tagged, journal_access::write, journal_errc::foreign);
}

BOOST_AUTO_TEST_CASE(not_sqlite_at_all) {
    temp_dir tmp;
    std::string path = tmp.file("notes.txt");
    write_file(path, std::string(8192, 'x') + "these are somebody's notes, not a database\n");
    expect_error(path, journal_access::read, journal_errc::foreign);
    expect_error(path, journal_access::write, journal_errc::foreign);
    BOOST_TEST(read_file(path).size() == 8192u + 43u, "the file is untouched");
}

BOOST_AUTO_TEST_CASE(truncated) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    // Enough rows that the file has many pages.
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-big", 2000));
        for (std::uint32_t i = 0; i < 2000; ++i) {
            env.writer->record_intent(make_intent(i));
            env.writer->record_end(make_end(i, 1, make_result(task_state::succeeded, pattern(i, 1, 200))));
        }
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST_REQUIRE(!std::filesystem::exists(path + "-wal"), "the writer checkpointed on close");
    auto size = std::filesystem::file_size(path);
    BOOST_TEST_REQUIRE(size > 100'000u);
    std::filesystem::resize_file(path, size / 2);
    expect_error(path, journal_access::read, journal_errc::corrupt);
    expect_error(path, journal_access::write, journal_errc::corrupt);
}

BOOST_AUTO_TEST_CASE(damaged_header) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    std::string bytes = read_file(path);
    for (std::size_t i = 16; i < 100; ++i) bytes[i] = '\xff';  // the header after the magic
    write_file(path, bytes);
    expect_error(path, journal_access::read, journal_errc::corrupt);
}

BOOST_AUTO_TEST_CASE(damaged_pages_fail_the_quick_check) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal_of_500_ends(path);
    scribble_over_pages(path);
    expect_error(path, journal_access::read, journal_errc::corrupt);
}

BOOST_AUTO_TEST_CASE(newer_schema) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    const std::string next = std::to_string(journal_schema_version + 1);
    BOOST_TEST_REQUIRE(exec_sql(path, "PRAGMA user_version = " + next + ";"));
    expect_error(path, journal_access::read, journal_errc::newer_schema);
    expect_error(path, journal_access::write, journal_errc::newer_schema);
    auto e = open_error(path, journal_access::read);
    BOOST_TEST(e.message.find("schema version " + next) != std::string::npos, e.message);
    BOOST_TEST(e.message.find("knows up to " + std::to_string(journal_schema_version)) != std::string::npos,
               e.message);
}

// A journal of schema version 1: the tables but version 4's, every final result with its own
// JSON (a version 1 writer never stored ''), each run's source and inputs in `runs`. Made here
// by recording with this writer, then putting each end's JSON back into the finals stored
// once, moving the documents back, dropping version 4's tables, taking the stored counts away
// (as a run that died has none) and setting user_version to 1.
BOOST_AUTO_TEST_CASE(a_version_1_journal_is_read_then_migrated) {
    static_assert(journal_schema_version == 4, "version 4 is what this test migrates to");
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    task_result ran = make_result(task_state::succeeded, "out\n", "err\n");
    task_result skipped;
    skipped.state = task_state::skipped;
    // A skipped task says why: a final without an attempt or an error is a foreach's parent,
    // which the counts leave out (docs/JOURNAL.md).
    skipped.error = task_error{error_code::condition_false, "when was false"};
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 2));
        env.writer->record_intent(make_intent(0));
        env.writer->record_end_and_final(make_end(0, 1, ran), make_final(0, ran, 1));
        env.writer->record_final(make_final(1, skipped, std::nullopt));
        env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 5, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST_REQUIRE(count_rows(path, "results", "result_json = ''") == 1);
    BOOST_TEST_REQUIRE(
        exec_sql(path,
                 "UPDATE results SET result_json = (SELECT a.result_json FROM attempts a "
                 "WHERE a.run_seq = results.run_seq AND a.task_index = results.task_index "
                 "AND a.attempt = results.streams_attempt) WHERE result_json = ''; "
                 "UPDATE runs SET workflow_source = (SELECT d.workflow_source FROM run_documents d "
                 "WHERE d.run_seq = runs.run_seq), inputs_json = (SELECT d.inputs_json FROM "
                 "run_documents d WHERE d.run_seq = runs.run_seq); "
                 "DROP TABLE unstarted; DROP TABLE run_documents; UPDATE runs SET counts_json = NULL; "
                 "PRAGMA user_version = 1;"));
    BOOST_TEST_REQUIRE(count_rows(path, "results", "result_json = '' OR result_json IS NULL") == 0);
    BOOST_TEST_REQUIRE(count_rows(path, "pragma_user_version", "user_version = 1") == 1);

    auto read_back = [&](journal& j, const char* when) {
        BOOST_TEST(!j.verify().has_value(), when);
        std::vector<journal_task_result> results;
        auto e = j.for_each_result("run-1", true, [&](journal_task_result& r) {
            results.push_back(r);
            return true;
        });
        BOOST_TEST_REQUIRE(!e.has_value(), when << ": " << (e ? e->message : ""));
        BOOST_TEST_REQUIRE(results.size() == 2u, when);
        BOOST_TEST(results[0].result.state == task_state::succeeded, when);
        BOOST_TEST(stdout_of(results[0].result) == "out\n", when);
        BOOST_TEST(stderr_of(results[0].result) == "err\n", when);
        BOOST_TEST(results[0].result.output == ran.output, when);
        BOOST_TEST(results[1].result.state == task_state::skipped, when);
        auto one = j.load_result_at("run-1", 0, false);
        BOOST_TEST_REQUIRE(one.has_value(), when << ": " << why(one));
        BOOST_TEST_REQUIRE(one->has_value(), when);
        BOOST_TEST((*one)->result.duration_ms == ran.duration_ms, when);
        auto listed = j.list_runs(5);  // counted from the rows: run-1's counts are not stored
        BOOST_TEST_REQUIRE(listed.has_value(), when << ": " << why(listed));
        BOOST_TEST(listed->back().recorded == 2u, when);
        auto run = j.load_run("run-1");
        BOOST_TEST_REQUIRE(run.has_value(), when << ": " << why(run));
        BOOST_TEST(run->inputs_json == R"({"n":3})", when);
        BOOST_TEST(run->workflow_source == make_run("run-1").workflow_source, when);
    };
    {
        // Version 1 rows read the same under version 4: a reader needs no migration.
        journal j = open_or_fail(path, journal_access::read);
        read_back(j, "read as version 1");
    }
    BOOST_TEST(count_rows(path, "pragma_user_version", "user_version = 1") == 1, "a reader writes nothing");
    {
        journal j = open_or_fail(path, journal_access::write);
        read_back(j, "migrated");
    }
    BOOST_TEST(count_rows(path, "pragma_user_version", "user_version = 4") == 1);
    BOOST_TEST(count_rows(path, "results", "result_json = ''") == 0, "the migration changes no row");
    BOOST_TEST(count_rows(path, "unstarted") == 0, "the migration adds the tables of version 4");
    BOOST_TEST(count_rows(path, "run_documents") == 0, "and moves no run's documents");
    {
        // A run recorded after the migration stores its finals once, beside the old rows.
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-2", 1));
        env.writer->record_intent(make_intent(0));
        env.writer->record_end_and_final(make_end(0, 1, ran), make_final(0, ran, 1));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST(count_rows(path, "results", "result_json = ''") == 1);
    journal j = open_or_fail(path, journal_access::read);
    read_back(j, "after a version 4 run");
    auto second = j.load_result("run-2", task_id(0), true);
    BOOST_TEST_REQUIRE(second.has_value(), why(second));
    BOOST_TEST_REQUIRE(second->has_value());
    BOOST_TEST(stdout_of((*second)->result) == "out\n");
}

BOOST_AUTO_TEST_CASE(codes_have_stable_names) {
    BOOST_TEST(to_string(journal_errc::missing) == "missing");
    BOOST_TEST(to_string(journal_errc::read_only) == "read_only");
    BOOST_TEST(to_string(journal_errc::newer_schema) == "newer_schema");
    BOOST_TEST(to_string(journal_errc::disk_full) == "disk_full");
    BOOST_TEST(to_string(journal_errc::run_live) == "run_live");
}

BOOST_AUTO_TEST_SUITE_END()

// The quick_check runs when the file may have changed since a check, not at every open
// (docs/JOURNAL.md, "The integrity check").
BOOST_AUTO_TEST_SUITE(integrity_check)

namespace {
bool checked_on_open(const std::string& path, journal_access access, const journal_open_options& o = {}) {
    journal j = open_or_fail(path, access, o);
    return j.quick_checked();
}
}  // namespace

BOOST_AUTO_TEST_CASE(an_unchanged_journal_is_not_checked_again) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    BOOST_TEST_REQUIRE(std::filesystem::exists(path + "-seal"), "a clean close seals the file");
    BOOST_TEST(!checked_on_open(path, journal_access::write));
    BOOST_TEST(!checked_on_open(path, journal_access::read));
    // Recording another run keeps the seal: the file changed only through this writer.
    make_journal(path, "run-2");
    BOOST_TEST(!checked_on_open(path, journal_access::write));
    journal_open_options every_open;
    every_open.quick_check_interval = std::chrono::milliseconds(0);
    BOOST_TEST(checked_on_open(path, journal_access::write, every_open));
    journal_open_options off;
    off.quick_check = false;
    BOOST_TEST(!checked_on_open(path, journal_access::read, off));
}

BOOST_AUTO_TEST_CASE(a_change_behind_its_back_is_checked_even_with_its_mtime_put_back) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal_of_500_ends(path);
    BOOST_TEST_REQUIRE(!checked_on_open(path, journal_access::read), "sealed");
    struct stat before {};
    BOOST_TEST_REQUIRE(::stat(path.c_str(), &before) == 0);
    // The same damage as damaged_pages_fail_the_quick_check, at once after the seal, with the
    // size kept and the mtime set back: only the ctime tells, and it cannot be set back.
    scribble_over_pages(path);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    BOOST_TEST_REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    expect_error(path, journal_access::read, journal_errc::corrupt);
    expect_error(path, journal_access::write, journal_errc::corrupt);
    BOOST_TEST(!std::filesystem::exists(path + "-seal"), "the open that found the damage removed the seal");

    // A change that does no harm is checked once, and sealed again.
    std::string other = tmp.file("other.db");
    make_journal(other);
    BOOST_TEST_REQUIRE(::chmod(other.c_str(), 0640) == 0);
    BOOST_TEST(checked_on_open(other, journal_access::write));
    BOOST_TEST(!checked_on_open(other, journal_access::write));
}

BOOST_AUTO_TEST_CASE(a_wal_left_over_an_old_or_foreign_seal_means_a_check) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    make_journal(path);
    {
        // Another writer is at work (or died at work): its WAL holds what the file lacks.
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-2", 1));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        BOOST_TEST_REQUIRE(std::filesystem::file_size(path + "-wal") > 0u);
        BOOST_TEST(checked_on_open(path, journal_access::read));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST_REQUIRE(!checked_on_open(path, journal_access::write));

    std::string seal = read_file(path + "-seal");
    auto checked = seal.rfind(" checked=");
    BOOST_TEST_REQUIRE(checked != std::string::npos, seal);
    // A check older than the interval (here, 1970).
    write_file(path + "-seal", seal.substr(0, checked) + " checked=0\n");
    BOOST_TEST(checked_on_open(path, journal_access::read));
    // A torn seal.
    write_file(path + "-seal", seal.substr(0, seal.size() - 1));
    BOOST_TEST(checked_on_open(path, journal_access::read));
    // Another file's seal: a copy has another inode and ctime.
    write_file(path + "-seal", seal);
    BOOST_TEST_REQUIRE(!checked_on_open(path, journal_access::read));
    std::string copy = tmp.file("copy.db");
    std::filesystem::copy_file(path, copy);
    write_file(copy + "-seal", seal);
    BOOST_TEST(checked_on_open(copy, journal_access::read));
}

BOOST_AUTO_TEST_SUITE_END()
