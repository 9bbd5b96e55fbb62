// Readers and maintenance: plan-order iteration, listing, uncertain attempts, claims, gc.
#include "harness.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <filesystem>
#include <random>
#include <set>

using namespace agentctl;
using namespace journal_test;

namespace {

owner_alive_fn alive_pids(std::set<std::int64_t> pids) {
    return [pids = std::move(pids)](const journal_owner& o) { return pids.count(o.pid) > 0; };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reading)

BOOST_AUTO_TEST_CASE(results_stream_in_plan_order) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    const std::uint32_t n = 10000;
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", n));
        std::vector<std::uint32_t> order(n);
        for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), std::mt19937(7));  // finish order differs from plan order
        for (auto i : order)
            env.writer->record_final(make_final(i, make_result(task_state::succeeded, task_id(i)), {}));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    journal j = open_or_fail(path, journal_access::read);
    std::uint32_t expected = 0;
    bool in_order = true, streams_right = true;
    BOOST_TEST(!j.for_each_result("run-1", true, [&](journal_task_result& r) {
        in_order &= r.task_index == expected;
        streams_right &= stdout_of(r.result) == task_id(expected);
        ++expected;
        return true;
    }));
    BOOST_TEST(in_order);
    BOOST_TEST(streams_right);
    BOOST_TEST(expected == n);
    // Stopping early.
    std::uint32_t seen = 0;
    BOOST_TEST(!j.for_each_result("run-1", false, [&](journal_task_result&) { return ++seen < 5; }));
    BOOST_TEST(seen == 5u);
    auto e = j.for_each_result("no-such-run", false, [](journal_task_result&) { return true; });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::unknown_run);
}

// WAL: a reader on its own connection reads while the writer commits, and sees whole
// commits only.
BOOST_AUTO_TEST_CASE(readers_run_beside_a_writer) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    writer_env env(open_or_fail(path, journal_access::write));
    env.writer->record_run(make_run("run-1", 3000));
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0}, errors{0}, torn{0};
    std::thread reader([&] {
        journal j = open_or_fail(path, journal_access::read);
        while (!stop) {
            std::uint32_t last = 0;
            bool first = true;
            auto e = j.for_each_result("run-1", true, [&](journal_task_result& r) {
                // Each commit adds whole tasks in order: no gap, every stream complete.
                if (!first && r.task_index != last + 1) ++torn;
                if (stdout_of(r.result) != pattern(r.task_index, 1, 3000)) ++torn;
                first = false;
                last = r.task_index;
                return true;
            });
            if (e) ++errors;
            ++reads;
        }
    });
    for (std::uint32_t i = 0; i < 3000; ++i) {
        auto r = make_result(task_state::succeeded, pattern(i, 1, 3000));
        env.writer->record_intent(make_intent(i));
        env.writer->record_end(make_end(i, 1, r));
        env.writer->record_final(make_final(i, r, 1));
        if (i % 50 == 0) BOOST_TEST_REQUIRE(!env.sync().has_value());
    }
    BOOST_TEST_REQUIRE(!env.sync().has_value());
    stop = true;
    reader.join();
    BOOST_TEST(reads.load() > 1);
    BOOST_TEST(errors.load() == 0);
    BOOST_TEST(torn.load() == 0);
}

BOOST_AUTO_TEST_CASE(list_newest_first_with_counts) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    for (int k = 0; k < 3; ++k) {
        writer_env env(open_or_fail(path, journal_access::write));
        std::string id = "run-" + std::to_string(k);
        // run-2 is left "running" with an owner that is gone.
        env.writer->record_run(make_run(id, 4, k == 2 ? fake_owner(999999999) : this_process_owner()));
        env.writer->record_final(make_final(0, make_result(task_state::succeeded, "a"), {}));
        env.writer->record_final(make_final(1, make_result(task_state::failed, "b"), {}));
        env.writer->record_final(make_final(2, make_result(task_state::succeeded, "c"), {}));
        if (k != 2) env.writer->record_run_end(journal_run_end{journal_run_state::failed, 10, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    journal j = open_or_fail(path, journal_access::read);
    auto runs = j.list_runs(10, owner_alive_here);
    BOOST_TEST_REQUIRE(runs.has_value());
    BOOST_TEST_REQUIRE(runs->size() == 3u);
    BOOST_TEST((*runs)[0].run_id == "run-2");
    BOOST_TEST((*runs)[2].run_id == "run-0");
    BOOST_TEST((*runs)[0].state == journal_run_state::interrupted);
    BOOST_TEST((*runs)[1].state == journal_run_state::failed);
    for (const auto& r : *runs) {
        BOOST_TEST(r.tasks_by_state.at("succeeded") == 2u);
        BOOST_TEST(r.tasks_by_state.at("failed") == 1u);
        BOOST_TEST(r.recorded == 3u);
        BOOST_TEST(r.task_count == 4u);
        BOOST_TEST(r.workflow_name == "wf");
    }
    BOOST_TEST(j.list_runs(1)->size() == 1u);
    BOOST_TEST((*j.list_runs(10))[0].state == journal_run_state::running,
               "without a liveness check: as stored");
}

// What resume must refuse over: an intent without an end, a timeout, a cancellation of a
// process that was started (its handle recorded) or of a Slurm job, a cleanup failure. Not: a
// non-zero exit, a spawn failure, a task that later succeeded, or a local attempt cancelled
// before its process was spawned (no handle: a Ctrl-C that came first), nor an allocation
// worker's attempt cancelled while it waited in the worker's queue (docs/WORKER.md,
// "Pipelining": the worker's `started` is its handle).
BOOST_AUTO_TEST_CASE(uncertain_attempts) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 12));
        for (std::uint32_t i = 0; i < 12; ++i) env.writer->record_intent(make_intent(i));
        env.writer->record_handle(attempt_handle{4, 1, 4004, 1, "", "", "", ""});
        env.writer->record_handle(attempt_handle{11, 1, std::nullopt, std::nullopt, "", "", "", ""});
        env.writer->record_intent(make_intent(7, 2));
        // 0: intent only.
        env.writer->record_end(make_end(1, 1, make_result(task_state::succeeded, "")));
        env.writer->record_end(make_end(2, 1, make_result(task_state::timed_out, "")));
        env.writer->record_end(make_end(3, 1, make_result(task_state::failed, "")));
        env.writer->record_end(make_end(4, 1, make_result(task_state::cancelled, "")));
        env.writer->record_end(make_end(5, 1, make_result(task_state::spawn_failed, "")));
        auto cleanup = make_end(6, 1, make_result(task_state::succeeded, ""));
        cleanup.cleanup_failed = true;
        env.writer->record_end(cleanup);
        env.writer->record_end(make_end(7, 1, make_result(task_state::timed_out, "")));
        env.writer->record_end(make_end(7, 2, make_result(task_state::succeeded, "")));
        env.writer->record_final(make_final(7, make_result(task_state::succeeded, ""), 2));
        env.writer->record_end(make_end(8, 1, make_result(task_state::cancelled, "")));  // no handle
        auto on_slurm = make_result(task_state::cancelled, "");
        on_slurm.backend = "slurm";
        env.writer->record_end(make_end(9, 1, on_slurm));  // no job id listed yet
        auto on_worker = on_slurm;
        on_worker.slurm_worker = "worker.node1:1";
        env.writer->record_end(make_end(10, 1, on_worker));  // cancelled in the worker's queue
        env.writer->record_end(make_end(11, 1, on_worker));  // cancelled once started
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    journal j = open_or_fail(path, journal_access::read);
    auto u = j.uncertain_attempts("run-1");
    BOOST_TEST_REQUIRE(u.has_value());
    std::vector<std::uint32_t> tasks;
    for (const auto& a : *u) tasks.push_back(a.intent.task_index);
    BOOST_TEST(tasks == (std::vector<std::uint32_t>{0, 2, 4, 6, 9, 11}), boost::test_tools::per_element());
    BOOST_TEST(!(*u)[0].end.has_value());
    BOOST_TEST((*u)[1].end->state == task_state::timed_out);
    BOOST_TEST((*u)[3].cleanup_failed);
}

BOOST_AUTO_TEST_CASE(claims) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-live", 1, fake_owner(1001)));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-done", 1, fake_owner(1002)));
        env.writer->record_run_end(journal_run_end{journal_run_state::failed, 1, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    journal j = open_or_fail(path, journal_access::write);
    auto alive = alive_pids({1001, 1002});
    auto r = j.claim_run("run-live", fake_owner(2000), alive);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code == journal_errc::run_live);
    BOOST_TEST(r.error().message.find("1001") != std::string::npos, r.error().message);
    BOOST_TEST(j.claim_run("run-none", fake_owner(2000), alive).error().code == journal_errc::unknown_run);
    // A finished run is claimed even though its last owner still lives.
    auto done = j.claim_run("run-done", fake_owner(2000), alive);
    BOOST_TEST_REQUIRE(done.has_value(), why(done));
    BOOST_TEST(*done == 1u);
    auto run = j.load_run("run-done");
    BOOST_TEST(run->state == journal_run_state::running);
    BOOST_TEST(run->owner.pid == 2000);
    BOOST_TEST(!run->ended_ms.has_value());
    // Once its owner is dead, the live one is claimed too.
    auto claimed = j.claim_run("run-live", fake_owner(2000), alive_pids({}));
    BOOST_TEST_REQUIRE(claimed.has_value());
    BOOST_TEST(*claimed == 1u);
}

// Two claimers on two connections and threads, many times: exactly one wins each run.
BOOST_AUTO_TEST_CASE(claim_race_has_one_winner) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    const int runs = 40;
    {
        writer_env env(open_or_fail(path, journal_access::write));
        BOOST_TEST_REQUIRE(!env.sync().has_value());
    }
    for (int k = 0; k < runs; ++k) {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-" + std::to_string(k), 1, fake_owner(999999999)));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    auto alive = alive_pids({5001, 5002});  // the claimers
    std::barrier both(2);                   // both claim the same run at the same moment
    std::vector<int> wins(2, 0), live(2, 0), other(2, 0);
    auto claimer = [&](int who) {
        journal j = open_or_fail(path, journal_access::write);
        for (int k = 0; k < runs; ++k) {
            both.arrive_and_wait();
            auto r = j.claim_run("run-" + std::to_string(k), fake_owner(5001 + who), alive);
            if (r)
                ++wins[who];
            else if (r.error().code == journal_errc::run_live)
                ++live[who];
            else
                ++other[who];
        }
    };
    std::thread a(claimer, 0), b(claimer, 1);
    a.join();
    b.join();
    BOOST_TEST(wins[0] + wins[1] == runs);
    BOOST_TEST(live[0] + live[1] == runs);
    BOOST_TEST(other[0] + other[1] == 0);
    BOOST_TEST_MESSAGE("claims won: " << wins[0] << " and " << wins[1]);
    journal j = open_or_fail(path, journal_access::read);
    for (int k = 0; k < runs; ++k) BOOST_TEST(j.load_run("run-" + std::to_string(k))->segment == 1u);
}

BOOST_AUTO_TEST_CASE(writer_claims_and_continues_a_run) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", 2, fake_owner(999999999)));
        env.writer->record_intent(make_intent(0));
        env.writer->record_end(make_end(0, 1, make_result(task_state::failed, "first")));
        env.writer->record_final(make_final(0, make_result(task_state::failed, "first"), 1));
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    writer_env env(open_or_fail(path, journal_access::write));
    BOOST_TEST_REQUIRE(!env.claim("run-1", this_process_owner(), owner_alive_here).has_value());
    BOOST_TEST(env.writer->segment() == 1u);
    env.writer->record_intent(make_intent(0, 2));
    env.writer->record_end(make_end(0, 2, make_result(task_state::succeeded, "second")));
    env.writer->record_final(make_final(0, make_result(task_state::succeeded, "second"), 2));
    env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 3, std::nullopt});
    BOOST_TEST_REQUIRE(!env.close().has_value());

    journal j = open_or_fail(path, journal_access::read);
    auto r = j.load_result("run-1", task_id(0), true);
    BOOST_TEST_REQUIRE((r && r->has_value()));
    BOOST_TEST(stdout_of((*r)->result) == "second");
    BOOST_TEST((*r)->segment == 1u);
    std::vector<std::uint32_t> segments;
    j.for_each_attempt("run-1", [&](journal_attempt& a) {
        segments.push_back(a.segment);
        return true;
    });
    BOOST_TEST(segments == (std::vector<std::uint32_t>{0, 1}), boost::test_tools::per_element());
    BOOST_TEST(j.list_runs(1)->at(0).state == journal_run_state::succeeded);

    // A second claim while this process owns it and it runs: refused.
    writer_env again(open_or_fail(path, journal_access::write));
    BOOST_TEST_REQUIRE(!again.claim("run-1", fake_owner(999999998), {}).has_value());
    writer_env third(open_or_fail(path, journal_access::write));
    auto e = third.claim("run-1", this_process_owner(), alive_pids({999999998}));
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->code == journal_errc::run_live);
}

// Tasks a segment left unstarted are one row per range (docs/JOURNAL.md, "unstarted"), and
// every reader reports them as if each had a final of its own: in plan order among the
// rows, by index, in the counts. A later segment's row of a task wins over the range; a later
// segment's ranges replace the earlier ones and the finals they cover.
BOOST_AUTO_TEST_CASE(unstarted_ranges_read_as_a_final_each) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    task_result cancelled;
    cancelled.state = task_state::cancelled;
    cancelled.error = task_error{error_code::run_cancelled, "not started: the run was cancelled"};
    const std::uint32_t n = 10;
    struct seen {
        std::uint32_t index;
        std::string id;
        task_state state;
        std::uint32_t segment;
    };
    auto read_all = [&](journal& j, std::uint32_t first, std::uint32_t end) {
        std::vector<seen> out;
        auto e = j.for_each_result("run-1", true, first, end, [&](journal_task_result& r) {
            BOOST_TEST(stdout_of(r.result).empty());
            out.push_back({r.task_index, r.task_id, r.result.state, r.segment});
            return true;
        });
        BOOST_TEST_REQUIRE(!e.has_value(), (e ? e->message : ""));
        return out;
    };
    auto states = [](const std::vector<seen>& v) {
        std::string s;
        for (const auto& x : v) s += std::to_string(x.index) + ":" + std::string(to_string(x.state)) + " ";
        return s;
    };
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-1", n, fake_owner(999999999)));
        for (std::uint32_t i = 0; i < 3; ++i)
            env.writer->record_final(make_final(i, make_result(task_state::succeeded, ""), {}));
        env.writer->record_final(make_final(5, make_result(task_state::failed, ""), {}));
        env.writer->record_unstarted(unstarted_tasks{{{3, 5}, {6, n}}, cancelled});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST(count_rows(path, "results") == 4, "no row per unstarted task");
    BOOST_TEST(count_rows(path, "unstarted") == 2);
    {
        journal j = open_or_fail(path, journal_access::read);
        auto all = read_all(j, 0, n);
        BOOST_TEST(states(all) ==
                   "0:succeeded 1:succeeded 2:succeeded 3:cancelled 4:cancelled 5:failed "
                   "6:cancelled 7:cancelled 8:cancelled 9:cancelled ");
        BOOST_TEST(all[3].id.empty(), "the journal keeps no id per unstarted task");
        BOOST_TEST(all[2].id == task_id(2));
        BOOST_TEST(states(read_all(j, 4, 7)) == "4:cancelled 5:failed 6:cancelled ");
        std::uint32_t calls = 0;
        BOOST_TEST(!j.for_each_result("run-1", false, [&](journal_task_result&) { return ++calls < 5; }));
        BOOST_TEST(calls == 5u, "stops inside a range");
        auto one = j.load_result_at("run-1", 7, true);
        BOOST_TEST_REQUIRE((one && one->has_value()));
        BOOST_TEST(((*one)->result.state == task_state::cancelled));
        BOOST_TEST((*one)->result.error->message == "not started: the run was cancelled");
        BOOST_TEST((*one)->result.attempts == 0u);
        auto by_id = j.load_result("run-1", task_id(7), false);
        BOOST_TEST_REQUIRE(by_id.has_value());
        BOOST_TEST(!by_id->has_value(), "by id: rows only");
        auto listed = j.list_runs(1);
        BOOST_TEST_REQUIRE(listed.has_value());
        BOOST_TEST(listed->at(0).recorded == n);
        BOOST_TEST(listed->at(0).tasks_by_state.at("cancelled") == 6u);
        BOOST_TEST(listed->at(0).tasks_by_state.at("succeeded") == 3u);
    }
    {
        // A resume: 4 runs (its row wins over the range), 3 and 5..9 are left unstarted again;
        // 0..2 are reused. The earlier ranges go, and so does 5's earlier final.
        writer_env env(open_or_fail(path, journal_access::write));
        BOOST_TEST_REQUIRE(!env.claim("run-1", this_process_owner(), owner_alive_here).has_value());
        env.writer->record_final(make_final(4, make_result(task_state::succeeded, ""), {}));
        env.writer->record_unstarted(unstarted_tasks{{{3, 4}, {5, n}}, cancelled});
        env.writer->record_run_end(journal_run_end{journal_run_state::cancelled, 1, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    BOOST_TEST(count_rows(path, "results") == 4, "5's final of segment 0 was replaced");
    BOOST_TEST(count_rows(path, "unstarted", "segment = 1") == 2);
    BOOST_TEST(count_rows(path, "unstarted") == 2, "segment 0's ranges are gone");
    {
        journal j = open_or_fail(path, journal_access::read);
        auto all = read_all(j, 0, n);
        BOOST_TEST(states(all) ==
                   "0:succeeded 1:succeeded 2:succeeded 3:cancelled 4:succeeded 5:cancelled "
                   "6:cancelled 7:cancelled 8:cancelled 9:cancelled ");
        BOOST_TEST(all[5].segment == 1u);
        auto listed = j.list_runs(1);
        BOOST_TEST(listed->at(0).tasks_by_state.at("cancelled") == 6u, "counted when the run ended");
        BOOST_TEST(listed->at(0).tasks_by_state.at("succeeded") == 4u);
        BOOST_TEST(listed->at(0).tasks_by_state.count("failed") == 0u);
    }
    {
        // Another resume runs everything left: its rows hide the ranges it leaves behind.
        writer_env env(open_or_fail(path, journal_access::write));
        BOOST_TEST_REQUIRE(!env.claim("run-1", this_process_owner(), owner_alive_here).has_value());
        for (std::uint32_t i : {3u, 5u, 6u, 7u, 8u, 9u})
            env.writer->record_final(make_final(i, make_result(task_state::succeeded, ""), {}));
        env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 1, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    {
        journal j = open_or_fail(path, journal_access::read);
        auto all = read_all(j, 0, n);
        BOOST_TEST(all.size() == n);
        BOOST_TEST(std::all_of(all.begin(), all.end(),
                               [](const seen& x) { return x.state == task_state::succeeded; }));
        auto listed = j.list_runs(1);
        BOOST_TEST(listed->at(0).recorded == n);
        BOOST_TEST(listed->at(0).tasks_by_state.at("succeeded") == n);
        BOOST_TEST(listed->at(0).tasks_by_state.size() == 1u);
    }
    // gc removes a run's ranges with it.
    journal w = open_or_fail(path, journal_access::write);
    BOOST_TEST_REQUIRE(w.gc(0, owner_alive_here).has_value());
    BOOST_TEST(count_rows(path, "unstarted") == 0);
}

BOOST_AUTO_TEST_CASE(dead_runs_and_their_handles) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-dead", 3, fake_owner(999999999)));
        for (std::uint32_t i = 0; i < 3; ++i) {
            env.writer->record_intent(make_intent(i));
            env.writer->record_handle(
                attempt_handle{i, 1, 100 + i, 5, "/cg/" + std::to_string(i), "", "", ""});
        }
        env.writer->record_end(
            make_end(0, 1, make_result(task_state::succeeded, "")));  // ended: nothing left
        auto bad = make_end(2, 1, make_result(task_state::failed, ""));
        bad.cleanup_failed = true;
        env.writer->record_end(bad);
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    {
        writer_env env(open_or_fail(path, journal_access::write));
        env.writer->record_run(make_run("run-mine", 1));  // this process: alive
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    journal j = open_or_fail(path, journal_access::write);
    auto dead = j.dead_runs(owner_alive_here);
    BOOST_TEST_REQUIRE(dead.has_value());
    BOOST_TEST_REQUIRE(dead->size() == 1u);
    BOOST_TEST((*dead)[0].run_id == "run-dead");
    BOOST_TEST_REQUIRE((*dead)[0].handles.size() == 2u);
    BOOST_TEST((*dead)[0].handles[0].cgroup == "/cg/1");
    BOOST_TEST((*dead)[0].handles[1].cgroup == "/cg/2");
    BOOST_TEST(!j.mark_interrupted("run-dead", fake_owner(999999999)).has_value());
    BOOST_TEST(j.dead_runs(owner_alive_here)->empty());
    BOOST_TEST(j.load_run("run-dead")->state == journal_run_state::interrupted);
}

BOOST_AUTO_TEST_CASE(gc_keeps_the_newest_runs) {
    temp_dir tmp;
    std::string path = tmp.file("journal.db");
    for (int k = 0; k < 5; ++k) {
        writer_env env(open_or_fail(path, journal_access::write));
        // run-0 stays "running" under a live owner: never removed, however old.
        env.writer->record_run(
            make_run("run-" + std::to_string(k), 20, k == 0 ? fake_owner(7777) : this_process_owner()));
        for (std::uint32_t i = 0; i < 20; ++i) {
            env.writer->record_intent(make_intent(i));
            std::size_t n = i % 2 ? 200 * 1024 : 2000;  // stream files and inline streams
            auto r = make_result(task_state::succeeded, pattern(i, k, n));
            env.writer->record_end(make_end(i, 1, r));
            env.writer->record_final(make_final(i, r, 1));
        }
        if (k != 0)
            env.writer->record_run_end(journal_run_end{journal_run_state::succeeded, 1, std::nullopt});
        BOOST_TEST_REQUIRE(!env.close().has_value());
    }
    // A file left by a writer that died before its commit.
    std::string orphan = path + "-streams/4/9-99";  // in run-3's folder (key 4), which stays
    write_file(orphan, "left behind");
    BOOST_TEST_REQUIRE(std::filesystem::exists(path + "-streams/2"));

    journal j = open_or_fail(path, journal_access::write);
    auto report = j.gc(2, alive_pids({7777}));
    BOOST_TEST_REQUIRE(report.has_value(), why(report));
    BOOST_TEST(report->runs_removed == 2u);
    BOOST_TEST(report->runs_kept == 2u);
    BOOST_TEST(report->live_runs_kept == 1u);
    BOOST_TEST(report->orphan_streams_removed == 1u);
    BOOST_TEST(report->bytes_after < report->bytes_before * 7 / 10, "two of five runs' bytes are gone");
    auto runs = j.list_runs(10);
    std::set<std::string> left;
    for (const auto& r : *runs) left.insert(r.run_id);
    BOOST_TEST((left == std::set<std::string>{"run-0", "run-3", "run-4"}));
    BOOST_TEST(!std::filesystem::exists(path + "-streams/2"));
    BOOST_TEST(!std::filesystem::exists(path + "-streams/3"));  // run-2 was the third run: key 3
    BOOST_TEST(!std::filesystem::exists(orphan));
    for (const char* table : {"attempts", "results"})
        BOOST_TEST(count_rows(path, table, "run_seq IN (2, 3)") == 0, table);
    BOOST_TEST(count_rows(path, "results") == 60);
    BOOST_TEST(count_rows(path, "streams") == 30, "the inline streams of the kept runs' ends");
    BOOST_TEST(count_rows(path, "streams",
                          "stream_id NOT IN (SELECT stdout_blob FROM attempts WHERE stdout_blob IS NOT NULL "
                          "UNION SELECT stderr_blob FROM attempts WHERE stderr_blob IS NOT NULL)") == 0);
    BOOST_TEST(!j.verify().has_value(), "what is kept is whole");
    BOOST_TEST(count_rows(path, "pragma_freelist_count", "freelist_count > 0") == 0,
               "free pages were returned");
}

BOOST_AUTO_TEST_SUITE_END()
