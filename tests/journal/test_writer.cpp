// The writer: what it records reads back exactly, group commits, completions, errors.
#include "harness.hpp"

#include "../support/error_text.hpp"
#include "exec/state_files.hpp"
#include "journal/codec.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <filesystem>
#include <future>

using namespace agentctl;
using namespace journal_test;

namespace {

std::string stream_of(journal& j, const std::string& run, const std::string& task, journal_stream which) {
    std::string out;
    auto e = j.read_stream(run, task, which, [&](std::string_view b) { out.append(b); });
    BOOST_TEST(!e.has_value(), (e ? e->message : ""));
    return out;
}

// Pages of the file `path` in the page cache (mincore of a read-only mapping, which faults
// nothing in).
std::size_t resident_pages(const std::string& path, std::size_t size) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    BOOST_TEST_REQUIRE(fd >= 0);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    BOOST_TEST_REQUIRE(map != MAP_FAILED);
    auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((size + page - 1) / page);
    BOOST_TEST_REQUIRE(::mincore(map, size, in.data()) == 0);
    ::munmap(map, size);
    return static_cast<std::size_t>(
        std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
}

// The temporary folder is on a file system whose clean pages can be dropped (not tmpfs,
// whose pages are the files themselves).
struct droppable_page_cache {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
        temp_dir tmp;
        struct statfs fs {};
        if (::statfs(tmp.path().c_str(), &fs) == 0 && fs.f_type != TMPFS_MAGIC) return true;
        boost::test_tools::assertion_result r(in_ci());
        r.message() << "SKIPPED: the temporary folder is on tmpfs, whose pages cannot be dropped "
                       "(CI=true makes it fail instead)";
        return r;
    }
};

// /dev/shm is a tmpfs, which takes no direct I/O.
struct shm_is_tmpfs {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
        struct statfs fs {};
        if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) return true;
        boost::test_tools::assertion_result r(in_ci());
        r.message() << "SKIPPED: /dev/shm is not a tmpfs (CI=true makes it fail instead)";
        return r;
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(writing)

// Synced files are clean at once: the drop beyond the kept bytes is certain, not up to the disk.
BOOST_AUTO_TEST_CASE(stream_files_leave_the_page_cache_once_on_disk,
                     *boost::unit_test::precondition(droppable_page_cache())) {
    temp_dir tmp;
    exec::unique_fd dir;
    BOOST_TEST_REQUIRE(exec::open_directory(AT_FDCWD, tmp.path(), false, dir) == 0);
    const std::string bytes(256 * 1024, 'x');
    exec::cache_dropper dropper(2 * bytes.size());  // keeps the last two files
    for (int i = 0; i < 5; ++i)
        BOOST_TEST_REQUIRE(exec::write_file(dir.get(), std::to_string(i), bytes, true, &dropper) == 0);
    for (int i = 0; i < 3; ++i) BOOST_TEST(resident_pages(tmp.file(std::to_string(i)), bytes.size()) == 0u);
    for (int i = 0; i < 5; ++i) {  // and the bytes are all there
        std::string back;
        BOOST_TEST(
            exec::read_file(dir.get(), std::to_string(i), [&](std::string_view b) { back.append(b); }) == 0);
        BOOST_TEST((back == bytes));
    }
}

// Stream files of a MiB or more go past the page cache (docs/CAPTURE.md, "The page cache"):
// whole 4 KiB blocks by direct I/O through an aligned buffer, the tail through the cache.
// Sizes around the block and buffer edges, bytes that differ at every offset.
BOOST_AUTO_TEST_CASE(large_stream_files_bypass_the_page_cache_and_read_back_whole,
                     *boost::unit_test::precondition(droppable_page_cache())) {
    temp_dir tmp;
    exec::unique_fd dir;
    BOOST_TEST_REQUIRE(exec::open_directory(AT_FDCWD, tmp.path(), false, dir) == 0);
    exec::cache_dropper dropper(1u << 30);  // nothing dropped: what is cached was never dropped
    const std::size_t mib = 1u << 20;
    for (std::size_t size : {mib, mib + 1, 2 * mib + 4095, 3 * mib + 4096, 5 * mib - 7}) {
        std::string bytes(size, '\0');
        for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7 + i / 4096) & 0xff);
        const std::string name = std::to_string(size);
        BOOST_TEST_REQUIRE(exec::write_file(dir.get(), name, bytes, false, &dropper) == 0);
        std::string back;
        BOOST_TEST(exec::read_file(dir.get(), name, [&](std::string_view b) { back.append(b); }) == 0);
        BOOST_TEST((back == bytes), "size " << size);
        // Written and read back past the cache: the tail's page at most is cached.
        BOOST_TEST(resident_pages(tmp.file(name), size) <= 1u, "size " << size);
    }
    // A large file written through the cache (no dropper: its pages are still dirty) reads back
    // the same: a direct read sees what the cache holds.
    const std::string cached(2 * mib + 5, 'c');
    BOOST_TEST_REQUIRE(exec::write_file(dir.get(), "cached", cached, false) == 0);
    std::string back;
    BOOST_TEST(exec::read_file(dir.get(), "cached", [&](std::string_view b) { back.append(b); }) == 0);
    BOOST_TEST((back == cached));
}

// Where the file system takes no direct I/O (tmpfs), the same files are written through the
// cache, whole.
BOOST_AUTO_TEST_CASE(large_stream_files_on_tmpfs_are_written_whole,
                     *boost::unit_test::precondition(shm_is_tmpfs())) {
    exec::unique_fd shm;
    BOOST_TEST_REQUIRE(exec::open_directory(AT_FDCWD, "/dev/shm", false, shm) == 0);
    const std::string name = "agentctl-test-" + std::to_string(::getpid());
    exec::unique_fd dir;
    BOOST_TEST_REQUIRE(exec::open_directory(shm.get(), name, true, dir) == 0);
    exec::cache_dropper dropper;
    const std::string bytes(2 * (1u << 20) + 3, 'z');
    BOOST_TEST(exec::write_file(dir.get(), "f", bytes, false, &dropper) == 0);
    std::string back;
    BOOST_TEST(exec::read_file(dir.get(), "f", [&](std::string_view b) { back.append(b); }) == 0);
    BOOST_TEST((back == bytes));
    BOOST_TEST(exec::remove_tree(shm.get(), name) == 0);
}

BOOST_AUTO_TEST_CASE(records_read_back_exactly) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    std::string big = pattern(1, 1, 300 * 1024);  // above the stream-file threshold
    task_result r0 = make_result(task_state::succeeded, "hello\n", "warn\n");
    r0.stdout_lossy = true;
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 3));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        env.writer->record_intent(make_intent(0));
        env.writer->record_intent(make_intent(1));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        attempt_handle h;
        h.task_index = 0;
        h.pid = 4242;
        h.pid_start_time = 777;
        h.cgroup = "/sys/fs/cgroup/agentctl-1-0";
        env.writer->record_handle(h);
        env.writer->record_end(make_end(0, 1, r0));
        env.writer->record_final(make_final(0, r0, 1));
        task_result r1 = make_result(task_state::failed, big, "", false);
        r1.signal = 9;
        r1.exit_code.reset();
        env.writer->record_end(make_end(1, 1, r1));
        env.writer->record_final(make_final(1, r1, 1));
        task_result skipped;
        skipped.state = task_state::skipped;
        skipped.error = task_error{error_code::dependency_not_succeeded, "dependency \"t0001\" failed"};
        env.writer->record_final(make_final(2, skipped, std::nullopt));
        env.writer->record_run_end(journal_run_end{journal_run_state::failed, 99, task_error{error_code::internal_error, "y"}});
        BOOST_TEST_REQUIRE(!env.close().has_value());
        BOOST_TEST(env.writer->stats().stream_files == 1u);
    }
    journal j = open_or_fail(path, journal_access::read);
    auto run = j.load_run("run-1");
    BOOST_TEST_REQUIRE(run.has_value());
    BOOST_TEST(run->workflow_source == make_run("x").workflow_source);
    BOOST_TEST(run->inputs_json == R"({"n":3})");
    // Kept apart from the run's row, which its end and its claims update (docs/JOURNAL.md,
    // "run_documents"): a million items' inputs are not rewritten with it.
    BOOST_TEST(count_rows(path, "runs", "length(workflow_source) = 0 AND length(inputs_json) = 0") == 1);
    BOOST_TEST(count_rows(path, "run_documents", "inputs_json = '{\"n\":3}'") == 1);
    BOOST_TEST(run->owner.pid == ::getpid());
    BOOST_TEST(run->state == journal_run_state::failed);
    BOOST_TEST(run->duration_ms.value_or(0) == 99u);
    BOOST_TEST_REQUIRE(run->error.has_value());
    BOOST_TEST(run->error->code == "internal_error");
    BOOST_TEST(run->created_ms > 0);

    std::vector<journal_task_result> results;
    BOOST_TEST(!j.for_each_result("run-1", true, [&](journal_task_result& r) {
        results.push_back(r);
        return true;
    }));
    BOOST_TEST_REQUIRE(results.size() == 3u);
    const task_result& a = results[0].result;
    BOOST_TEST(a.state == task_state::succeeded);
    BOOST_TEST(a.streams_in_output);
    BOOST_TEST(stdout_of(a) == "hello\n");
    BOOST_TEST(stderr_of(a) == "warn\n");
    BOOST_TEST(a.stdout_lossy);
    BOOST_TEST(a.usage.max_rss_kib == 3000u);
    // The output object comes back byte for byte, member order included.
    BOOST_TEST(boost::json::serialize(a.output) == boost::json::serialize(r0.output));
    const task_result& b = results[1].result;
    BOOST_TEST(b.state == task_state::failed);
    BOOST_TEST(b.signal.value_or(0) == 9);
    BOOST_TEST(!b.exit_code.has_value());
    BOOST_TEST(b.stdout_text == big);
    BOOST_TEST(results[1].stdout_bytes == big.size());
    BOOST_TEST(results[2].result.state == task_state::skipped);
    BOOST_TEST(results[2].result.error->code == "dependency_not_succeeded");

    BOOST_TEST(stream_of(j, "run-1", task_id(1), journal_stream::stdout_stream) == big);
    BOOST_TEST(stream_of(j, "run-1", task_id(0), journal_stream::stderr_stream) == "warn\n");
    auto one = j.load_result("run-1", task_id(1), false);
    BOOST_TEST_REQUIRE(one.has_value());
    BOOST_TEST_REQUIRE(one->has_value());
    BOOST_TEST((*one)->result.stdout_text.empty(), "streams only when asked for");
    BOOST_TEST(!j.load_result("run-1", "nope", false)->has_value());

    std::vector<journal_attempt> attempts;
    BOOST_TEST(!j.for_each_attempt("run-1", [&](journal_attempt& a) {
        attempts.push_back(a);
        return true;
    }));
    BOOST_TEST_REQUIRE(attempts.size() == 2u);
    BOOST_TEST(attempts[0].intent.argv == make_intent(0).argv);
    BOOST_TEST(attempts[0].intent.env_names == make_intent(0).env_names);
    BOOST_TEST(attempts[0].intent.cwd.value_or("") == "sub");
    BOOST_TEST(attempts[0].intent.limits == make_intent(0).limits);
    BOOST_TEST_REQUIRE(attempts[0].handle.has_value());
    BOOST_TEST(attempts[0].handle->pid.value_or(0) == 4242);
    BOOST_TEST(attempts[0].handle->cgroup == "/sys/fs/cgroup/agentctl-1-0");
    BOOST_TEST_REQUIRE(attempts[0].end.has_value());
    BOOST_TEST(attempts[0].stdout_bytes == 6u);
    BOOST_TEST(!attempts[1].handle.has_value());
    BOOST_TEST(attempts[1].stdout_bytes == big.size());
    BOOST_TEST(!j.verify().has_value());
}

BOOST_AUTO_TEST_CASE(one_transaction_takes_everything_queued) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    // The worker is not running yet: everything below is queued before the first commit.
    writer_env env(open_or_fail(path, journal_access::write), {}, /*start_worker=*/false);
    env.writer->record_run(make_run("run-1", 1000));
    for (std::uint32_t i = 0; i < 1000; ++i) {
        env.writer->record_intent(make_intent(i));
        env.writer->record_end(make_end(i, 1, make_result(task_state::succeeded, "x")));
    }
    env.start_worker();
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    auto s = env.writer->stats();
    BOOST_TEST(s.records == 2001u);
    BOOST_TEST(s.commits == 1u);
    BOOST_TEST(s.largest_batch == 2001u);
    BOOST_TEST(count_rows(path, "attempts", "ended_ms IS NOT NULL") == 1000);
}

// The engine's pattern: intents of the tasks about to start, a sync, then their ends as they
// finish, without waiting. Many records, far fewer commits.
BOOST_AUTO_TEST_CASE(group_commit_batches_concurrent_records) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1", 5000));
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    std::uint32_t next = 0;
    while (next < 5000) {
        std::uint32_t first = next;
        for (; next < first + 64 && next < 5000; ++next) env.writer->record_intent(make_intent(next));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        for (std::uint32_t i = first; i < next; ++i) {
            auto r = make_result(task_state::succeeded, "line\n");
            env.writer->record_handle(attempt_handle{i, 1, 100 + i, 1, "", "", "", ""});
            env.writer->record_end(make_end(i, 1, r));
            env.writer->record_final(make_final(i, r, 1));
        }
    }
    env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 1, std::nullopt});
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    auto s = env.writer->stats();
    BOOST_TEST(s.records == 1u + 4u * 5000u + 1u);
    BOOST_TEST_MESSAGE("records " << s.records << ", commits " << s.commits << ", largest "
                                  << s.largest_batch);
    BOOST_TEST(s.commits * 10 < s.records, "commits " << s.commits << " for " << s.records << " records");
    BOOST_TEST(s.commits >= 79u, "at least one commit per synced batch of intents");
    BOOST_TEST(count_rows(path, "results") == 5000);
}

// Pacing (docs/JOURNAL.md, "Group commits"). With an interval of an hour, a sync that the
// writer paces would never complete in the test's time: each check below either completes at
// once or stays pending until the rule says the wait must end.
namespace {

// Starts an async_sync; `done` is set when it completes.
void start_sync(writer_env& env, bool& done) {
    env.writer->async_sync([&done](std::optional<journal_error> e) {
        BOOST_TEST(!e.has_value(), (e ? e->message : ""));
        done = true;
    });
}

// Runs the worker (of a writer_env made with start_worker = false) and the test's io_context
// until every flag is set or `bound` passes: what the test queued before is one drain.
bool pump(writer_env& env, const std::vector<bool*>& flags, std::chrono::milliseconds bound = 30s) {
    auto all = [&] { return std::all_of(flags.begin(), flags.end(), [](bool* f) { return *f; }); };
    env.io.restart();
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (!all() && std::chrono::steady_clock::now() < deadline) {
        env.worker.run_one_for(5ms);
        env.io.poll();
    }
    return all();
}

journal_writer_options hour_pacing() {
    journal_writer_options o;
    o.commit_interval = std::chrono::hours(1);
    return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_few_attempts_in_flight_are_never_paced) {
    temp_dir tmp;
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write), hour_pacing());
    env.writer->record_run(make_run("run-1", 100));
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    // Seven attempts in flight, each waiting on its own sync in turn (the way --jobs 7 starts
    // them): below the eight that pacing needs, so every sync commits at once.
    for (std::uint32_t i = 0; i < 7; ++i) {
        env.writer->record_intent(make_intent(i));
        BOOST_TEST_REQUIRE(!env.sync(10s).has_value());
    }
    BOOST_TEST(env.writer->stats().commits == 8u);
}

// The test drives the worker itself (pump()): each phase's records are one drain, so the
// rule alone decides, whatever the machine's load (a free-running worker could commit the
// first intents before the rest were queued, and then pace a sync of the same phase).
BOOST_AUTO_TEST_CASE(pacing_waits_only_while_few_of_many_attempts_wait) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write), hour_pacing(), /*start_worker=*/false);
    env.writer->record_run(make_run("run-1", 100));
    bool recorded = false;
    start_sync(env, recorded);
    BOOST_TEST_REQUIRE(pump(env, {&recorded}));
    std::array<bool, 22> done{};  // done[i]: the sync after intent i completed
    auto flags = [&](std::uint32_t from, std::uint32_t to) {
        std::vector<bool*> f;
        for (std::uint32_t i = from; i < to; ++i) f.push_back(&done[i]);
        return f;
    };
    auto start = [&](std::uint32_t i) {
        env.writer->record_intent(make_intent(i));
        start_sync(env, done[i]);
    };

    // Sixteen intents and sixteen waiters: every attempt waits, so nothing is paced.
    for (std::uint32_t i = 0; i < 16; ++i) start(i);
    BOOST_TEST_REQUIRE(pump(env, flags(0, 16), 10s), "syncs of attempts that all wait were paced");
    auto commits = env.writer->stats().commits;

    // Sixteen running and one more waiting on its intent: the commit is paced.
    start(16);
    BOOST_TEST(!pump(env, flags(16, 17), 300ms), "a sync with most attempts running was not paced");
    BOOST_TEST(env.writer->stats().commits == commits);

    // Four more (5 of 21 wait: at most a quarter) keep it paced; a sixth (6 of 22) ends the
    // wait, and one commit takes all six intents.
    for (std::uint32_t i = 17; i < 21; ++i) start(i);
    BOOST_TEST(!pump(env, flags(16, 21), 300ms), "the wait ended while only a quarter waited");
    start(21);
    BOOST_TEST_REQUIRE(pump(env, flags(16, 22), 10s), "the paced wait did not end when more waited");
    BOOST_TEST(env.writer->stats().commits == commits + 1);
    BOOST_TEST(count_rows(path, "attempts") == 22);

    // Ends bring the attempts in flight below eight: a lone sync is not paced.
    for (std::uint32_t i = 0; i < 20; ++i)
        env.writer->record_end(make_end(i, 1, make_result(task_state::succeeded, "")));
    bool ended = false;
    start_sync(env, ended);
    BOOST_TEST_REQUIRE(pump(env, {&ended}, 10s), "a lone sync with few attempts in flight was paced");
    BOOST_TEST(count_rows(path, "attempts", "ended_ms IS NOT NULL") == 20);
    // A close never waits.
    env.start_worker();
    BOOST_TEST_REQUIRE(!env.close(10s).has_value());
}

// One sync at a time while many attempts run on and record nothing (a chain of short tasks
// beside long ones): waiting gains nothing, so a paced commit that answered one sync stops
// pacing for the next 32 commits, or until a commit answers several. The worker runs only
// while the test pumps it, so what is queued before a pump is one drain; the interval is
// long, so a commit is paced only by the rule, never by the test being slow.
BOOST_AUTO_TEST_CASE(pacing_stops_while_it_answers_one_sync_at_a_time) {
    temp_dir tmp;
    journal_writer_options o;
    o.commit_interval = std::chrono::seconds(2);
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write), o, /*start_worker=*/false);
    std::uint32_t next = 0;
    std::deque<bool> done;  // stable addresses
    // Queues `n` intents, each with its own sync, then pumps until all are synced.
    auto starts = [&](std::uint32_t n) {
        std::vector<bool*> flags;
        for (std::uint32_t i = 0; i < n; ++i) {
            env.writer->record_intent(make_intent(next++));
            start_sync(env, done.emplace_back(false));
            flags.push_back(&done.back());
        }
        return pump(env, flags);
    };
    env.writer->record_run(make_run("run-1", 400));
    start_sync(env, done.emplace_back(false));
    BOOST_TEST_REQUIRE(pump(env, {&done.back()}));

    // 64 attempts start together, all waiting: not paced.
    BOOST_TEST_REQUIRE(starts(64));
    BOOST_TEST(env.writer->stats().paced_commits == 0u);
    // Four at a time while the rest run: each commit is paced and answers four syncs.
    for (int round = 0; round < 2; ++round) BOOST_TEST_REQUIRE(starts(4), "round " << round);
    auto s = env.writer->stats();
    BOOST_TEST(s.paced_commits == 2u, "paced " << s.paced_commits << " of 2 rounds");

    // One at a time: the first is paced and answers it alone; the next 32 are not paced, the
    // 34th is again.
    for (int i = 0; i < 40; ++i) BOOST_TEST_REQUIRE(starts(1), "lone start " << i);
    auto lone = env.writer->stats();
    BOOST_TEST(lone.commits - s.commits == 40u);
    BOOST_TEST(lone.paced_commits - s.paced_commits == 2u,
               "paced " << lone.paced_commits - s.paced_commits << " of 40 lone syncs");

    // Still not pacing (26 commits to go), four at once: that commit answers four, so pacing is
    // back, and the next lone start is paced.
    BOOST_TEST_REQUIRE(starts(4));
    BOOST_TEST(env.writer->stats().paced_commits == lone.paced_commits);
    BOOST_TEST_REQUIRE(starts(1));
    BOOST_TEST(env.writer->stats().paced_commits == lone.paced_commits + 1);

    env.start_worker();
    BOOST_TEST_REQUIRE(!env.close(10s).has_value());
}

// While the CPUs are busy, a paced commit waits busy_commit_interval instead of
// commit_interval (docs/JOURNAL.md, "Group commits"). The CPUs' idle share comes from the
// test. The writer looks at it when a commit is due, at most every quarter second; each change
// below comes seconds after it last looked (a commit paced at commit_interval, 2 s, or the
// 2.5 s pump of a busy wait), so the next commit looks again without the test waiting. The
// busy interval is an hour: a sync it paces completes only when the rule ends the wait.
BOOST_AUTO_TEST_CASE(busy_cpus_pace_commits_at_the_busy_interval) {
    temp_dir tmp;
    double idle = 1.0;
    int looked = 0;
    journal_writer_options o;
    o.commit_interval = std::chrono::seconds(2);  // long: a paced commit is never late
    o.busy_commit_interval = std::chrono::hours(1);
    o.cpu_idle = [&] {
        ++looked;
        return idle;
    };
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write), o, /*start_worker=*/false);
    env.writer->record_run(make_run("run-1", 100));
    bool recorded = false;
    start_sync(env, recorded);
    BOOST_TEST_REQUIRE(pump(env, {&recorded}));
    std::array<bool, 34> done{};
    auto flags = [&](std::uint32_t from, std::uint32_t to) {
        std::vector<bool*> f;
        for (std::uint32_t i = from; i < to; ++i) f.push_back(&done[i]);
        return f;
    };
    // Starts [from, to), each with its own sync. Five at a time while the rest run: at most a
    // quarter wait, so the commit is paced, and it answers several syncs (pacing stays on).
    auto start = [&](std::uint32_t from, std::uint32_t to) {
        for (std::uint32_t i = from; i < to; ++i) {
            env.writer->record_intent(make_intent(i));
            start_sync(env, done[i]);
        }
    };
    start(0, 16);  // all wait: not paced
    BOOST_TEST_REQUIRE(pump(env, flags(0, 16), 10s));

    // Idle CPUs: paced at commit_interval.
    start(16, 21);
    BOOST_TEST_REQUIRE(pump(env, flags(16, 21), 10s), "a paced sync waited longer than commit_interval");
    auto s = env.writer->stats();
    BOOST_TEST(s.paced_commits == 1u);
    BOOST_TEST(s.busy_paced_commits == 0u);

    // Busy CPUs (10 % idle): paced at the busy interval, until more than a quarter wait (8 of
    // 29) and end the wait.
    idle = 0.10;
    int before = looked;
    start(21, 26);
    // Longer than commit_interval: the busy interval is the one that holds it.
    BOOST_TEST(!pump(env, flags(21, 26), 2500ms), "a sync was not paced at the busy interval");
    BOOST_TEST(looked > before);
    start(26, 29);
    BOOST_TEST_REQUIRE(pump(env, flags(21, 29), 10s), "the busy wait did not end when more waited");
    s = env.writer->stats();
    BOOST_TEST(s.paced_commits == 2u);
    BOOST_TEST(s.busy_paced_commits == 1u);

    // An idle share not known (negative) is not busy.
    idle = -1;
    start(29, 34);
    BOOST_TEST_REQUIRE(pump(env, flags(29, 34), 10s), "an unknown idle share was taken as busy");
    s = env.writer->stats();
    BOOST_TEST(s.paced_commits == 3u);
    BOOST_TEST(s.busy_paced_commits == 1u);
    env.start_worker();
    BOOST_TEST_REQUIRE(!env.close(10s).has_value());
}

// The meter of the CPUs' idle share reads /proc/stat: unknown at its first call, a share once
// the clock has ticked.
BOOST_AUTO_TEST_CASE(cpu_idle_meter_reads_a_share_of_the_cpus_time) {
    exec::cpu_idle_meter meter;
    BOOST_TEST(meter.sample() < 0);
    std::this_thread::sleep_for(100ms);  // 10 ticks of every CPU at USER_HZ 100
    double share = meter.sample();
    BOOST_TEST(share >= 0.0);
    BOOST_TEST(share <= 1.0);
}

// Records nobody waits for (handles, ends, finals) wait out the interval whatever the pacing
// rule says, and go with the next commit a sync asks for: no commit of their own.
BOOST_AUTO_TEST_CASE(records_nobody_waits_for_go_with_the_next_sync) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write), hour_pacing(), /*start_worker=*/false);
    env.writer->record_run(make_run("run-1", 10));
    bool recorded = false;
    start_sync(env, recorded);
    BOOST_TEST_REQUIRE(pump(env, {&recorded}));
    // One attempt in flight, far below what pacing needs: its sync commits at once.
    env.writer->record_intent(make_intent(0));
    bool started = false;
    start_sync(env, started);
    BOOST_TEST_REQUIRE(pump(env, {&started}, 10s));
    auto commits = env.writer->stats().commits;

    // Its end and final: held, nothing waits for them.
    auto r = make_result(task_state::succeeded, "");
    env.writer->record_end_and_final(make_end(0, 1, r), make_final(0, r, 1));
    bool never = false;
    BOOST_TEST(!pump(env, {&never}, 300ms));
    BOOST_TEST(env.writer->stats().commits == commits);
    BOOST_TEST(count_rows(path, "results") == 0);

    // The next start's sync is not held: one commit takes them along.
    env.writer->record_intent(make_intent(1));
    bool next = false;
    start_sync(env, next);
    BOOST_TEST_REQUIRE(pump(env, {&next}, 10s), "a sync waited behind records nobody waited for");
    BOOST_TEST(env.writer->stats().commits == commits + 1);
    BOOST_TEST(env.writer->stats().paced_commits == 0u);
    BOOST_TEST(count_rows(path, "results") == 1);
    env.start_worker();
    BOOST_TEST_REQUIRE(!env.close(10s).has_value());
}

// A handle and the end of the same attempt in one batch are written by one statement (the
// last handle of the attempt wins); the rows read back as if each had been applied alone.
BOOST_AUTO_TEST_CASE(handles_and_ends_in_one_batch_read_back_whole) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        // The worker is not running yet: everything below is one batch.
        writer_env env(open_or_fail(path, journal_access::write), {}, /*start_worker=*/false);
        env.writer->record_run(make_run("run-1", 3));
        for (std::uint32_t i = 0; i < 3; ++i) env.writer->record_intent(make_intent(i));
        auto handle = [](std::uint32_t task, std::int64_t pid, std::string cgroup) {
            attempt_handle h;
            h.task_index = task;
            h.pid = pid;
            h.pid_start_time = 1000 + pid;
            h.cgroup = std::move(cgroup);
            return h;
        };
        auto r = make_result(task_state::succeeded, "out\n");
        env.writer->record_handle(handle(0, 10, "/cg/0"));  // merged into task 0's end
        env.writer->record_handle(handle(1, 11, "/cg/1-first"));
        env.writer->record_handle(handle(1, 12, "/cg/1"));  // the last of task 1's: it wins
        env.writer->record_handle(handle(2, 13, "/cg/2"));  // task 2 does not end: its own update
        env.writer->record_end_and_final(make_end(0, 1, r),
                                         make_final(0, make_result(task_state::succeeded, ""), 1));
        env.writer->record_end(make_end(1, 1, r));
        env.start_worker();
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        BOOST_TEST(env.writer->stats().commits == 1u);
    }
    journal j = open_or_fail(path, journal_access::read);
    std::vector<journal_attempt> attempts;
    BOOST_TEST(!j.for_each_attempt("run-1", [&](journal_attempt& a) {
        attempts.push_back(a);
        return true;
    }));
    BOOST_TEST_REQUIRE(attempts.size() == 3u);
    const std::pair<std::int64_t, std::string> expected[] = {{10, "/cg/0"}, {12, "/cg/1"}, {13, "/cg/2"}};
    for (std::size_t i = 0; i < 3; ++i) {
        BOOST_TEST_REQUIRE(attempts[i].handle.has_value(), "task " << i);
        BOOST_TEST(attempts[i].handle->pid.value_or(0) == expected[i].first);
        BOOST_TEST(attempts[i].handle->pid_start_time.value_or(0) == 1000u + expected[i].first);
        BOOST_TEST(attempts[i].handle->cgroup == expected[i].second);
        BOOST_TEST(attempts[i].handle_ms > 0);
        BOOST_TEST(attempts[i].end.has_value() == (i < 2), "task " << i);
    }
    BOOST_TEST(attempts[0].stdout_bytes == 4u);
    // The final names the end just recorded, and has its lengths without reading them back.
    auto result = j.load_result("run-1", task_id(0), true);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST_REQUIRE(result->has_value());
    BOOST_TEST((*result)->stdout_bytes == 4u);
    BOOST_TEST(stdout_of((*result)->result) == "out\n");
}

// A final whose JSON is byte for byte its end's is stored as '' and reads back whole through
// every reader; one that differs keeps its own JSON (docs/JOURNAL.md, "results").
BOOST_AUTO_TEST_CASE(a_final_like_its_end_stores_its_json_once) {
    namespace jd = agentctl::journal_detail;
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    std::vector<task_final> finals;              // what each task's final result was, by task index
    auto same_but_streams = [](task_result r) {  // as the engine's final: its streams are the end's
        if (r.streams_in_output)
            for (const char* k : {"stdout", "stderr"}) r.output.as_object()[k] = "";
        r.stdout_text.clear();
        r.stderr_text.clear();
        return r;
    };
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 9));
        for (std::uint32_t i = 0; i < 8; ++i) env.writer->record_intent(make_intent(i));
        env.writer->record_intent(make_intent(2, 2));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        auto record_pair = [&](std::uint32_t task, std::uint32_t attempt, const task_result& end,
                               task_final final) {
            finals.push_back(final);
            env.writer->record_end_and_final(make_end(task, attempt, end), std::move(final));
        };
        // 0: streams kept in output (the built-in runner's shape): the same JSON, so ''.
        task_result r0 = make_result(task_state::succeeded, "zero out\n", "zero err\n");
        record_pair(0, 1, r0, make_final(0, same_but_streams(r0), 1));
        // 1: streams apart (a process's shape), the final without them: ''.
        task_result r1 = make_result(task_state::failed, "one out\n", "one err\n", false);
        record_pair(1, 1, r1, make_final(1, same_but_streams(r1), 1));
        // 2: retried; the second attempt's end and the final agree: ''.
        env.writer->record_end(make_end(2, 1, make_result(task_state::failed, "first try\n")));
        task_result r2 = make_result(task_state::succeeded, "second try\n");
        r2.attempts = 2;
        r2.duration_ms = 40;  // both attempts
        record_pair(2, 2, r2, make_final(2, same_but_streams(r2), 2));
        // 3: the final says more than its end (cancelled during the retry's backoff): its own.
        task_result r3 = make_result(task_state::failed, "three\n");
        task_result f3 = same_but_streams(r3);
        f3.state = task_state::cancelled;
        f3.duration_ms = 99;
        record_pair(3, 1, r3, make_final(3, f3, 1));
        // 4: the output's streams left out of the final (without_streams): it differs.
        task_result r4 = make_result(task_state::succeeded, "four\n");
        task_result f4 = r4;
        f4.output.as_object().erase("stdout");
        f4.output.as_object().erase("stderr");
        record_pair(4, 1, r4, make_final(4, f4, 1));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        // 5 and 6: the end was committed before; the final compares with its stored text.
        task_result r5 = make_result(task_state::succeeded, "five\n");
        task_result r6 = make_result(task_state::succeeded, "six\n");
        env.writer->record_end(make_end(5, 1, r5));
        env.writer->record_end(make_end(6, 1, r6));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        finals.push_back(make_final(5, same_but_streams(r5), 1));
        task_result f6 = same_but_streams(r6);
        f6.duration_ms = 1234;
        finals.push_back(make_final(6, f6, 1));
        // 7: a resume's reused result whose final was lost: the same JSON as the end, ''.
        task_result r7 = make_result(task_state::succeeded, "seven\n");
        env.writer->record_end(make_end(7, 1, r7));
        finals.push_back(make_final(7, same_but_streams(r7), 1));
        finals.back().reused = true;
        // 8: never ran: no end to share with (and, as the engine records it, why).
        task_result skipped;
        skipped.state = task_state::skipped;
        skipped.error = task_error{error_code::dependency_not_succeeded, "a need failed"};
        finals.push_back(make_final(8, skipped, std::nullopt));
        for (std::size_t i = 5; i < finals.size(); ++i) env.writer->record_final(finals[i]);
        env.writer->record_run_end(journal_run_end{journal_run_state::failed, 7, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST_REQUIRE(finals.size() == 9u);
    // Straight from SQLite: which rows hold their own JSON.
    const bool stored_once[] = {true, true, true, false, false, true, false, true, false};
    for (std::uint32_t i = 0; i < 9; ++i)
        BOOST_TEST(
            count_rows(path, "results", "task_index = " + std::to_string(i) + " AND result_json = ''") ==
                (stored_once[i] ? 1 : 0),
            "task " << i);
    BOOST_TEST(count_rows(path, "results", "result_json = ''") == 5);

    const std::string streams[][2] = {{"zero out\n", "zero err\n"},
                                      {"one out\n", "one err\n"},
                                      {"second try\n", ""},
                                      {"three\n", ""},
                                      {"four\n", ""},
                                      {"five\n", ""},
                                      {"six\n", ""},
                                      {"seven\n", ""},
                                      {"", ""}};
    journal j = open_or_fail(path, journal_access::read);
    BOOST_TEST(!j.verify().has_value());
    // Every reader gives each final's own JSON back, and the streams of the attempt it names.
    auto check = [&](const journal_task_result& r, bool with_streams, const char* reader) {
        const std::uint32_t i = r.task_index;
        BOOST_TEST_REQUIRE(i < 9u);
        BOOST_TEST(jd::encode_result(r.result) == jd::encode_result(finals[i].result),
                   reader << ", task " << i);
        BOOST_TEST(r.result.state == finals[i].result.state, reader << ", task " << i);
        BOOST_TEST(r.reused == finals[i].reused, reader << ", task " << i);
        if (with_streams) {
            BOOST_TEST(stdout_of(r.result) == streams[i][0], reader << ", task " << i);
            BOOST_TEST(stderr_of(r.result) == streams[i][1], reader << ", task " << i);
        }
    };
    for (bool with_streams : {false, true}) {
        std::uint32_t seen = 0;
        BOOST_TEST(!j.for_each_result("run-1", with_streams, [&](journal_task_result& r) {
            check(r, with_streams, "for_each_result");
            ++seen;
            return true;
        }));
        BOOST_TEST(seen == 9u);
        for (std::uint32_t i = 0; i < 9; ++i) {
            auto by_id = j.load_result("run-1", task_id(i), with_streams);
            BOOST_TEST_REQUIRE(by_id.has_value(), why(by_id));
            BOOST_TEST_REQUIRE(by_id->has_value());
            check(**by_id, with_streams, "load_result");
            auto at = j.load_result_at("run-1", i, with_streams);
            BOOST_TEST_REQUIRE(at.has_value(), why(at));
            BOOST_TEST_REQUIRE(at->has_value());
            check(**at, with_streams, "load_result_at");
        }
    }
    for (std::uint32_t i = 0; i < 9; ++i)
        BOOST_TEST(stream_of(j, "run-1", task_id(i), journal_stream::stdout_stream) == streams[i][0]);
    auto runs = j.list_runs(10, nullptr);
    BOOST_TEST_REQUIRE(runs.has_value(), why(runs));
    BOOST_TEST_REQUIRE(runs->size() == 1u);
    BOOST_TEST((*runs)[0].recorded == 9u);
    BOOST_TEST((*runs)[0].reused == 1u);
    BOOST_TEST((*runs)[0].tasks_by_state["succeeded"] == 6u);
}

// The engine's pair, record_end_and_final(end, task_id): the final is taken from the end, and
// reads back as the final a task_final without the end's streams would have recorded.
BOOST_AUTO_TEST_CASE(a_final_taken_from_its_end_reads_back_as_a_recorded_one) {
    namespace jd = agentctl::journal_detail;
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    auto without_streams = [](task_result r) {  // what the engine's final was before
        if (r.streams_in_output)
            for (const char* k : {"stdout", "stderr"}) r.output.as_object()[k] = "";
        r.stdout_text.clear();
        r.stderr_text.clear();
        return r;
    };
    task_result in_output = make_result(task_state::succeeded, "out\n", "err\n");
    task_result apart = make_result(task_state::failed, "apart\n", "", false);
    task_result retried = make_result(task_state::succeeded, "second\n");
    retried.attempts = 2;
    const task_result* shapes[] = {&in_output, &apart, &retried};
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 6));
        // Tasks 0-2 through a task_final, 3-5 taken from their ends.
        for (std::uint32_t i = 0; i < 6; ++i)
            env.writer->record_intent(make_intent(i, shapes[i % 3]->attempts));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
        for (std::uint32_t i = 0; i < 6; ++i) {
            const task_result& r = *shapes[i % 3];
            if (i < 3)
                env.writer->record_end_and_final(make_end(i, r.attempts, r),
                                                 make_final(i, without_streams(r), r.attempts));
            else
                env.writer->record_end_and_final(make_end(i, r.attempts, r), task_id(i));
        }
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST(count_rows(path, "results", "result_json = ''") == 6);
    BOOST_TEST(count_rows(path, "results", "streams_attempt IS NOT NULL") == 6);
    journal j = open_or_fail(path, journal_access::read);
    BOOST_TEST(!j.verify().has_value());
    for (bool with_streams : {false, true}) {
        for (std::uint32_t i = 0; i < 3; ++i) {
            auto recorded = j.load_result_at("run-1", i, with_streams);
            auto taken = j.load_result_at("run-1", i + 3, with_streams);
            BOOST_TEST_REQUIRE((recorded.has_value() && recorded->has_value()), why(recorded));
            BOOST_TEST_REQUIRE((taken.has_value() && taken->has_value()), why(taken));
            const auto& a = **recorded;
            const auto& b = **taken;
            BOOST_TEST(jd::encode_result(a.result) == jd::encode_result(b.result), "shape " << i);
            BOOST_TEST(b.result.attempts == shapes[i]->attempts);
            BOOST_TEST(b.stdout_bytes == a.stdout_bytes);
            BOOST_TEST(!b.reused);
            if (with_streams) {
                BOOST_TEST(stdout_of(b.result) == stdout_of(*shapes[i]), "shape " << i);
                BOOST_TEST(stderr_of(b.result) == stderr_of(*shapes[i]), "shape " << i);
            }
        }
    }
}

// A '' that names no end is damage: verify() and the readers say so, never read it as empty.
BOOST_AUTO_TEST_CASE(a_stored_once_result_without_its_end_is_corrupt) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 2));
        task_result skipped;
        skipped.state = task_state::skipped;
        env.writer->record_final(make_final(0, skipped, std::nullopt));
        env.writer->record_final(make_final(1, skipped, std::nullopt));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST_REQUIRE(exec_sql(path, "UPDATE results SET result_json = '' WHERE task_index = 1"));
    journal j = open_or_fail(path, journal_access::read);
    auto v = j.verify();
    BOOST_TEST_REQUIRE(v.has_value());
    BOOST_TEST(v->code == journal_errc::corrupt, v->message);
    BOOST_TEST(v->message.find(task_id(1)) != std::string::npos, v->message);
    auto r = j.load_result_at("run-1", 1, false);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code == journal_errc::corrupt, r.error().message);
    auto e = j.for_each_result("run-1", false, [](journal_task_result&) { return true; });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::corrupt);
    auto fine = j.load_result_at("run-1", 0, false);
    BOOST_TEST_REQUIRE(fine.has_value(), why(fine));
    BOOST_TEST(fine->has_value());
}

BOOST_AUTO_TEST_CASE(completion_runs_on_the_handlers_executor) {
    temp_dir tmp;
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write));
    env.writer->record_run(make_run("run-1"));
    boost::asio::io_context other;
    bool done = false;
    std::thread::id ran_on;
    env.writer->async_sync(boost::asio::bind_executor(other, [&](std::optional<journal_error> e) {
        BOOST_TEST(!e.has_value());
        ran_on = std::this_thread::get_id();
        done = true;
    }));
    // Work is tracked on `other` until the completion: run() returns only after it.
    other.run_for(30s);
    BOOST_TEST(done);
    BOOST_TEST((ran_on == std::this_thread::get_id()));
    // Nothing queued: still asynchronous, and still on the handler's executor, without the
    // run's executor (env.io, not run here) having to run: the first half raced into this
    // case whenever the commit ended before async_sync() was called.
    done = false;
    other.restart();
    env.writer->async_sync(
        boost::asio::bind_executor(other, [&](std::optional<journal_error>) { done = true; }));
    BOOST_TEST(!done);
    other.run_for(30s);
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(errors_are_sticky) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1"));
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    // The worker is held busy while both are queued, so that they are one batch.
    std::promise<void> hold;
    boost::asio::post(env.worker, [held = hold.get_future().share()] { held.wait(); });
    env.writer->record_intent(make_intent(0));
    env.writer->record_intent(make_intent(0));  // the same attempt twice: refused
    hold.set_value();
    auto e = env.sync();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->message.find(path) != std::string::npos, e->message);
    env.writer->record_intent(make_intent(1));
    auto again = env.sync();
    BOOST_TEST_REQUIRE(again.has_value());
    BOOST_TEST(again->message == e->message);
    // The failed transaction left nothing; what was committed before stays.
    BOOST_TEST(count_rows(path, "attempts") == 0);
    BOOST_TEST(count_rows(path, "runs") == 1);
}

BOOST_AUTO_TEST_CASE(a_run_id_is_recorded_once) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1"));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
    }
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1"));
    auto e = env.sync();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::run_exists);
}

BOOST_AUTO_TEST_CASE(records_need_a_run) {
    temp_dir tmp;
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write));
    env.writer->record_intent(make_intent(0));
    auto e = env.sync();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::closed);
}

BOOST_AUTO_TEST_CASE(close_then_sync) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1"));
    BOOST_TEST(!env.close().has_value());
    BOOST_TEST(!std::filesystem::exists(path + "-wal"),
               "the last connection checkpointed and removed the WAL");
    BOOST_TEST(count_rows(path, "runs") == 1);
    BOOST_TEST(!env.writer->record_intent(make_intent(0)));
    auto e = env.sync();
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::closed);
}

BOOST_AUTO_TEST_CASE(destroying_the_writer_still_commits) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1"));
        for (std::uint32_t i = 0; i < 10; ++i) env.writer->record_intent(make_intent(i));
    }  // no sync, no close
    BOOST_TEST(count_rows(path, "attempts") == 10);
}

// Nothing stays in the writer once committed; record_*() says when the caller should wait.
BOOST_AUTO_TEST_CASE(memory_is_what_is_queued) {
    temp_dir tmp;
    journal_writer_options options;
    options.high_water_bytes = 8 << 20;
    const std::size_t stream = 256 << 10;
    writer_env env(open_or_fail(tmp.file("journal.db"), journal_access::write), options,
                   /*start_worker=*/false);
    env.writer->record_run(make_run("run-1", 400));
    // Nothing is committed yet: the queue reaches the mark after 8 MiB of streams.
    for (std::uint32_t i = 0; i < 400; ++i) env.writer->record_intent(make_intent(i));
    std::uint32_t queued = 0;
    while (!env.writer->record_end(
        make_end(queued, 1, make_result(task_state::succeeded, pattern(queued, 1, stream)))))
        BOOST_TEST_REQUIRE(++queued < 100u);
    ++queued;
    BOOST_TEST(queued == (8u << 20) / stream);
    BOOST_TEST(env.writer->stats().queued_bytes >= options.high_water_bytes);
    env.start_worker();
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    BOOST_TEST(env.writer->stats().queued_bytes == 0u);
    // A producer that waits when told to never holds much more than the mark.
    for (std::uint32_t i = queued; i < 400; ++i)
        if (env.writer->record_end(make_end(i, 1, make_result(task_state::succeeded, pattern(i, 1, stream)))))
            BOOST_TEST_REQUIRE(!env.sync().has_value());
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    auto s = env.writer->stats();
    BOOST_TEST(s.queued_bytes == 0u);
    BOOST_TEST(s.peak_queued_bytes <= options.high_water_bytes + stream + 4096u);
    BOOST_TEST(s.stream_bytes == 400u * stream);
}

BOOST_AUTO_TEST_SUITE_END()
