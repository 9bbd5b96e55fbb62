// Scheduler logic against a fake runner: no processes.
#include <agentctl/engine.hpp>
#include <agentctl/events.hpp>
#include <agentctl/runner.hpp>

#include <agentctl/parse.hpp>
#include "../support/child_ids.hpp"
#include "../support/deadline.hpp"
#include "../support/error_text.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace agentctl;
using namespace std::chrono_literals;

namespace agentctl {
std::ostream& operator<<(std::ostream& os, task_state s) { return os << to_string(s); }
std::ostream& operator<<(std::ostream& os, run_state s) { return os << to_string(s); }
}  // namespace agentctl

namespace {

plan compile_text(const std::string& yaml, compile_options options = {}) {
    parse_result parsed = parse_workflow(yaml, "test.yaml");
    for (const auto& d : parsed.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(parsed.document);
    compile_result compiled = compile(*parsed.document, options);
    for (const auto& d : compiled.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(compiled.compiled);
    return std::move(*compiled.compiled);
}

/// What the fake does for one task id.
struct behaviour {
    std::chrono::milliseconds delay{1};
    std::vector<task_state> states = {task_state::succeeded};  ///< per attempt; the last repeats
    int exit_code = 0;
    bool hang = false;  ///< never finishes unless cancelled
};

/// A runner that completes after a timer, honours cancellation and records what it saw.
class fake_runner final : public task_runner {
public:
    explicit fake_runner(asio::io_context& io) : io_(io) {}

    void async_run_impl(const attempt_request& request,
                        asio::any_completion_handler<void(task_result)> handler) override {
        std::string id = request.task_id;
        behaviour b = lookup(id);
        dispatched.push_back(id);
        if (on_dispatch) on_dispatch();
        ++attempts[id];
        ++running;
        peak = std::max(peak, running);
        args[id] = request.args;
        with[id] = request.with;

        auto timer = std::make_shared<asio::steady_timer>(io_, b.hang ? 1h : b.delay);
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto done = std::make_shared<bool>(false);
        auto h = std::make_shared<asio::any_completion_handler<void(task_result)>>(std::move(handler));
        auto finish = [this, id, b, h, done, timer](task_result r) {
            if (*done) return;
            *done = true;
            --running;
            auto s = asio::get_associated_cancellation_slot(*h);
            if (s.is_connected()) s.clear();
            ++completions[id];
            std::move (*h)(std::move(r));
        };
        if (slot.is_connected())
            slot.assign([this, id, finish, timer](asio::cancellation_type type) {
                cancel_types[id].push_back(type);
                timer->cancel();  // nothing may keep the io_context busy after completion
                // Completes on the next turn, not here: completing clears the slot, which
                // destroys this handler (and the copy of `finish` it holds) while it runs.
                asio::post(io_, [finish] {
                    task_result r;
                    r.state = task_state::cancelled;
                    finish(std::move(r));
                });
            });
        std::uint32_t attempt = request.attempt;
        timer->async_wait([this, id, b, attempt, finish](boost::system::error_code ec) {
            if (ec) return;
            task_result r;
            std::size_t i = std::min<std::size_t>(attempt - 1, b.states.size() - 1);
            r.state = b.states[i];
            if (r.state == task_state::failed) r.exit_code = b.exit_code;
            if (r.state == task_state::succeeded) r.exit_code = 0;
            r.output = json::object{{"exitCode", r.exit_code ? json::value(*r.exit_code) : json::value(nullptr)},
                                    {"stdout", "out-" + id}};
            r.isolation = "process";
            finish(std::move(r));
        });
    }

    behaviour lookup(const std::string& id) const {
        auto it = behaviours.find(id);
        if (it != behaviours.end()) return it->second;
        auto dash = id.find("--");
        if (dash != std::string::npos) {
            it = behaviours.find(id.substr(0, dash));
            if (it != behaviours.end()) return it->second;
        }
        return {};
    }

    asio::io_context& io_;
    std::map<std::string, behaviour> behaviours;
    std::vector<std::string> dispatched;
    std::map<std::string, int> attempts, completions;
    std::map<std::string, std::vector<std::string>> args;
    std::map<std::string, json::value> with;
    std::map<std::string, std::vector<asio::cancellation_type>> cancel_types;
    int running = 0, peak = 0;
    std::function<void()> on_dispatch;  ///< called in each dispatch, after it is recorded
};

/// Counts events, checks each task finishes exactly once (a tasks_not_started stretch
/// finishes each of its tasks).
struct counting_sink final : event_sink {
    void on_event(const run_event& e) override {
        if (e.kind == run_event::kind_t::task_finished) {
            ++finished[e.task_index];
        } else if (e.kind == run_event::kind_t::tasks_not_started) {
            ++stretches;
            each_task_finished(e, [&](const run_event& one) { ++finished[one.task_index]; });
        } else {
            ++started;
        }
    }
    std::map<std::uint32_t, int> finished;
    int started = 0;
    int stretches = 0;
};

/// Runs a plan with a hard deadline: a hang fails the test instead of stalling CI.
run_report run_plan(asio::io_context& io, const plan& p, run_settings settings, run_collaborators with,
                    std::function<void(asio::cancellation_signal&)> while_running = {}) {
    std::optional<run_report> report;
    asio::cancellation_signal cancel;
    async_run(io.get_executor(), p, std::move(settings), with,
              asio::bind_cancellation_slot(cancel.slot(), [&](run_report r) { report = std::move(r); }));
    if (while_running) while_running(cancel);
    bool done = agentctl::test::run_with_deadline(io, 20s, [&] { return report.has_value(); });
    BOOST_REQUIRE_MESSAGE(done, "the run did not complete within 20 s");
    return std::move(*report);
}

const task_result& result_of(const plan& p, const run_report& r, std::string_view id) {
    auto i = p.find(id);
    BOOST_REQUIRE(i.has_value());
    return r.tasks[*i];
}

const char* header = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: t}
spec:
  policy: {processAllowlist: ["true"], approval: never}
  actions:
    run: {kind: builtin.shell.exec, command: /bin/true}
    templated: {kind: builtin.shell.exec, command: /bin/true, args: ["${{ with.x }}", "${{ vars.item }}"]}
    assign: {kind: builtin.assign}
)";

// Runs `p` against `fake`, `jobs` at a time, and checks what such a run must show: every task
// that runs is dispatched once and in plan order, exactly `jobs` run at once at the peak, and
// every task finishes once.
run_report run_in_plan_order(asio::io_context& io, const plan& p, fake_runner& fake, int jobs) {
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = jobs;
    counting_sink sink;
    with.events = &sink;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST(r.exit_code() == 0);
    BOOST_TEST(fake.peak == jobs);
    std::vector<std::string> runnable;
    for (std::uint32_t i = 0; i < p.size(); ++i)
        if (p.node(i).kind != plan_task::kind_t::aggregate) runnable.push_back(p.task_id(i));
    BOOST_TEST(fake.dispatched == runnable);
    BOOST_TEST(sink.finished.size() == p.size());
    for (auto& [idx, n] : sink.finished) BOOST_TEST(n == 1);
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(independent_tasks_start_in_plan_order_and_jobs_bound_holds) {
    std::string yaml = std::string(header) + "  tasks:\n";
    for (int i = 0; i < 60; ++i) yaml += "    - {id: t" + std::to_string(i) + ", uses: action:run}\n";
    plan p = compile_text(yaml);
    asio::io_context io;
    fake_runner fake(io);
    run_in_plan_order(io, p, fake, 7);
    BOOST_REQUIRE(fake.dispatched.size() == 60u);
    for (int i = 0; i < 60; ++i) BOOST_TEST(fake.dispatched[i] == "t" + std::to_string(i));
}

// A thousand children at --jobs 1000 are not all started in one handler: the loop lets other
// handlers in every few starts (docs/DESIGN.md, "Starting a large batch"), so that the first
// tasks' spawns and commits go on meanwhile. A handler posted at the first dispatch runs
// before the batch is through.
BOOST_AUTO_TEST_CASE(a_large_batch_of_starts_lets_other_handlers_run_between_them) {
    std::string items;
    for (int i = 0; i < 1000; ++i) items += (i ? ", " : "") + std::to_string(i);
    plan p =
        compile_text(std::string(header) + "  tasks:\n    - {id: many, uses: action:run, foreach: {items: [" +
                     items + "], maxItems: 1000}}\n");
    asio::io_context io;
    fake_runner fake(io);
    std::optional<std::size_t> dispatched_when_it_ran;
    fake.on_dispatch = [&] {
        if (fake.dispatched.size() == 1)
            asio::post(io, [&] { dispatched_when_it_ran = fake.dispatched.size(); });
    };
    // Not run_in_plan_order(): on a slow machine some task may end before the last starts, so
    // the peak is not asserted; what the handler saw does not depend on time.
    run_settings o;
    o.jobs = 1000;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST(fake.dispatched.size() == 1000u);
    BOOST_REQUIRE(dispatched_when_it_ran.has_value());
    BOOST_TEST(*dispatched_when_it_ran <= 32u);
}

// Children become ready one at a time (the plan stores none): the order is still plan order,
// the jobs bound still holds, an empty expansion still completes, and what needs an
// expanded task waits for all of its children.
BOOST_AUTO_TEST_CASE(expanded_tasks_start_in_plan_order_beside_singles) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: first, uses: action:run, foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}}
    - {id: single, uses: action:run}
    - {id: none, uses: action:run, foreach: {items: []}}
    - {id: second, uses: action:run, foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8, 9]}}
    - {id: after, uses: action:run, needs: [first, none]}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_report r = run_in_plan_order(io, p, fake, 5);
    // `after` waits for the last child of `first`: it starts after every one of them.
    auto at = [&](const std::string& id) {
        return std::find(fake.dispatched.begin(), fake.dispatched.end(), id) - fake.dispatched.begin();
    };
    BOOST_TEST(at("after") > at(test_support::full_id(p, "first--0011")));
    BOOST_TEST(r.tasks.size() == p.size());
    // Nothing reads the aggregates' outputs (`needs` only orders): even without a journal they
    // keep no items, which are their children's results, whole in the report.
    for (const char* id : {"first", "none"}) {
        BOOST_TEST(result_of(p, r, id).output_released, id);
        BOOST_TEST(result_of(p, r, id).output.is_null(), id);
        BOOST_TEST(r.output.at(id).is_null(), id);
    }
    BOOST_TEST((result_of(p, r, test_support::full_id(p, "first--0011")).state == task_state::succeeded));
}

BOOST_AUTO_TEST_CASE(dependencies_run_after_their_needs) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: c, uses: action:run, needs: [a, b]}
    - {id: a, uses: action:run}
    - {id: b, uses: action:run, needs: [a]}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 4;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST((fake.dispatched == std::vector<std::string>{"a", "b", "c"}));
}

BOOST_AUTO_TEST_CASE(failure_stop_awaits_running_siblings_and_starts_nothing_new) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: bad, uses: action:run}
    - {id: slow, uses: action:run}
    - {id: later, uses: action:run}
    - {id: after, uses: action:run, needs: [bad]}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["bad"] = {1ms, {task_state::failed}, 3};
    fake.behaviours["slow"] = {50ms};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 2;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(r.exit_code() == 4);
    BOOST_TEST(result_of(p, r, "bad").state == task_state::failed);
    BOOST_TEST(result_of(p, r, "slow").state == task_state::succeeded);  // awaited and recorded
    BOOST_TEST(result_of(p, r, "later").state == task_state::skipped);
    BOOST_TEST(result_of(p, r, "later").error->code == "run_stopped");
    BOOST_TEST(result_of(p, r, "after").state == task_state::skipped);
    BOOST_TEST(fake.attempts.count("later") == 0u);
}

BOOST_AUTO_TEST_CASE(failure_continue_skips_dependants_and_runs_independent_branches) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: bad, uses: action:run, failure: continue}
    - {id: child, uses: action:run, needs: [bad]}
    - {id: grandchild, uses: action:run, needs: [child]}
    - {id: other, uses: action:run}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["bad"] = {1ms, {task_state::failed}, 1};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 1;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(result_of(p, r, "child").state == task_state::skipped);
    BOOST_TEST(result_of(p, r, "child").error->code == "dependency_not_succeeded");
    BOOST_TEST(result_of(p, r, "grandchild").state == task_state::skipped);
    BOOST_TEST(result_of(p, r, "other").state == task_state::succeeded);
}

BOOST_AUTO_TEST_CASE(keep_going_turns_stop_into_continue) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: bad, uses: action:run}
    - {id: other, uses: action:run}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["bad"] = {1ms, {task_state::failed}, 1};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.keep_going = true;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(result_of(p, r, "other").state == task_state::succeeded);
}

BOOST_AUTO_TEST_CASE(retries_repeat_only_declared_failures) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: spawn, uses: action:run, retry: {maxAttempts: 3}}
    - {id: exit, uses: action:run, retry: {maxAttempts: 3}, failure: continue}
    - {id: exit-opt-in, uses: action:run, retry: {maxAttempts: 3, on: [exit_nonzero], backoffMs: 20}}
    - {id: timeout, uses: action:run, retry: {maxAttempts: 2, on: [timeout]}, failure: continue}
    - {id: protocol, uses: action:run, retry: {maxAttempts: 3, on: [exit_nonzero]}, failure: continue}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["spawn"] = {1ms, {task_state::spawn_failed, task_state::spawn_failed, task_state::succeeded}};
    fake.behaviours["exit"] = {1ms, {task_state::failed}, 2};
    fake.behaviours["exit-opt-in"] = {1ms, {task_state::failed, task_state::succeeded}, 2};
    fake.behaviours["timeout"] = {1ms, {task_state::timed_out}};
    // Failed although it exited 0 (e.g. an extension's bad JSON): not a non-zero exit.
    fake.behaviours["protocol"] = {1ms, {task_state::failed, task_state::succeeded}, 0};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 1;
    auto begun = std::chrono::steady_clock::now();
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(result_of(p, r, "spawn").state == task_state::succeeded);
    BOOST_TEST(result_of(p, r, "spawn").attempts == 3u);
    BOOST_TEST(result_of(p, r, "exit").state == task_state::failed);
    BOOST_TEST(result_of(p, r, "exit").attempts == 1u);
    BOOST_TEST(result_of(p, r, "exit-opt-in").state == task_state::succeeded);
    BOOST_TEST(result_of(p, r, "exit-opt-in").attempts == 2u);
    BOOST_TEST(result_of(p, r, "timeout").attempts == 2u);
    BOOST_TEST(result_of(p, r, "protocol").attempts == 1u);
    BOOST_TEST((std::chrono::steady_clock::now() - begun >= 20ms));  // the backoff was waited
}

// task_expiry (agentctl parallel's --timeout N%): a running attempt ends timed_out, alone, with
// the reason given, and is retried when retry.on has timeout; a task not running is left alone.
BOOST_AUTO_TEST_CASE(an_expired_attempt_times_out_alone_and_is_retried) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: slow, uses: action:run, retry: {maxAttempts: 2, on: [timeout]}, failure: continue}
    - {id: once, uses: action:run, failure: continue}
    - {id: other, uses: action:run}
    - {id: later, uses: action:run, needs: [other]}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["slow"] = {1ms, {}, 0, true};  // every attempt hangs
    fake.behaviours["once"] = {1ms, {}, 0, true};
    fake.behaviours["other"] = {300ms};
    run_settings o;
    o.jobs = 3;
    task_expiry expiry;
    run_collaborators with;
    with.runner = &fake;
    with.expiry = &expiry;
    asio::steady_timer timer(io);
    int rounds = 0;
    std::function<void()> every_20ms = [&] {
        timer.expires_after(20ms);
        timer.async_wait([&](boost::system::error_code ec) {
            if (ec) return;
            for (const char* id : {"slow", "once", "later"})
                expiry.expire(*p.find(id), std::string("over ") + id);
            if (++rounds < 3) every_20ms();
        });
    };
    run_report r = run_plan(io, p, o, with, [&](asio::cancellation_signal&) { every_20ms(); });
    BOOST_TEST(r.state != run_state::cancelled);
    const task_result& slow = result_of(p, r, "slow");
    BOOST_TEST(slow.state == task_state::timed_out);
    BOOST_TEST(slow.attempts == 2u);
    BOOST_REQUIRE(slow.error.has_value());
    BOOST_TEST(slow.error->code == "timeout");
    BOOST_TEST(slow.error->message == "over slow");
    BOOST_TEST(result_of(p, r, "once").state == task_state::timed_out);
    BOOST_TEST(result_of(p, r, "once").attempts == 1u);
    BOOST_TEST(result_of(p, r, "other").state == task_state::succeeded);
    BOOST_TEST(result_of(p, r, "later").state == task_state::succeeded);  // expired before it ran: nothing
    for (auto type : fake.cancel_types["slow"]) BOOST_TEST((type == asio::cancellation_type::partial));
    BOOST_TEST(fake.cancel_types.count("other") == 0u);
    // Outside a run it does nothing.
    expiry.expire(*p.find("slow"), "after the run");
}

BOOST_AUTO_TEST_CASE(when_false_skips_with_the_condition_and_skips_dependants) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: a, uses: action:run}
    - {id: b, uses: action:run, needs: [a], when: "tasks.a.output.exitCode != 0"}
    - {id: c, uses: action:run, needs: [b]}
    - {id: d, uses: action:run, needs: [a], when: "tasks.a.output.exitCode == 0"}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    const task_result& b = result_of(p, r, "b");
    BOOST_TEST(b.state == task_state::skipped);
    BOOST_TEST(b.error->code == "condition_false");
    BOOST_TEST(b.output.at("condition").at("expression").as_string() == "tasks.a.output.exitCode != 0");
    BOOST_TEST(result_of(p, r, "c").state == task_state::skipped);
    BOOST_TEST(result_of(p, r, "d").state == task_state::succeeded);
}

BOOST_AUTO_TEST_CASE(cancellation_before_anything_starts_runs_nothing) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: a, uses: action:run}
    - {id: b, uses: action:run}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with,
                            [](asio::cancellation_signal& c) { c.emit(asio::cancellation_type::total); });
    BOOST_TEST(r.state == run_state::cancelled);
    BOOST_TEST(r.exit_code() == 130);
    BOOST_TEST(fake.dispatched.empty());
    BOOST_TEST(result_of(p, r, "a").state == task_state::cancelled);
}

BOOST_AUTO_TEST_CASE(cancellation_while_running_is_graceful_then_terminal) {
    std::string yaml = std::string(header) + "  tasks:\n    - {id: quick, uses: action:run}\n";
    for (int i = 0; i < 6; ++i) yaml += "    - {id: hang" + std::to_string(i) + ", uses: action:run, needs: [quick]}\n";
    plan p = compile_text(yaml);
    asio::io_context io;
    fake_runner fake(io);
    for (int i = 0; i < 6; ++i) fake.behaviours["hang" + std::to_string(i)] = {1ms, {}, 0, true};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 4;
    counting_sink sink;
    with.events = &sink;
    asio::steady_timer first(io);
    run_report r = run_plan(io, p, o, with, [&](asio::cancellation_signal& c) {
        // Cancel once four hanging tasks are in flight, then again.
        first.expires_after(30ms);
        first.async_wait([&](auto) {
            BOOST_TEST(fake.running == 4);
            c.emit(asio::cancellation_type::total);
        });
    });
    BOOST_TEST(r.state == run_state::cancelled);
    BOOST_TEST(result_of(p, r, "quick").state == task_state::succeeded);  // finished results are kept
    int cancelled_running = 0, never_started = 0;
    for (int i = 0; i < 6; ++i) {
        const task_result& t = result_of(p, r, "hang" + std::to_string(i));
        BOOST_TEST(t.state == task_state::cancelled);
        if (fake.attempts.count("hang" + std::to_string(i))) ++cancelled_running;
        else ++never_started;
    }
    BOOST_TEST(cancelled_running == 4);
    BOOST_TEST(never_started == 2);
    for (auto& [id, types] : fake.cancel_types) {
        BOOST_REQUIRE(!types.empty());
        BOOST_TEST((types.front() == asio::cancellation_type::total));
    }
    for (auto& [id, n] : fake.completions) BOOST_TEST(n == 1);  // results exactly once
    BOOST_TEST(sink.finished.size() == p.size());
    for (auto& [index, n] : sink.finished)
        BOOST_TEST(n == 1, p.task_id(index) << " finished " << n << " times");
    BOOST_TEST(sink.stretches == 1, "the two tasks never started are one event");
}

BOOST_AUTO_TEST_CASE(approval_required_without_an_approver_runs_nothing) {
    std::string yaml = header;
    yaml.replace(yaml.find("approval: never"), 15, "approval: mutations");
    plan p = compile_text(yaml + "  tasks:\n    - {id: a, uses: action:run}\n    - {id: b, uses: action:assign}\n");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(r.exit_code() == 3);
    BOOST_REQUIRE(r.error.has_value());
    BOOST_TEST(r.error->code == "approval_required");
    BOOST_TEST(r.error->message.find("approval: never") != std::string::npos);
    BOOST_TEST(fake.dispatched.empty());
}

namespace {
struct scripted_approver final : approver {
    scripted_approver(asio::io_context& io, std::vector<approval_answer> a) : io(io), answers(std::move(a)) {}
    void async_approve_impl(const plan& p, std::uint32_t idx,
                            asio::any_completion_handler<void(approval_answer)> handler) override {
        asked.push_back(p.task_id(idx));
        approval_answer a = answers.at(asked.size() - 1);
        asio::post(io, [h = std::move(handler), a]() mutable { std::move(h)(a); });
    }
    asio::io_context& io;
    std::vector<approval_answer> answers;
    std::vector<std::string> asked;
};
}  // namespace

BOOST_AUTO_TEST_CASE(approver_answers_yes_no_all) {
    std::string yaml = header;
    yaml.replace(yaml.find("approval: never"), 15, "approval: always");
    plan p = compile_text(yaml + R"(  tasks:
    - {id: a, uses: action:run}
    - {id: b, uses: action:run, failure: continue}
    - {id: c, uses: action:run}
    - {id: d, uses: action:run}
)");
    asio::io_context io;
    fake_runner fake(io);
    scripted_approver ask(io, {approval_answer::yes, approval_answer::no, approval_answer::all});
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    with.approvals = &ask;
    o.jobs = 1;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST((ask.asked == std::vector<std::string>{"a", "b", "c"}));  // "all" covers d
    BOOST_TEST(result_of(p, r, "a").state == task_state::succeeded);
    BOOST_TEST(result_of(p, r, "b").error->code == "approval_denied");
    BOOST_TEST(result_of(p, r, "d").state == task_state::succeeded);
    BOOST_TEST(r.exit_code() == 3);
}

BOOST_AUTO_TEST_CASE(output_budget_is_reserved_before_dispatch) {
    std::string yaml = header;
    yaml.replace(yaml.find("  actions:"), 0, "  runtime: {budgets: {maxProcessOutputBytes: 31}}\n");
    yaml.replace(yaml.find("command: /bin/true}"), 19, "command: /bin/true, combinedOutputLimitBytes: 32}");
    plan p = compile_text(yaml + "  tasks:\n    - {id: a, uses: action:run}\n");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(result_of(p, r, "a").error->code == "budget_exceeded");
    BOOST_TEST(fake.dispatched.empty());
}

BOOST_AUTO_TEST_CASE(wall_time_budget_stops_the_run) {
    std::string yaml = header;
    yaml.replace(yaml.find("  actions:"), 0, "  runtime: {budgets: {maxWallTimeSeconds: 1}}\n");
    plan p = compile_text(yaml + "  tasks:\n    - {id: a, uses: action:run}\n");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours["a"] = {1ms, {}, 0, true};
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_REQUIRE(r.error.has_value());
    BOOST_TEST(r.error->code == "budget_exceeded");
    BOOST_TEST(result_of(p, r, "a").state == task_state::cancelled);
}

// vars.jobSlot (GNU parallel's {%}): each attempt that starts holds the lowest slot no running
// task holds, 1..jobs, across its retries, and gives it back when its task ends.
BOOST_AUTO_TEST_CASE(job_slots_are_exclusive_and_kept_across_retries) {
    plan p = compile_text(
        std::string(header) +
        R"(    slotted: {kind: builtin.shell.exec, command: /bin/true, args: ["${{ vars.jobSlot }}"]}
  tasks:
    - id: each
      uses: action:slotted
      retry: {maxAttempts: 2, on: [exit_nonzero], backoffMs: 5}
      foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}
)");
    auto agg = p.find("each");
    BOOST_REQUIRE(agg.has_value());
    BOOST_TEST(p.node(p.node(*agg).first_child).argv_deferred);  // rendered at dispatch
    asio::io_context io;
    fake_runner fake(io);
    // Different lengths, and two children that fail once and run again in their slot.
    for (int k = 0; k < 12; ++k) {
        behaviour b;
        b.delay = std::chrono::milliseconds(1 + (k * 7) % 13);
        if (k == 2 || k == 7) b.states = {task_state::failed, task_state::succeeded};
        b.exit_code = 1;
        fake.behaviours[test_support::full_id(
            p, "each--" + std::string(k < 10 ? "000" : "00") + std::to_string(k))] = b;
    }
    // Slots as the events show them: taken when an attempt starts, given back when its task
    // finishes (the moment the scheduler frees it), so a slot given twice shows as a clash.
    struct slot_sink final : event_sink {
        const plan& p;
        std::map<std::uint32_t, std::uint32_t> held;  // task -> slot
        std::set<std::uint32_t> used;
        std::vector<std::string> problems;
        explicit slot_sink(const plan& pl) : p(pl) {}
        void on_event(const run_event& e) override {
            if (e.kind == run_event::kind_t::task_finished) held.erase(e.task_index);
            if (e.kind != run_event::kind_t::task_started) return;
            auto mine = held.find(e.task_index);
            if (mine != held.end()) {  // a retry keeps its slot
                if (mine->second != e.job_slot) problems.push_back(p.task_id(e.task_index) + " changed slot");
                return;
            }
            for (auto& [task, slot] : held)
                if (slot == e.job_slot)
                    problems.push_back(p.task_id(e.task_index) + " shares slot with " + p.task_id(task));
            if (e.job_slot < 1 || e.job_slot > 3) problems.push_back("slot " + std::to_string(e.job_slot));
            held[e.task_index] = e.job_slot;
            used.insert(e.job_slot);
        }
    } sink(p);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    with.events = &sink;
    o.jobs = 3;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST(sink.problems.empty(), (sink.problems.empty() ? "" : sink.problems.front()));
    BOOST_TEST(sink.used == (std::set<std::uint32_t>{1, 2, 3}));
    BOOST_TEST(fake.attempts[test_support::full_id(p, "each--0002")] == 2);
    // The first three start with every slot free: 1, 2, 3; each argv holds its slot.
    BOOST_TEST(fake.args[test_support::full_id(p, "each--0000")] == std::vector<std::string>{"1"});
    BOOST_TEST(fake.args[test_support::full_id(p, "each--0001")] == std::vector<std::string>{"2"});
    BOOST_TEST(fake.args[test_support::full_id(p, "each--0002")] == std::vector<std::string>{"3"});
}

BOOST_AUTO_TEST_CASE(foreach_aggregate_collects_children_and_templates_render) {
    plan p = compile_text(std::string(header) + R"(  inputs: {names: [x, y, z]}
  tasks:
    - {id: each, uses: action:templated, foreach: {items: "${{ inputs.names }}"}, with: {x: fixed}}
    - id: sum
      uses: action:assign
      needs: [each]
      with: {first: "${{ tasks.each.output.items.0.output.stdout }}", all: "${{ tasks.each.output.items }}"}
  outputs: {first: "${{ tasks.sum.output.output.first }}"}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_settings o;
    run_collaborators with;
    with.runner = &fake;
    o.jobs = 3;
    run_report r = run_plan(io, p, o, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST((fake.args[test_support::full_id(p, "each--0001")] == std::vector<std::string>{"fixed", "y"}));
    const task_result& each = result_of(p, r, "each");
    BOOST_TEST(each.output.at("items").as_array().size() == 3u);
    BOOST_TEST(r.output.at("first").as_string() == "out-" + test_support::full_id(p, "each--0000"));
}

// A runner whose tasks print: stdout "printed by ID", stderr "warned by ID"; a task whose id
// starts with "bad" exits 1.
class printing_runner final : public task_runner {
public:
    explicit printing_runner(asio::io_context& io) : io_(io) {}
    void async_run_impl(const attempt_request& request,
                        asio::any_completion_handler<void(task_result)> handler) override {
        task_result r;
        const bool bad = request.task_id.rfind("bad", 0) == 0;
        r.state = bad ? task_state::failed : task_state::succeeded;
        r.exit_code = bad ? 1 : 0;
        r.stdout_text = "printed by " + request.task_id;
        r.stderr_text = "warned by " + request.task_id;
        r.output = json::object{{"exitCode", *r.exit_code}};
        asio::post(io_, [h = std::move(handler), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
    }

private:
    asio::io_context& io_;
};

// Without a journal, run_settings::keep_streams false (the CLI's human output, docs/CAPTURE.md,
// "Without a journal"): a succeeded task's streams leave the report, those of a failed task and
// of a task whose output a later task reads stay; by default every task keeps its own.
BOOST_AUTO_TEST_CASE(without_a_journal_the_report_keeps_streams_only_where_asked) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - {id: quiet, uses: action:run}
    - {id: read, uses: action:run}
    - {id: bad, uses: action:run, failure: continue}
    - {id: after, uses: action:assign, needs: [read], with: {code: "${{ tasks.read.output.exitCode }}"}}
)");
    for (bool keep : {false, true}) {
        BOOST_TEST_CONTEXT("keep_streams " << keep) {
            asio::io_context io;
            printing_runner runner(io);
            run_settings o;
            o.keep_streams = keep;
            run_collaborators with;
            with.runner = &runner;
            run_report r = run_plan(io, p, o, with);
            BOOST_TEST(r.state == run_state::failed);
            const task_result& quiet = result_of(p, r, "quiet");
            BOOST_TEST(quiet.state == task_state::succeeded);
            BOOST_TEST((quiet.exit_code == 0));
            BOOST_TEST(stdout_of(quiet) == (keep ? "printed by quiet" : ""));
            BOOST_TEST(stderr_of(quiet) == (keep ? "warned by quiet" : ""));
            BOOST_TEST(stdout_of(result_of(p, r, "read")) == "printed by read");
            BOOST_TEST(stderr_of(result_of(p, r, "bad")) == "warned by bad");
            BOOST_TEST(stdout_of(result_of(p, r, "bad")) == "printed by bad");
            BOOST_TEST(result_of(p, r, "after").state == task_state::succeeded);
        }
    }
}

// A bounded loop (docs/CONTROL_FLOW.md): iterations run one after the other while `while`
// holds, each sees the one before as vars.loopPrevious; the first false guard skips the rest;
// the aggregate lists every iteration and counts those that ran. The reference's
// examples/v1/loop.yaml: 2 iterations, the third skipped.
BOOST_AUTO_TEST_CASE(a_loop_runs_while_its_condition_holds_and_lists_every_iteration) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - id: refine
      uses: action:assign
      loop:
        maxIterations: 3
        while: "${{ vars.loopIndex < 2 }}"
        initial: {value: seed}
      with: {previous: "${{ vars.loopPrevious }}", iteration: "${{ vars.loopIndex }}"}
    - {id: after, uses: action:run, needs: [refine]}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, {}, with);
    BOOST_TEST(r.state == run_state::succeeded);
    const task_result& loop = result_of(p, r, "refine");
    BOOST_TEST(loop.state == task_state::succeeded);
    BOOST_TEST(loop.output.at("iterations").as_int64() == 2);
    const auto& items = loop.output.at("items").as_array();
    BOOST_TEST_REQUIRE(items.size() == 3u);
    BOOST_TEST(items[0].at("output").at("output").at("previous") == json::parse(R"({"value":"seed"})"));
    BOOST_TEST(items[1].at("output").at("output").at("iteration").as_int64() == 1);
    BOOST_TEST(items[1].at("output").at("output").at("previous") == items[0].at("output"),
               "loopPrevious is the previous iteration's whole output");
    BOOST_TEST(items[2].at("state").as_string() == "skipped");
    BOOST_TEST(items[2].at("output").at("reason").as_string() == "when condition was false");
    BOOST_TEST(items[2].at("taskId").as_string() == p.task_id(2));
    BOOST_TEST(result_of(p, r, "after").state == task_state::succeeded);
}

// The bound: when the last iteration succeeded and `while` still holds at loopIndex = N, the
// aggregate fails (the reference: "loop reached maxIterations N while its condition remained
// true"); a loop whose guard is false at once runs nothing and succeeds with 0 iterations.
BOOST_AUTO_TEST_CASE(a_loop_that_hits_its_bound_fails_and_one_that_never_starts_succeeds) {
    auto loop_of = [](const std::string& condition) {
        return compile_text(std::string(header) +
                            "  tasks:\n    - id: bounded\n      uses: action:assign\n"
                            "      loop: {maxIterations: 2, while: \"" +
                            condition + "\"}\n");
    };
    {
        plan p = loop_of("${{ vars.loopIndex < 3 }}");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::failed);
        const task_result& loop = result_of(p, r, "bounded");
        BOOST_TEST(loop.state == task_state::failed);
        BOOST_TEST_REQUIRE(loop.error.has_value());
        BOOST_TEST(loop.error->code == error_code::loop_exhausted);
        BOOST_TEST(loop.error->message == "loop reached maxIterations 2 while its condition remained true");
        BOOST_TEST(loop.output.at("iterations").as_int64() == 2);
    }
    {
        plan p = loop_of("${{ vars.loopIndex < 0 }}");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        const task_result& loop = result_of(p, r, "bounded");
        BOOST_TEST(loop.state == task_state::succeeded);
        BOOST_TEST(loop.output.at("iterations").as_int64() == 0);
    }
}

// Iterations are sequential even with many job slots, and a failed iteration ends the loop:
// the later ones are skipped (their dependency did not succeed) and the aggregate fails.
BOOST_AUTO_TEST_CASE(loop_iterations_run_one_at_a_time_and_a_failure_ends_the_loop) {
    plan p = compile_text(std::string(header) + R"(  runtime: {maxConcurrency: 4}
  tasks:
    - id: poll
      uses: action:run
      failure: continue
      loop: {maxIterations: 4, while: "${{ vars.loopIndex < 4 }}"}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours[p.task_id(2)] = behaviour{.states = {task_state::failed}, .exit_code = 1};
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, {}, with);
    BOOST_TEST(fake.peak == 1, "iterations overlapped");
    BOOST_TEST(fake.dispatched == (std::vector<std::string>{p.task_id(0), p.task_id(1), p.task_id(2)}));
    BOOST_TEST(r.tasks[3].state == task_state::skipped);
    BOOST_TEST_REQUIRE(r.tasks[3].error.has_value());
    BOOST_TEST(r.tasks[3].error->code == error_code::dependency_not_succeeded);
    const task_result& loop = result_of(p, r, "poll");
    BOOST_TEST(loop.state == task_state::failed);
    BOOST_TEST(loop.output.at("iterations").as_int64() == 3);
}

// Cancelling a loop cancels its running iteration; the iterations after it never start and
// the aggregate is cancelled with them.
BOOST_AUTO_TEST_CASE(cancelling_a_loop_cancels_its_running_iteration_and_the_rest) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - id: poll
      uses: action:run
      loop: {maxIterations: 3, while: "${{ vars.loopIndex < 3 }}"}
)");
    asio::io_context io;
    fake_runner fake(io);
    fake.behaviours[p.task_id(1)] = {1ms, {}, 0, true};  // the second iteration hangs
    run_collaborators with;
    with.runner = &fake;
    asio::steady_timer poll(io);
    std::function<void()> cancel_once_hanging;
    run_report r = run_plan(io, p, {}, with, [&](asio::cancellation_signal& c) {
        cancel_once_hanging = [&] {
            poll.expires_after(1ms);
            poll.async_wait([&](auto) {
                if (fake.running == 1 && fake.attempts.count(p.task_id(1)))
                    c.emit(asio::cancellation_type::total);
                else
                    cancel_once_hanging();
            });
        };
        cancel_once_hanging();
    });
    BOOST_TEST(r.state == run_state::cancelled);
    BOOST_TEST(r.tasks[0].state == task_state::succeeded);
    BOOST_TEST(r.tasks[1].state == task_state::cancelled);
    BOOST_TEST(r.tasks[2].state == task_state::cancelled);
    BOOST_TEST(fake.attempts.count(p.task_id(2)) == 0u, "an iteration started after the cancel");
    BOOST_TEST(result_of(p, r, "poll").state == task_state::cancelled);
}

// A router (docs/CONTROL_FLOW.md, "Routers") as the reference's examples/v1/router.yaml has it:
// its decision is its output; the destination it names runs (still checking its own `when`);
// the one it does not name is skipped with the route's record, and so is what depends on it.
BOOST_AUTO_TEST_CASE(a_router_runs_the_destination_it_selects_and_skips_the_others) {
    auto routed = [](const std::string& selected) {
        return compile_text(std::string(header) + "  inputs: {selected: " + selected + R"(}
  outputs:
    selected: "${{ tasks.route.output.selected }}"
    ship: "${{ tasks.ship.output }}"
    hold: "${{ tasks.hold.output }}"
  tasks:
    - {id: decide, uses: action:assign, with: {route: "${{ inputs.selected }}"}}
    - id: route
      uses: router
      needs: [decide]
      route:
        select: "${{ tasks.decide.output.output.route }}"
        cases:
          - {equals: ship, tasks: [ship]}
          - {equals: 1, tasks: [numeric]}
        default: [hold]
    - {id: ship, uses: action:assign, needs: [route], vars: {enabled: true}, when: "${{ vars.enabled == true }}", with: {result: shipped}}
    - {id: numeric, uses: action:run, needs: [route]}
    - {id: hold, uses: action:assign, needs: [route], with: {result: held}}
    - {id: after-hold, uses: action:run, needs: [hold]}
)");
    };
    {
        plan p = routed("ship");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        const task_result& route = result_of(p, r, "route");
        BOOST_TEST(route.state == task_state::succeeded);
        BOOST_TEST(route.output ==
                   json::parse(R"({"selected":"ship","matched":true,"destinations":["ship"]})"));
        BOOST_TEST(result_of(p, r, "ship").output.at("output").at("result").as_string() == "shipped");
        const task_result& hold = result_of(p, r, "hold");
        BOOST_TEST(hold.state == task_state::skipped);
        BOOST_TEST_REQUIRE(hold.error.has_value());
        BOOST_TEST(hold.error->code == error_code::route_not_selected);
        BOOST_TEST(
            hold.output ==
            json::parse(
                R"({"reason":"route not selected","route":{"router":"route","selected":"ship","matched":true}})"));
        BOOST_TEST(result_of(p, r, "numeric").state == task_state::skipped);
        const task_result& after = result_of(p, r, "after-hold");
        BOOST_TEST(after.state == task_state::skipped);
        BOOST_TEST(after.error->code == error_code::dependency_not_succeeded);
        BOOST_TEST(fake.attempts.empty(), "no process ran: numeric and after-hold were skipped");
        // The reference's asserted result of examples/v1/router.yaml.
        BOOST_TEST(r.output.at("selected").as_string() == "ship");
        BOOST_TEST(r.output.at("ship").at("output").at("result").as_string() == "shipped");
        BOOST_TEST(r.output.at("hold").at("reason").as_string() == "route not selected");
        BOOST_TEST(r.output.at("hold").at("route").at("router").as_string() == "route");
    }
    {
        // No case matches: the default runs; matched is false.
        plan p = routed("other");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        BOOST_TEST(result_of(p, r, "route").output ==
                   json::parse(R"({"selected":"other","matched":false,"destinations":["hold"]})"));
        BOOST_TEST(result_of(p, r, "hold").output.at("output").at("result").as_string() == "held");
        BOOST_TEST(result_of(p, r, "ship").error->code == error_code::route_not_selected);
        BOOST_TEST(result_of(p, r, "after-hold").state == task_state::succeeded);
    }
    {
        // Cases compare JSON values: the number 1 takes the `1` case, the string "1" does not.
        for (const auto& [selected, destination] : {std::pair{"1", "numeric"}, std::pair{"\"1\"", "hold"}}) {
            plan p = routed(selected);
            asio::io_context io;
            fake_runner fake(io);
            run_collaborators with;
            with.runner = &fake;
            run_report r = run_plan(io, p, {}, with);
            BOOST_TEST(
                result_of(p, r, "route").output.at("destinations") == json::array{json::value(destination)},
                selected);
            BOOST_TEST(result_of(p, r, destination).state == task_state::succeeded, selected);
        }
    }
}

// A selected destination still checks its own `when`; with no match and no default every
// destination is skipped.
BOOST_AUTO_TEST_CASE(a_router_without_a_match_runs_no_destination) {
    auto routed = [](const std::string& select, const std::string& when) {
        return compile_text(std::string(header) + R"(  inputs: {lane: slow, empty: {}}
  tasks:
    - id: route
      uses: router
      route:
        select: ")" + select +
                            R"("
        cases:
          - {equals: slow, tasks: [slow]}
          - {equals: fast, tasks: [fast]}
    - {id: slow, uses: action:run, needs: [route], when: ")" +
                            when + R"("}
    - {id: fast, uses: action:run, needs: [route]}
)");
    };
    {
        plan p = routed("${{ inputs.lane }}", "${{ inputs.lane == \\\"never\\\" }}");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        const task_result& slow = result_of(p, r, "slow");
        BOOST_TEST(slow.state == task_state::skipped);
        BOOST_TEST(slow.error->code == error_code::condition_false, "selected, then its own when is false");
        BOOST_TEST(result_of(p, r, "fast").error->code == error_code::route_not_selected);
    }
    {
        plan p = routed("${{ inputs.empty }}", "${{ inputs.lane == \\\"slow\\\" }}");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        BOOST_TEST(result_of(p, r, "route").output ==
                   json::parse(R"({"selected":{},"matched":false,"destinations":[]})"));
        BOOST_TEST(result_of(p, r, "slow").error->code == error_code::route_not_selected);
        BOOST_TEST(result_of(p, r, "fast").error->code == error_code::route_not_selected);
        BOOST_TEST(fake.attempts.empty());
    }
}

// A sub-workflow (docs/CONTROL_FLOW.md, "Sub-workflows") as the reference's
// examples/v1/subworkflow.yaml has it: the boundary's output is the invocation's input, the
// tasks inside read it, the aggregate's output is the definition's outputs, and no process
// runs for the boundary or the aggregate.
const char* summarize_definition = R"(  subworkflows:
    summarize:
      version: 1.0.0
      inputSchema:
        type: object
        required: [message]
        properties: {message: {type: string}}
      outputSchema:
        type: object
        required: [result]
        properties: {result: {type: string}}
      outputs: {result: "${{ tasks.finish.output.output.result }}"}
      tasks:
        - {id: prepare, uses: action:assign, with: {value: "${{ inputs.message }}"}}
        - {id: check, uses: action:run, needs: [prepare]}
        - {id: finish, uses: action:assign, needs: [prepare, check], with: {result: "${{ tasks.prepare.output.output.value }}"}}
)";

BOOST_AUTO_TEST_CASE(a_subworkflow_runs_its_tasks_between_its_boundary_and_its_aggregate) {
    auto invoked = [](const std::string& message) {
        return compile_text(std::string(header) + summarize_definition +
                            R"(  outputs: {result: "${{ tasks.summary.output.result }}"}
  tasks:
    - {id: summary, uses: workflow:summarize, with: {message: )" +
                            message + R"(}}
    - {id: after, uses: action:run, needs: [summary]}
)");
    };
    {
        plan p = invoked("durable");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        BOOST_TEST(r.output.at("result").as_string() == "durable");
        BOOST_TEST(r.tasks.size() == 6u);
        const std::string boundary = "summary--inputs-4d45e657";
        BOOST_TEST(result_of(p, r, boundary).output == json::parse(R"({"message":"durable"})"));
        BOOST_TEST(result_of(p, r, "summary").output == json::parse(R"({"result":"durable"})"));
        BOOST_TEST(fake.dispatched == (std::vector<std::string>{"summary--check", "after"}),
                   "the boundary and the aggregate run no process");
    }
    {
        // The input does not match inputSchema: the boundary fails, nothing inside runs, and the
        // aggregate is skipped as a task whose needs did not succeed.
        plan p = invoked("7");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::failed);
        const task_result& boundary = result_of(p, r, "summary--inputs-4d45e657");
        BOOST_TEST(boundary.state == task_state::failed);
        BOOST_TEST(boundary.error->code == error_code::output_invalid);
        BOOST_TEST(fake.attempts.empty());
    }
    {
        // A task inside fails: the aggregate fails with child_failed (one failure, counted once)
        // and what needs the invocation is skipped.
        plan p = invoked("durable");
        asio::io_context io;
        fake_runner fake(io);
        fake.behaviours["summary--check"] = behaviour{.states = {task_state::failed}, .exit_code = 1};
        run_collaborators with;
        with.runner = &fake;
        run_settings o;
        o.keep_going = true;
        run_report r = run_plan(io, p, o, with);
        BOOST_TEST(r.state == run_state::failed);
        BOOST_TEST(result_of(p, r, "summary--finish").error->code == error_code::dependency_not_succeeded);
        const task_result& aggregate = result_of(p, r, "summary");
        BOOST_TEST(aggregate.state == task_state::failed);
        BOOST_TEST(aggregate.error->code == error_code::child_failed);
        BOOST_TEST(result_of(p, r, "after").state == task_state::skipped);
    }
}

// The aggregate's output is checked against outputSchema as a task's output is: a definition
// whose outputs do not match fails its invocation (output_invalid), its output kept.
BOOST_AUTO_TEST_CASE(a_subworkflow_whose_outputs_break_its_schema_fails) {
    std::string definition = summarize_definition;
    const std::string from = "tasks.finish.output.output.result";
    definition.replace(definition.find(from), from.size(), "tasks.finish.output.output");
    plan p = compile_text(std::string(header) + definition + R"(  tasks:
    - {id: summary, uses: workflow:summarize, with: {message: hi}}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, {}, with);
    BOOST_TEST(r.state == run_state::failed);
    const task_result& aggregate = result_of(p, r, "summary");
    BOOST_TEST(aggregate.state == task_state::failed);
    BOOST_TEST_REQUIRE(aggregate.error.has_value());
    BOOST_TEST(aggregate.error->code == error_code::output_invalid);
    BOOST_TEST(aggregate.output == json::parse(R"({"result":{"result":"hi"}})"));
}

// An invocation that a router does not take is skipped whole: its boundary and aggregate with
// the route's record, the tasks inside because the boundary did not succeed.
BOOST_AUTO_TEST_CASE(a_subworkflow_not_routed_to_is_skipped_whole) {
    plan p = compile_text(std::string(header) + summarize_definition + R"(  tasks:
    - id: route
      uses: router
      route: {select: "${{ inputs.lane }}", cases: [{equals: sub, tasks: [summary]}], default: [other]}
    - {id: summary, uses: workflow:summarize, needs: [route], with: {message: hi}}
    - {id: other, uses: action:run, needs: [route]}
  inputs: {lane: plain}
)");
    asio::io_context io;
    fake_runner fake(io);
    run_collaborators with;
    with.runner = &fake;
    run_report r = run_plan(io, p, {}, with);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST(result_of(p, r, "summary--inputs-4d45e657").error->code == error_code::route_not_selected);
    BOOST_TEST(result_of(p, r, "summary--prepare").error->code == error_code::dependency_not_succeeded);
    const task_result& aggregate = result_of(p, r, "summary");
    BOOST_TEST(aggregate.error->code == error_code::route_not_selected);
    BOOST_TEST(aggregate.output.at("reason").as_string() == "route not selected");
    BOOST_TEST(fake.dispatched == std::vector<std::string>{"other"});
}

// A foreach routed to: every child waits for the decision. Selected, its children run (as
// many at once as --jobs allows); not selected, every child and its aggregate are skipped with
// the route's record, and a task that needs the foreach is skipped too.
BOOST_AUTO_TEST_CASE(a_route_into_a_foreach_runs_or_skips_every_child) {
    auto routed = [](const std::string& lane) {
        return compile_text(std::string(header) + "  inputs: {lane: " + lane + R"(}
  tasks:
    - id: route
      uses: router
      route:
        select: "${{ inputs.lane }}"
        cases: [{equals: wide, tasks: [fan]}]
        default: [narrow]
    - {id: fan, uses: action:templated, needs: [route], foreach: {items: [a, b, c]}, with: {x: "1"}}
    - {id: narrow, uses: action:run, needs: [route]}
    - {id: after, uses: action:run, needs: [fan]}
)");
    };
    {
        plan p = routed("wide");
        asio::io_context io;
        fake_runner fake(io);
        run_settings o;
        o.jobs = 3;
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, o, with);
        BOOST_TEST(r.state == run_state::succeeded);
        BOOST_TEST(fake.peak == 3, "the children run side by side");
        for (std::uint32_t c = 0; c < 3; ++c)
            BOOST_TEST(r.tasks[*p.find("fan") - 3 + c].state == task_state::succeeded);
        BOOST_TEST(result_of(p, r, "fan").state == task_state::succeeded);
        BOOST_TEST(result_of(p, r, "narrow").error->code == error_code::route_not_selected);
        BOOST_TEST(result_of(p, r, "after").state == task_state::succeeded);
    }
    {
        plan p = routed("thin");
        asio::io_context io;
        fake_runner fake(io);
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::succeeded);
        for (std::uint32_t c = 0; c < 3; ++c) {
            const task_result& child = r.tasks[*p.find("fan") - 3 + c];
            BOOST_TEST(child.state == task_state::skipped);
            BOOST_TEST(child.error->code == error_code::route_not_selected);
            BOOST_TEST(child.output.at("route").at("selected").as_string() == "thin");
        }
        const task_result& fan = result_of(p, r, "fan");
        BOOST_TEST(fan.state == task_state::skipped);
        BOOST_TEST(fan.error->code == error_code::route_not_selected);
        BOOST_TEST(result_of(p, r, "narrow").state == task_state::succeeded);
        BOOST_TEST(result_of(p, r, "after").error->code == error_code::dependency_not_succeeded);
        BOOST_TEST(fake.attempts.size() == 1u, "only narrow ran");
    }
}

// Failure policies and cancellation pass through a router as through any task: a failed
// destination under `failure: stop` stops the run; cancelling while the selected destination
// runs cancels it, and the router's decision stays recorded.
BOOST_AUTO_TEST_CASE(a_routed_run_honours_failure_policies_and_cancellation) {
    plan p = compile_text(std::string(header) + R"(  tasks:
    - id: route
      uses: router
      route:
        select: "${{ inputs.lane }}"
        cases: [{equals: go, tasks: [work]}]
    - {id: work, uses: action:run, needs: [route]}
    - {id: later, uses: action:run, needs: [work]}
  inputs: {lane: go}
)");
    {
        asio::io_context io;
        fake_runner fake(io);
        fake.behaviours[p.task_id(*p.find("work"))] =
            behaviour{.states = {task_state::failed}, .exit_code = 1};
        run_collaborators with;
        with.runner = &fake;
        run_report r = run_plan(io, p, {}, with);
        BOOST_TEST(r.state == run_state::failed);
        BOOST_TEST(result_of(p, r, "route").state == task_state::succeeded);
        BOOST_TEST(result_of(p, r, "work").state == task_state::failed);
        BOOST_TEST(result_of(p, r, "later").state != task_state::succeeded);
    }
    {
        asio::io_context io;
        fake_runner fake(io);
        const std::string work = p.task_id(*p.find("work"));
        fake.behaviours[work] = {1ms, {}, 0, true};  // hangs until cancelled
        run_collaborators with;
        with.runner = &fake;
        asio::steady_timer poll(io);
        std::function<void()> cancel_once_running;
        run_report r = run_plan(io, p, {}, with, [&](asio::cancellation_signal& c) {
            cancel_once_running = [&] {
                poll.expires_after(1ms);
                poll.async_wait([&](auto) {
                    if (fake.running == 1 && fake.attempts.count(work))
                        c.emit(asio::cancellation_type::total);
                    else
                        cancel_once_running();
                });
            };
            cancel_once_running();
        });
        BOOST_TEST(r.state == run_state::cancelled);
        BOOST_TEST(result_of(p, r, "route").output.at("destinations") == json::parse(R"(["work"])"));
        BOOST_TEST(result_of(p, r, "work").state == task_state::cancelled);
        BOOST_TEST(result_of(p, r, "later").state == task_state::cancelled);
    }
}
