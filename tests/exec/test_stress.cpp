// T-RES-05: 10 000 mixed runs, 32 in flight, on one io_context: every result exactly as
// expected, and afterwards flat fds, no zombie, no survivor, no thread, bounded memory.
#include "harness.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#if defined(__SANITIZE_ADDRESS__)
// From AddressSanitizer's runtime (<sanitizer/allocator_interface.h>, which GCC does not ship).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

using namespace exec_test;
using agentctl::process_outcome;

namespace {

long status_field(const char* name) {
    std::ifstream in("/proc/self/status");
    std::string key;
    long value = -1;
    while (in >> key) {
        if (key == name) {
            in >> value;
            return value;
        }
        in.ignore(4096, '\n');
    }
    return value;
}

// Memory held, in KiB. Under AddressSanitizer freed blocks wait in its quarantine (up to
// 256 MiB) instead of being reused, so the resident set grows without a leak: count the bytes
// the program holds instead.
long memory_kib() {
#if defined(__SANITIZE_ADDRESS__)
    return static_cast<long>(__sanitizer_get_current_allocated_bytes() / 1024);
#else
    return status_field("VmRSS:");
#endif
}

enum class kind { exit_code, timeout, cancel, spawn_error, overflow, signal_death, tree_timeout, count };

struct mixed_load {
    explicit mixed_load(std::string nonce) : nonce(std::move(nonce)) { spawner.attach(io); }

    void launch() {
        if (next == total) return;
        int i = next++;
        auto k = static_cast<kind>(rng() % static_cast<unsigned>(kind::count));
        agentctl::process_request req;
        switch (k) {
            case kind::exit_code:
                req = probe_request(nonce, {"exit", std::to_string(i % 256)});
                break;
            case kind::timeout:
                req = probe_request(nonce, {"sleep", "10"});
                req.timeout = 20ms;
                break;
            case kind::cancel:
                req = probe_request(nonce, {"sleep", "10"});
                break;
            case kind::spawn_error:
                req = command_request({"/nonexistent/agentctl-stress", nonce});
                break;
            case kind::overflow:
                req = probe_request(nonce, {"flood", "--chunk", "1000"});
                req.stdout_limit = 4096;
                break;
            case kind::signal_death:
                req = probe_request(nonce, {"signal-self", i % 2 ? "TERM" : "KILL"});
                break;
            case kind::tree_timeout:
                req = probe_request(nonce, {"fork-hold", "--leader", "sleep"});
                req.timeout = 30ms;
                break;
            case kind::count:
                break;
        }
        req.containment = i % 2 ? agentctl::containment_policy::automatic
                                : agentctl::containment_policy::process_group_only;
        auto signal = std::make_shared<boost::asio::cancellation_signal>();
        std::shared_ptr<boost::asio::steady_timer> timer;
        if (k == kind::cancel) {
            timer = std::make_shared<boost::asio::steady_timer>(io, std::chrono::microseconds(rng() % 5000));
            timer->async_wait([signal, i](boost::system::error_code) {
                signal->emit(i % 3 ? boost::asio::cancellation_type::terminal
                                   : boost::asio::cancellation_type::partial);
            });
        }
        agentctl::async_run_process(
            io.get_executor(), std::move(req),
            boost::asio::bind_cancellation_slot(signal->slot(),
                                                [this, k, i, signal, timer](agentctl::process_result r) {
                                                    if (timer) timer->cancel();
                                                    check(k, i, r);
                                                    ++done;
                                                    launch();
                                                }));
    }

    void check(kind k, int i, const agentctl::process_result& r) {
        bool ok = false;
        switch (k) {
            case kind::exit_code:
                ok = r.outcome == process_outcome::exited && r.exit_code == i % 256;
                break;
            case kind::timeout:
                ok = r.outcome == process_outcome::timed_out && r.signal == SIGKILL;
                break;
            case kind::cancel:
                // Either before the spawn (no status) or after it (killed).
                ok = r.outcome == process_outcome::cancelled && !r.exit_code &&
                     (!r.signal || r.signal == SIGKILL);
                break;
            case kind::spawn_error:
                ok = r.outcome == process_outcome::spawn_failed && code_of(r) == "executable_not_found";
                break;
            case kind::overflow:
                ok = r.outcome == process_outcome::output_limit_exceeded && r.stdout_bytes.size() == 4096 &&
                     r.limit_stream == "stdout";
                break;
            case kind::signal_death:
                ok = r.outcome == process_outcome::exited && r.signal == (i % 2 ? SIGTERM : SIGKILL);
                break;
            case kind::tree_timeout:
                ok = r.outcome == process_outcome::timed_out && r.signal == SIGKILL &&
                     r.descendants_killed <= 1;
                break;
            case kind::count:
                break;
        }
        ++seen[k];
        if (!ok) {
            ++wrong;
            if (wrong <= 5) {
                BOOST_TEST_MESSAGE("run " << i << " kind " << static_cast<int>(k) << ": " << r.outcome << " "
                                          << r.exit_code.value_or(-1) << " " << r.signal.value_or(-1) << " "
                                          << r.error_message);
            }
        }
    }

    std::string nonce;
    spawn_thread spawner;  // before io: outlives it
    boost::asio::io_context io;
    std::mt19937 rng{20261130};
    int total = 10000;
    int next = 0;
    int done = 0;
    int wrong = 0;
    std::map<kind, int> seen;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(stress, process_fixture)

BOOST_AUTO_TEST_CASE(ten_thousand_mixed_runs) {
    long threads_before = status_field("Threads:");
    long rss_before = memory_kib();
    auto begin = std::chrono::steady_clock::now();
    {
        mixed_load s(nonce);
        for (int j = 0; j < 32; ++j) s.launch();
        s.io.run_for(150s);
        BOOST_TEST(s.done == s.total);
        BOOST_TEST(s.wrong == 0);
        for (auto& [k, n] : s.seen)
            BOOST_TEST(n > 1000, "kind " << static_cast<int>(k) << " ran " << n << " times");
        BOOST_TEST(zombie_children() == 0);
        BOOST_TEST(status_field("Threads:") == threads_before + (s.spawner.active() ? 1 : 0));
    }
    auto elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - begin);
    long rss_after = memory_kib();
    BOOST_TEST_MESSAGE("10 000 runs in " << elapsed.count() << " ms; memory " << rss_before << " -> "
                                         << rss_after << " KiB");
    BOOST_TEST(rss_after - rss_before < 64 * 1024);
}

BOOST_AUTO_TEST_SUITE_END()
