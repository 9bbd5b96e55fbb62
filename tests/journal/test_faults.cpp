// Faults: a disk that fills, agentctl killed while it writes, and secrets that must never
// reach any column or file.
#include "harness.hpp"

#include <agentctl/process.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>

using namespace agentctl;
using namespace journal_test;

namespace {

// Fills a small tmpfs with ends whose streams are `stream_bytes` long, until a sync fails.
// Returns the error and how many ends were surely committed before it (the failing sync's
// records may have been split over commits, some of which succeeded).
std::pair<std::optional<journal_error>, std::uint32_t> fill_until_full(const std::string& path,
                                                                       std::size_t stream_bytes) {
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-full", 100000));
    std::optional<journal_error> e = env.sync();
    BOOST_TEST_REQUIRE(!e.has_value(), e->message);
    std::uint32_t committed = 0;
    for (std::uint32_t i = 0; i < 100000; i += 4) {
        for (std::uint32_t k = i; k < i + 4; ++k) {
            auto r = make_result(task_state::succeeded, pattern(k, 1, stream_bytes));
            env.writer->record_intent(make_intent(k));
            env.writer->record_end(make_end(k, 1, r));
            env.writer->record_final(make_final(k, r, 1));
        }
        if ((e = env.sync())) break;
        committed = i + 4;
    }
    BOOST_TEST_REQUIRE(e.has_value(), "the disk never filled");
    BOOST_TEST_MESSAGE("after " << committed << " ends: " << to_string(e->code) << ": " << e->message);
    // Sticky: a later sync reports the same.
    env.writer->record_intent(make_intent(999999));
    auto again = env.sync();
    BOOST_TEST_REQUIRE(again.has_value());
    BOOST_TEST(again->code == e->code);
    return {e, committed};
}

// What was committed before the disk filled reads back whole, and nothing else is there.
void check_committed_ends(const std::string& path, std::uint32_t committed, std::size_t stream_bytes) {
    journal j = open_or_fail(path, journal_access::read);
    std::uint32_t ends = 0, whole = 0;
    auto e = j.for_each_attempt("run-full", [&](journal_attempt& a) {
        if (!a.end) return true;
        ++ends;
        whole += a.stdout_bytes == stream_bytes;
        return true;
    });
    BOOST_TEST(!e.has_value());
    BOOST_TEST(ends >= committed, "every end whose sync succeeded is there");
    BOOST_TEST(ends <= committed + 4, "and at most those of the failing sync");
    BOOST_TEST(whole == ends);
    BOOST_TEST(count_rows(path, "attempts", "ended_ms IS NOT NULL") == ends);
    BOOST_TEST(!j.verify().has_value(), "every stream has its length and checksum");
    // And the bytes of every stream of a final result.
    std::uint32_t finals = 0, right = 0;
    e = j.for_each_result("run-full", true, [&](journal_task_result& r) {
        ++finals;
        right += stdout_of(r.result) == pattern(r.task_index, 1, stream_bytes);
        return true;
    });
    BOOST_TEST(!e.has_value());
    BOOST_TEST(finals + 4 >= ends);
    BOOST_TEST(right == finals);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(faults)

BOOST_AUTO_TEST_CASE(disk_full_in_stream_files, *boost::unit_test::precondition(needs_root())) {
    tmpfs_mount fs(4 << 20);
    BOOST_TEST_REQUIRE(fs.ok(), fs.error());
    std::string path = fs.file("journal.db");
    auto [error, committed] = fill_until_full(path, 256 * 1024);
    BOOST_TEST(error->code == journal_errc::disk_full, error->message);
    BOOST_TEST(error->message.find(path) != std::string::npos, error->message);
    BOOST_TEST(error->message.find("full") != std::string::npos, error->message);
    BOOST_TEST(committed > 0u);
    check_committed_ends(path, committed, 256 * 1024);
}

BOOST_AUTO_TEST_CASE(disk_full_in_the_database, *boost::unit_test::precondition(needs_root())) {
    tmpfs_mount fs(3 << 20);
    BOOST_TEST_REQUIRE(fs.ok(), fs.error());
    std::string path = fs.file("journal.db");
    auto [error, committed] = fill_until_full(path, 8 * 1024);  // inline: SQLite itself hits ENOSPC
    BOOST_TEST(error->code == journal_errc::disk_full, error->message);
    BOOST_TEST(error->message.find(path) != std::string::npos, error->message);
    BOOST_TEST(committed > 0u);
    BOOST_TEST(!std::filesystem::exists(path + "-seal"), "a writer that failed leaves no seal");
    BOOST_TEST(open_or_fail(path, journal_access::read).quick_checked(), "so the next open checks");
    check_committed_ends(path, committed, 8 * 1024);
}

// A child records ends in a loop and is SIGKILLed at a random moment, several times over the
// same journal. Every end that is there must be whole: its stream has the recorded length,
// its checksum, and exactly the bytes that were written.
BOOST_AUTO_TEST_CASE(sigkill_never_tears_a_record) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    std::mt19937 rng(std::random_device{}());
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    for (int round = 0; round < 6; ++round) {
        std::string marker = tmp.file("marker-" + std::to_string(round));
        std::string run_id = "run-" + std::to_string(round);
        std::vector<std::string> args = {self, "--journal-child", "writer", path, marker, run_id};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_t pid = 0;
        BOOST_TEST_REQUIRE(::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
        bool started = wait_for_file(marker, 30s);
        // The marker says commits are flowing; the kill lands at a random point after it.
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200000));
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        BOOST_TEST_REQUIRE(started, "the child never committed (round " << round << ")");
        BOOST_TEST(WIFSIGNALED(status));

        journal j = open_or_fail(path, journal_access::write);  // as the next run would
        BOOST_TEST_REQUIRE(!j.verify().has_value());
        std::uint32_t ends = 0, bad = 0;
        auto e = j.for_each_result(run_id, true, [&](journal_task_result& r) {
            ++ends;
            std::size_t n = r.stdout_bytes;
            if (stdout_of(r.result) != pattern(r.task_index, 1, n) || n != (r.task_index * 7919u) % 300000u)
                ++bad;
            return true;
        });
        BOOST_TEST(!e.has_value());
        BOOST_TEST(ends >= 8u, "round " << round << ": " << ends << " results");
        BOOST_TEST(bad == 0u);
        // An intent may be there without its end (killed in between); an end is whole (all
        // of its columns or none), and a result never names an attempt that has not ended.
        BOOST_TEST(
            count_rows(
                path, "attempts",
                "(ended_ms IS NULL) != (state IS NULL) OR (ended_ms IS NULL) != (result_json IS NULL) OR "
                "(ended_ms IS NOT NULL AND stdout_length IS NULL)") == 0);
        BOOST_TEST(count_rows(path, "results r",
                              "NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_seq = r.run_seq AND "
                              "a.task_index = r.task_index AND a.attempt = r.streams_attempt AND "
                              "a.ended_ms IS NOT NULL)") == 0);
        BOOST_TEST_MESSAGE("round " << round << ": " << ends << " whole results after SIGKILL");
    }
}

BOOST_AUTO_TEST_CASE(scanner_finds_what_was_written_and_secrets_are_nowhere) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    const std::string secret = "s3cr3t-VALUE-9f8e7d6c";  // what the task printed
    const std::string marker = "MARKER-visible-4711";
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 3));
        auto intent = make_intent(0);
        intent.env_names = {"API_TOKEN"};  // a name, never its value
        env.writer->record_intent(intent);
        // The engine redacts captured output before it records it.
        std::string out = "token is " + secret + "; " + marker + "\n";
        std::string big = pattern(1, 1, 200 * 1024) + " " + secret + " " + marker + "\n";
        redact(out, {secret});
        redact(big, {secret});
        auto small = make_result(task_state::succeeded, out);
        env.writer->record_end(make_end(0, 1, small));
        env.writer->record_final(make_final(0, small, 1));
        auto large = make_result(task_state::succeeded, big, "", false);
        env.writer->record_intent(make_intent(1));
        env.writer->record_end(make_end(1, 1, large));
        env.writer->record_final(make_final(1, large, 1));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        // Scanned while the writer is open: the WAL and -shm are there too.
        scan_result open_scan = scan_journal(path, marker);
        BOOST_TEST((std::find(open_scan.files.begin(), open_scan.files.end(), path + "-wal") !=
                    open_scan.files.end()));
        BOOST_TEST(scan_journal(path, secret).files.empty());
        BOOST_TEST(scan_journal(path, secret).columns.empty());
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    scan_result found = scan_journal(path, marker);
    BOOST_TEST(found.values_scanned > 50u);
    BOOST_TEST(found.files_scanned >= 2u);
    BOOST_TEST(
        (std::find(found.columns.begin(), found.columns.end(), "streams.data") != found.columns.end()));
    BOOST_TEST((std::find(found.files.begin(), found.files.end(), path) != found.files.end()));
    bool in_stream_file = false;
    for (const auto& f : found.files) in_stream_file |= f.find("-streams/") != std::string::npos;
    BOOST_TEST(in_stream_file, "the large stream's file was scanned");
    BOOST_TEST(!scan_journal(path, "[REDACTED]").columns.empty());
    BOOST_TEST(!scan_journal(path, "API_TOKEN").columns.empty());

    scan_result secret_scan = scan_journal(path, secret);
    BOOST_TEST(secret_scan.columns.empty());
    BOOST_TEST(secret_scan.files.empty());
    BOOST_TEST(secret_scan.values_scanned == found.values_scanned);
}

BOOST_AUTO_TEST_SUITE_END()

namespace journal_test {

// `writer DB MARKER RUN_ID`: the engine's pattern (intent, sync, handle, end, final) over and
// over, with streams of many sizes, until killed.
int child_main(int argc, char** argv) {
    if (argc != 4 || std::string_view(argv[0]) != "writer") return 2;
    std::string path = argv[1], marker = argv[2], run_id = argv[3];
    auto db = journal::open(path, journal_access::write);
    if (!db) return 3;
    boost::asio::io_context io, worker;
    auto guard = boost::asio::make_work_guard(worker);
    std::thread thread([&] { worker.run(); });
    journal_writer writer(io.get_executor(), worker.get_executor(), std::move(*db));
    auto sync = [&] {
        bool done = false;
        std::optional<journal_error> e;
        writer.async_sync([&](std::optional<journal_error> r) {
            e = std::move(r);
            done = true;
        });
        io.restart();
        while (!done) io.run_one();
        return e;
    };
    writer.record_run(make_run(run_id, 1000000));
    if (sync()) return 4;
    for (std::uint32_t i = 0;; i += 8) {
        for (std::uint32_t k = i; k < i + 8; ++k) writer.record_intent(make_intent(k));
        if (sync()) return 5;
        for (std::uint32_t k = i; k < i + 8; ++k) {
            writer.record_handle(attempt_handle{k, 1, 1000 + k, 1, "", "", "", ""});
            auto r = make_result(task_state::succeeded, pattern(k, 1, (k * 7919u) % 300000u));
            writer.record_end(make_end(k, 1, r));
            writer.record_final(make_final(k, r, 1));
        }
        if (i == 16) {
            if (sync()) return 6;
            write_file(marker, "committed");
        }
    }
}

}  // namespace journal_test
