// prepare_resume() and async_resume() against a fake runner and a real journal: what is
// reused, what runs again, what refuses, and that a resume keeps the run id.
#include <agentctl/resume.hpp>
#include <agentctl/runner.hpp>

#include <agentctl/parse.hpp>
#include <agentctl/wire.hpp>

#include "../support/child_ids.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace asio = boost::asio;
using namespace agentctl;

namespace {

// `d` alone (first: it runs before b fails and stops the run); a -> b -> c.
const char* workflow = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: chain}
spec:
  policy: {processAllowlist: ["true"], approval: never}
  runtime: {maxConcurrency: 4}
  actions:
    t: {kind: builtin.shell.exec, command: /bin/true}
  tasks:
    - {id: d, uses: action:t}
    - {id: a, uses: action:t}
    - {id: b, uses: action:t, needs: [a]}
    - {id: c, uses: action:t, needs: [b]}
)";

/// Succeeds (stdout "out-ID") unless the task id is in `failing`; `hanging` never ends unless
/// cancelled (its process started: a handle is reported); `waiting` neither, and never starts
/// a process (a spawn still queued when the run is cancelled).
class scripted_runner final : public task_runner {
public:
    std::set<std::string> failing, hanging, waiting;
    std::map<std::string, int> ran;
    std::map<std::string, std::uint32_t> attempt_numbers;
    std::function<void()> all_hanging;  ///< called once every hanging task has started
    std::size_t hung = 0;
    asio::any_io_executor ex;  ///< the run's

    void async_run_impl(const attempt_request& request,
                        asio::any_completion_handler<void(task_result)> handler) override {
        std::string id = request.task_id;
        ++ran[id];
        attempt_numbers[id] = request.attempt;
        if (hanging.count(id) || waiting.count(id)) {
            if (hanging.count(id) && request.on_started) {
                attempt_started started;
                started.pid = 1 << 22;  // above pid_max's default: no process of this host
                request.on_started(started);
            }
            if (++hung == hanging.size() + waiting.size() && all_hanging) all_hanging();
            auto slot = asio::get_associated_cancellation_slot(handler);
            auto h = std::make_shared<asio::any_completion_handler<void(task_result)>>(std::move(handler));
            slot.assign([h, ex = ex](asio::cancellation_type) {
                task_result r;
                r.state = task_state::cancelled;
                r.attempts = 1;
                r.isolation = "process";
                r.error = task_error{error_code::cancelled, "cancelled"};
                asio::post(ex, [h, r]() mutable { std::move (*h)(std::move(r)); });
            });
            return;
        }
        task_result r;
        r.attempts = 1;
        r.isolation = "process";
        r.stdout_text = "out-" + id;
        if (failing.count(id)) {
            r.state = task_state::failed;
            r.exit_code = 1;
            r.error = task_error{error_code::exit_nonzero, "exited with status 1"};
        } else {
            r.state = task_state::succeeded;
            r.exit_code = 0;
        }
        asio::post(ex, [h = std::move(handler), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
    }
};

struct fixture {
    std::string dir, db_path;
    plan compiled;
    std::string source;

    fixture() {
        char tmpl[] = "/tmp/agentctl-resume-XXXXXX";
        BOOST_REQUIRE(::mkdtemp(tmpl));
        dir = tmpl;
        db_path = dir + "/journal.db";
        use(workflow);
    }
    /// Runs `text` from now on.
    void use(std::string text) {
        source = std::move(text);
        parse_result parsed = parse_workflow(source, "chain.yaml");
        BOOST_REQUIRE(parsed.document);
        compile_result c = compile(*parsed.document);
        BOOST_REQUIRE(c.compiled);
        compiled = std::move(*c.compiled);
    }
    ~fixture() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }

    journal open_db() {
        auto db = journal::open(db_path, journal_access::write);
        BOOST_REQUIRE_MESSAGE(db, (db ? "" : db.error().message));
        return std::move(*db);
    }

    /// A new run, recorded; with `cancel_soon`, cancelled once the hanging tasks run.
    run_report first_run(scripted_runner& runner, bool cancel_soon = false) {
        asio::io_context io;
        asio::thread_pool worker(1);
        journal_writer writer(io.get_executor(), worker.get_executor(), open_db());
        runner.ex = io.get_executor();
        run_settings o;
        run_collaborators with;
        with.runner = &runner;
        o.base_dir = dir;
        with.journal = &writer;
        o.record.workflow_path = "chain.yaml";
        o.record.workflow_source = source;
        o.record.base_dir = dir;
        asio::cancellation_signal cancel;
        std::optional<run_report> report;
        async_run(io.get_executor(), compiled, o, with,
                  asio::bind_cancellation_slot(cancel.slot(), [&](run_report r) { report = std::move(r); }));
        if (cancel_soon)
            runner.all_hanging = [&] {
                asio::post(io, [&] { cancel.emit(asio::cancellation_type::total); });
            };
        io.run();
        io.restart();
        writer.async_close([](std::optional<journal_error>) {});
        io.run();
        BOOST_REQUIRE(report);
        return std::move(*report);
    }

    run_report resume(const resume_plan& rp, scripted_runner& runner) {
        asio::io_context io;
        asio::thread_pool worker(1);
        journal_writer writer(io.get_executor(), worker.get_executor(), open_db());
        runner.ex = io.get_executor();
        run_settings o;
        run_collaborators with;
        with.runner = &runner;
        o.base_dir = dir;
        with.journal = &writer;
        std::optional<run_report> report;
        async_resume(io.get_executor(), rp, o, with, [&](run_report r) { report = std::move(r); });
        io.run();
        io.restart();
        writer.async_close([](std::optional<journal_error>) {});
        io.run();
        BOOST_REQUIRE(report);
        return std::move(*report);
    }
};

bool never_alive(const journal_owner&) {
    return false;
}

std::string actions(const resume_plan& rp) {
    std::string s;
    for (std::size_t i = 0; i < rp.decisions.size(); ++i)
        s += rp.compiled->task_id(static_cast<std::uint32_t>(i)) + "=" +
             std::string(to_string(rp.decisions[i].action)) + " ";
    return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resume)

BOOST_FIXTURE_TEST_CASE(succeeded_tasks_are_reused_failed_ones_kept_or_retried, fixture) {
    scripted_runner first;
    first.failing = {"b"};
    run_report r1 = first_run(first);
    BOOST_TEST((r1.state == run_state::failed));
    journal db = open_db();

    resume_plan keep = prepare_resume(db, r1.run_id, {}, never_alive);
    BOOST_TEST(keep.ok(), keep.message);
    BOOST_TEST(actions(keep) == "d=reuse a=reuse b=keep_failed c=run ");

    resume_plan retry = prepare_resume(db, r1.run_id, {true, false}, never_alive);
    BOOST_TEST(actions(retry) == "d=reuse a=reuse b=run c=run ");
    BOOST_TEST(retry.decisions[3].reason == "never started (skipped)");
    BOOST_TEST(retry.state.attempts_before[2] == 1u);
    BOOST_TEST((retry.state.reuse[1]->state == task_state::succeeded));
    BOOST_TEST_REQUIRE(retry.state.whole.count(1) == 1u,
                       "a declared task's result is kept for the run's output");
    BOOST_TEST(retry.state.whole.at(1).streams_released,
               "a reused result without a later reader keeps no streams");

    scripted_runner second;
    run_report r2 = resume(retry, second);
    BOOST_TEST(r2.run_id == r1.run_id);
    BOOST_TEST(r2.resumed);
    BOOST_TEST((r2.state == run_state::succeeded));
    BOOST_TEST((second.ran == std::map<std::string, int>{{"b", 1}, {"c", 1}}));
    BOOST_TEST(second.attempt_numbers["b"] == 2u, "attempts number on from the recorded ones");
    BOOST_TEST(r2.tasks.empty(), "with a journal the report keeps no results");
    BOOST_TEST(r2.outcomes[1].reused);
    BOOST_TEST(!r2.outcomes[1].executed);
    BOOST_TEST(!r2.outcomes[2].reused);
    BOOST_TEST(r2.outcomes[2].executed);

    // Everything succeeded now: a third resume reuses all and runs nothing.
    resume_plan all = prepare_resume(db, r1.run_id, {true, true}, never_alive);
    BOOST_TEST(actions(all) == "d=reuse a=reuse b=reuse c=reuse ");
    auto c = db.load_result(r1.run_id, "c", true);
    BOOST_REQUIRE((c && *c));
    BOOST_TEST(stdout_of((*c)->result) == "out-c");
}

BOOST_FIXTURE_TEST_CASE(uncertain_attempts_refuse_unless_rerun_and_live_runs_are_refused, fixture) {
    scripted_runner first;
    first.hanging = {"a", "d"};
    run_report r1 = first_run(first, /*cancel_soon=*/true);
    BOOST_TEST((r1.state == run_state::cancelled));
    journal db = open_db();

    resume_plan refused = prepare_resume(db, r1.run_id, {}, never_alive);
    BOOST_TEST((refused.status == exit_status::policy));
    BOOST_TEST(refused.uncertain.size() == 2u);
    BOOST_TEST(refused.message.find("a: attempt 1 cancelled") != std::string::npos, refused.message);
    BOOST_TEST(actions(refused) == "d=uncertain a=uncertain b=run c=run ");

    resume_plan live =
        prepare_resume(db, r1.run_id, {false, true}, [](const journal_owner&) { return true; });
    // The run ended (cancelled): its owner's liveness does not matter any more.
    BOOST_TEST(live.ok(), live.message);

    resume_plan rerun = prepare_resume(db, r1.run_id, {false, true}, never_alive);
    BOOST_TEST(rerun.ok(), rerun.message);
    BOOST_TEST(actions(rerun) == "d=rerun a=rerun b=run c=run ");
    scripted_runner second;
    run_report r2 = resume(rerun, second);
    BOOST_TEST((r2.state == run_state::succeeded));
    BOOST_TEST(second.ran.size() == 4u);

    // A run recorded as running whose owner is alive is never resumed.
    journal_owner me = this_process_owner();
    auto claimed = db.claim_run(r1.run_id, me, never_alive);
    BOOST_REQUIRE(claimed);
    resume_plan twice = prepare_resume(db, r1.run_id, {false, true}, owner_alive_here);
    BOOST_TEST((twice.status == exit_status::persistence));
    BOOST_TEST((twice.journal_code == journal_errc::run_live));

    resume_plan unknown = prepare_resume(db, "run-nope", {}, never_alive);
    BOOST_TEST((unknown.journal_code == journal_errc::unknown_run));
}

// The tasks a cancellation left unstarted are one journal record per stretch (docs/JOURNAL.md,
// "unstarted"), and a resume decides on them as on tasks that never started: it runs them,
// never calls them uncertain, and its own finals take their place.
BOOST_FIXTURE_TEST_CASE(a_resume_runs_the_tasks_a_cancellation_left_unstarted, fixture) {
    use(R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fan}
spec:
  policy: {processAllowlist: ["true"], approval: never}
  runtime: {maxConcurrency: 2}
  actions:
    t: {kind: builtin.shell.exec, command: /bin/true}
  tasks:
    - {id: each, uses: action:t, foreach: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}}
    - {id: after, uses: action:t, needs: [each]}
)");
    scripted_runner first;
    first.hanging = {test_support::full_id(compiled, "each--0000"),
                     test_support::full_id(compiled, "each--0001")};
    run_report r1 = first_run(first, /*cancel_soon=*/true);
    BOOST_TEST((r1.state == run_state::cancelled));
    BOOST_TEST(first.ran.size() == 2u);
    journal db = open_db();
    std::size_t results = 0, unnamed = 0;
    BOOST_TEST(!db.for_each_result(r1.run_id, false, [&](journal_task_result& r) {
        ++results;
        unnamed += r.task_id.empty();
        return true;
    }));
    BOOST_TEST(results == compiled.size());
    BOOST_TEST(unnamed == 11u, "10 children and `after` are in the ranges");
    auto listed = db.list_runs(1);
    BOOST_TEST_REQUIRE(listed.has_value());
    BOOST_TEST(listed->at(0).tasks_by_state.at("cancelled") == compiled.size() - 1u,
               "the foreach parent is not counted");

    resume_plan rp = prepare_resume(db, r1.run_id, {false, true}, never_alive);
    BOOST_TEST_REQUIRE(rp.ok(), rp.message);
    BOOST_TEST(rp.uncertain.size() == 2u, "the two that ran, not the ones that never started");
    const auto after = *compiled.find("after");
    BOOST_TEST((rp.decisions[after].action == resume_action::run));
    BOOST_TEST(rp.decisions[after].reason == "never started (cancelled)");
    BOOST_TEST(rp.decisions[5].reason == "never started (cancelled)");
    scripted_runner second;
    run_report r2 = resume(rp, second);
    BOOST_TEST((r2.state == run_state::succeeded));
    BOOST_TEST(second.ran.size() == 13u);
    listed = db.list_runs(1);
    BOOST_TEST(listed->at(0).tasks_by_state.at("succeeded") == compiled.size() - 1u,
               "the foreach parent is not counted");
    BOOST_TEST(listed->at(0).tasks_by_state.size() == 1u);
}

// A Ctrl-C that came before a task's process was spawned left no effect: that task is not
// uncertain, it just runs again; the one whose process had started is.
BOOST_FIXTURE_TEST_CASE(a_task_cancelled_before_its_process_started_is_not_uncertain, fixture) {
    scripted_runner first;
    first.hanging = {"a"};
    first.waiting = {"d"};
    run_report r1 = first_run(first, /*cancel_soon=*/true);
    BOOST_TEST((r1.state == run_state::cancelled));
    journal db = open_db();
    resume_plan refused = prepare_resume(db, r1.run_id, {}, never_alive);
    BOOST_TEST(refused.uncertain.size() == 1u);
    BOOST_TEST(actions(refused) == "d=run a=uncertain b=run c=run ");
    BOOST_TEST(refused.decisions[0].reason == "did not finish (attempt 1 cancelled)");
}

BOOST_AUTO_TEST_SUITE_END()

// With a journal, results leave memory once recorded, unless something later in the run reads
// them; an aggregate nothing reads is recorded without its items, which reports read back
// from its children's results.
BOOST_AUTO_TEST_SUITE(released_outputs)

BOOST_FIXTURE_TEST_CASE(an_unread_aggregate_is_recorded_without_items_and_a_read_one_keeps_them, fixture) {
    use(R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fan}
spec:
  policy: {processAllowlist: ["true"], approval: never}
  runtime: {maxConcurrency: 4}
  actions:
    t: {kind: builtin.shell.exec, command: /bin/true}
  tasks:
    - {id: each, uses: action:t, foreach: {items: [1, 2, 3]}}
    - {id: kept, uses: action:t, foreach: {items: [1, 2]}}
  outputs: {seen: "${{ tasks.kept.output.items }}"}
)");
    auto each = compiled.find("each"), kept = compiled.find("kept");
    BOOST_REQUIRE(each);
    BOOST_REQUIRE(kept);

    scripted_runner runner;
    run_report r = first_run(runner);
    BOOST_TEST((r.state == run_state::succeeded));
    BOOST_TEST(r.tasks.empty(), "with a journal the report keeps no results");
    BOOST_REQUIRE(r.outcomes.size() == compiled.size());
    for (const auto& o : r.outcomes) BOOST_TEST((o.state == task_state::succeeded));
    BOOST_TEST(r.output.at("seen").as_array().size() == 2u, "spec.outputs read the kept items");

    journal db = open_db();
    auto stored = db.load_result(r.run_id, "each", false);
    BOOST_REQUIRE_MESSAGE(stored, (stored ? "" : stored.error().message));
    BOOST_REQUIRE(*stored);
    BOOST_TEST((*stored)->result.output_released, "recorded without its items");
    BOOST_TEST((*stored)->result.output.is_null());
    auto whole = db.load_result(r.run_id, "kept", false);
    BOOST_REQUIRE((whole && *whole));
    BOOST_TEST(!(*whole)->result.output_released);
    BOOST_TEST((*whole)->result.output.at("items").as_array().size() == 2u);

    // A report reads the items back from the children's results.
    journal_results results(db, r.run_id);
    string_sink doc;
    {
        json_writer w(doc);
        write_task_result(w, compiled, *each, (*stored)->result, &results);
    }
    BOOST_TEST(!results.error);
    boost::json::value v = boost::json::parse(doc.text);
    const auto& items = v.at("output").at("items").as_array();
    BOOST_TEST_REQUIRE(items.size() == 3u, doc.text);
    BOOST_TEST(items[2].at("taskId").as_string() == test_support::full_id(compiled, "each--0002"));
    BOOST_TEST(items[2].at("index").as_int64() == 2);
    BOOST_TEST(items[2].at("state").as_string() == "succeeded");

    // A resume takes the children over in a few bytes each: whole only what spec.outputs reads.
    resume_plan rp = prepare_resume(db, r.run_id, {}, never_alive);
    BOOST_TEST_REQUIRE(rp.ok(), rp.message);
    BOOST_TEST(rp.state.whole.size() == 2u);
    for (auto id : {"kept--0000", "kept--0001"})
        BOOST_TEST(rp.state.whole.count(*compiled.find(test_support::full_id(compiled, id))) == 1u, id);
    scripted_runner again;
    run_report r2 = resume(rp, again);
    BOOST_TEST((r2.state == run_state::succeeded));
    BOOST_TEST(again.ran.empty());
    BOOST_TEST(r2.output.at("seen").as_array().size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
