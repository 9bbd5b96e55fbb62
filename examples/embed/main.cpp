// Embedding agentctl: run a workflow inside the application's own io_context, next to the
// application's other work (here a 10 ms heartbeat), and cancel it on Ctrl-C.
//
//   embed WORKFLOW [BASE_DIR [JOURNAL]]
//
// The application gives the spawns and the cgroup housekeeping a thread of its own
// (agentctl::use_spawn_executor, use_housekeeping_executor; the library creates none). With
// JOURNAL (a database path), the run is recorded in a run journal as it goes: the
// application gives the journal's writer a thread of its own too, and
// reads the results back from the journal once the run is over (docs/JOURNAL.md).
//
// Prints the run's result and the longest gap between two heartbeats; exits 0 when the run
// succeeded and the heartbeat never stalled (no gap over 100 ms), 1 otherwise. A gap counts
// the time the loop was busy or blocked, not the time this thread waited for a CPU that other
// programs held (the scheduler's run-queue delay, /proc/thread-self/schedstat): a loaded
// machine delays every program alike, while a library that blocks the loop delays only it.
#include <agentctl/engine.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/process.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Time this thread has spent runnable but waiting for a CPU (0 where the kernel does not say).
std::chrono::nanoseconds run_queue_delay() {
    std::ifstream in("/proc/thread-self/schedstat");
    long long on_cpu = 0, waiting = 0;
    if (!(in >> on_cpu >> waiting)) return {};
    return std::chrono::nanoseconds(waiting);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: embed WORKFLOW [BASE_DIR]\n");
        return 2;
    }
    // Load and compile: pure functions, no I/O beyond reading the file.
    agentctl::parse_result parsed = agentctl::load_workflow(argv[1]);
    agentctl::compile_result compiled = agentctl::check_document(parsed);
    if (!compiled.compiled) {
        for (const auto& d : compiled.diags.items())
            std::fprintf(stderr, "%s:%d: %s\n", d.location.file.c_str(), d.location.line, d.message.c_str());
        return 2;
    }
    const agentctl::plan& plan = *compiled.compiled;

    // The library's blocking system calls get a thread of the application's (declared first:
    // it outlives the loop). A spawn blocks its thread until the child has exec'd, a fraction of
    // a millisecond on an idle machine, tens on a loaded one; making and removing cgroup leaves
    // can wait on the kernel's cgroup lock as long. On that thread, the loop never waits.
    asio::thread_pool helper(1);
    asio::io_context io;  // the application's own loop: one thread, all the rest on it
    agentctl::use_spawn_executor(io, helper.get_executor());
    agentctl::use_housekeeping_executor(io, helper.get_executor());

    // The application's own work: a heartbeat that must keep ticking while tasks run.
    asio::steady_timer heartbeat(io);
    // Gaps are measured from the moment the loop runs: opening (and creating) the journal
    // below happens before, on purpose off the loop, and is no gap of the loop's.
    std::chrono::steady_clock::time_point last;
    std::chrono::nanoseconds last_delay{};
    std::chrono::steady_clock::duration worst{}, worst_wall{};
    bool running = true;
    std::function<void()> tick = [&] {
        heartbeat.expires_after(10ms);
        heartbeat.async_wait([&](boost::system::error_code ec) {
            if (ec || !running) return;
            auto now = std::chrono::steady_clock::now();
            auto delay = run_queue_delay();
            worst_wall = std::max(worst_wall, now - last);
            worst = std::max(worst, now - last - (delay - last_delay));
            last = now;
            last_delay = delay;
            tick();
        });
    };
    asio::post(io, [&] {
        last = std::chrono::steady_clock::now();
        last_delay = run_queue_delay();
        tick();
    });

    // The application decides how cancellation happens: here the first Ctrl-C is graceful.
    asio::cancellation_signal cancel;
    asio::signal_set signals(io, SIGINT);
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (!ec) cancel.emit(asio::cancellation_type::total);
    });

    // What the run does (plain values), and whom it talks to (here: a journal, or no one).
    agentctl::run_settings settings;
    settings.base_dir = argc > 2 ? argv[2] : ".";
    const char* path = std::getenv("PATH");
    settings.search_path = path ? path : "/usr/bin:/bin";
    agentctl::run_collaborators with;

    // The journal: opened (and created) before anything runs; every SQLite call happens on
    // the writer's own thread, never on the application's loop.
    asio::thread_pool journal_thread(1);
    std::unique_ptr<agentctl::journal_writer> writer;
    if (argc > 3) {
        auto db = agentctl::journal::open(argv[3], agentctl::journal_access::write);
        if (!db) {
            std::fprintf(stderr, "%s\n", db.error().message.c_str());
            return 5;
        }
        writer = std::make_unique<agentctl::journal_writer>(io.get_executor(), journal_thread.get_executor(),
                                                            std::move(*db));
        with.journal = writer.get();
        settings.record.workflow_path = argv[1];
        settings.record.workflow_source = parsed.source;  // what resume would run again
        settings.record.base_dir = settings.base_dir;
    }

    int status = 1;
    std::string run_id;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            agentctl::run_report report = co_await agentctl::async_run(
                io.get_executor(), plan, settings, with,
                asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
            running = false;
            heartbeat.cancel();
            signals.cancel();
            // Every task's outcome is in the report; its whole result too without a journal
            // (with one, the results are read back from the journal below).
            std::size_t ok = 0;
            for (const auto& t : report.outcomes) ok += t.state == agentctl::task_state::succeeded;
            auto ms = [](auto d) {
                return static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
            };
            auto gap = ms(worst);
            std::printf(
                "run %s %s: %zu of %zu tasks succeeded in %lld ms; longest heartbeat gap %lld ms "
                "(%lld ms on the wall clock, waits for a CPU included)\n",
                report.run_id.c_str(), std::string(agentctl::to_string(report.state)).c_str(), ok,
                report.outcomes.size(), static_cast<long long>(report.duration.count()), gap, ms(worst_wall));
            status = report.state == agentctl::run_state::succeeded && gap <= 100 ? 0 : 1;
            run_id = report.run_id;
            if (writer) {
                // Everything recorded is committed once the writer closes.
                auto error = co_await writer->async_close(asio::use_awaitable);
                if (error) {
                    std::fprintf(stderr, "%s\n", error->message.c_str());
                    status = 5;
                }
            }
        },
        // The application's own coroutine; the library itself never detaches anything.
        asio::detached);
    io.run();

    if (writer) {
        // Read back: one result at a time, the captured streams from the journal.
        auto db = agentctl::journal::open(argv[3], agentctl::journal_access::read);
        if (!db) {
            std::fprintf(stderr, "%s\n", db.error().message.c_str());
            return 5;
        }
        std::size_t results = 0, bytes = 0;
        auto error = db->for_each_result(run_id, true, [&](agentctl::journal_task_result& r) {
            ++results;
            bytes += agentctl::stdout_of(r.result).size();
            return true;
        });
        if (error) {
            std::fprintf(stderr, "%s\n", error->message.c_str());
            return 5;
        }
        std::printf("journal %s: run %s, %zu results, %zu bytes of stdout\n", argv[3], run_id.c_str(), results,
                    bytes);
        if (results != plan.size()) status = 1;
    }
    return status;
}
