// exec_bench: the workloads of the README's Performance section run through agentctl::async_run_process, with
// the same options and the same JSON line as spawnbench, so that the two compare directly.
//
//   W1  exec_bench -n 5000 -j 64 -- /bin/true                      (spawn and reap)
//   W2  exec_bench -n 1000 -j 64 -- head -c 1048576 /dev/zero      (1 MiB captured per task)
//   W3  exec_bench -n 1000 -j 1000 -t 0.2 -- /bin/sleep 10         (deadline -> reaped latency)
//   W3-burst  exec_bench -n 1000 -j 1000 -t 2 -A -- /bin/sleep 10  (one deadline for all: cancel)
//   MEM exec_bench -n 1000 -j 1000 -m 2 -- /bin/sleep 10           (RSS per in-flight task)
//
// -H gives the executor a housekeeping thread for its cgroup leaves, as `agentctl run` does
// (agentctl::use_housekeeping_executor); -S a thread of its own for the spawns
// (agentctl::use_spawn_executor).
//
// One thread, one io_context. Prints one JSON line; exit 0 when no task failed to spawn.
#include <agentctl/process.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    long n = 1000;
    long j = 64;
    double timeout_s = 0;  // 0: none (a day)
    bool absolute = false;
    bool housekeeping = false;
    bool spawner = false;
    double hold_s = 0;  // MEM: cancel everything after this long, sampling RSS first
    std::uint64_t cap = 1024 * 1024;
    agentctl::containment_policy containment = agentctl::containment_policy::automatic;
    std::vector<std::string> argv;
};

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: exec_bench [-n N] [-j J] [-t SECONDS] [-A] [-m SECONDS] [-c CAP] [-g] [-H] [-S] -- "
                 "PROGRAM [ARG...]\n"
                 "  -n N        tasks to run (default 1000)\n"
                 "  -j J        tasks in flight at most (default 64)\n"
                 "  -t SECONDS  timeout per task, from its spawn (default: none)\n"
                 "  -A          one absolute deadline for all: start + SECONDS, by cancellation\n"
                 "  -m SECONDS  after SECONDS, sample VmRSS and cancel everything (memory per task)\n"
                 "  -c CAP      stdout and stderr limit per task (default 1048576)\n"
                 "  -g          process-group containment only (default: automatic, a cgroup leaf)\n"
                 "  -H          a housekeeping thread makes and removes cgroup leaves (as agentctl run)\n"
                 "  -S          a thread of its own spawns the tasks (use_spawn_executor)\n");
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    int i = 1;
    for (; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&] {
            if (i + 1 >= argc) usage();
            return std::string(argv[++i]);
        };
        if (a == "--") {
            ++i;
            break;
        } else if (a == "-n") {
            o.n = std::stol(value());
        } else if (a == "-j") {
            o.j = std::stol(value());
        } else if (a == "-t") {
            o.timeout_s = std::stod(value());
        } else if (a == "-A") {
            o.absolute = true;
        } else if (a == "-m") {
            o.hold_s = std::stod(value());
        } else if (a == "-c") {
            o.cap = std::stoull(value());
        } else if (a == "-H") {
            o.housekeeping = true;
        } else if (a == "-S") {
            o.spawner = true;
        } else if (a == "-g") {
            o.containment = agentctl::containment_policy::process_group_only;
        } else {
            usage();
        }
    }
    for (; i < argc; ++i) o.argv.emplace_back(argv[i]);
    if (o.argv.empty() || o.n < 1 || o.j < 1 || (o.absolute && o.timeout_s <= 0)) usage();
    return o;
}

long status_kib(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string k;
    long v = -1;
    while (in >> k) {
        if (k == key) {
            in >> v;
            return v;
        }
        in.ignore(4096, '\n');
    }
    return v;
}

// The runner's own CPU time (children excluded): the engine's cost, less noisy than wall time.
double self_cpu_s() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    auto s = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    return s(ru.ru_utime) + s(ru.ru_stime);
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(at, sorted.size() - 1)];
}

struct bench {
    explicit bench(options o) : opt(std::move(o)), signals(static_cast<std::size_t>(opt.n)) {}

    void launch() {
        if (next == opt.n) return;
        auto i = static_cast<std::size_t>(next++);
        agentctl::process_request r = request;
        agentctl::async_run_process(
            io.get_executor(), std::move(r),
            boost::asio::bind_cancellation_slot(signals[i].slot(), [this](agentctl::process_result res) {
                on_done(res);
                launch();
            }));
    }

    void on_done(const agentctl::process_result& r) {
        ++done;
        captured += r.stdout_bytes.size() + r.stderr_bytes.size();
        switch (r.outcome) {
            case agentctl::process_outcome::spawn_failed:
                ++spawn_errors;
                if (spawn_errors == 1) std::fprintf(stderr, "exec_bench: %s\n", r.error_message.c_str());
                break;
            case agentctl::process_outcome::timed_out:
                ++timed_out;
                // The timeout counts from the spawn, as does duration: the rest is kill latency.
                latency_ms.push_back(std::chrono::duration<double, std::milli>(r.duration).count() -
                                     opt.timeout_s * 1000.0);
                break;
            case agentctl::process_outcome::cancelled:
                ++cancelled;
                if (opt.absolute) {
                    latency_ms.push_back(
                        std::chrono::duration<double, std::milli>(clock_type::now() - deadline).count());
                }
                break;
            case agentctl::process_outcome::output_limit_exceeded:
                ++overflows;
                break;
            case agentctl::process_outcome::exited:
                if (r.exit_code == 0) ++exit_zero;
                break;
        }
        if (done == opt.n) end = clock_type::now();
    }

    options opt;
    boost::asio::io_context io{1};
    agentctl::process_request request;
    std::vector<boost::asio::cancellation_signal> signals;
    long next = 0, done = 0;
    long spawn_errors = 0, timed_out = 0, cancelled = 0, overflows = 0, exit_zero = 0;
    std::uint64_t captured = 0;
    std::vector<double> latency_ms;
    clock_type::time_point start, end, deadline;
    long rss_idle = 0, rss_held = 0;
};

}  // namespace

int main(int argc, char** argv) {
    options opt = parse(argc, argv);
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    std::optional<boost::asio::thread_pool> housekeeping, spawner;  // outlive b.io
    if (opt.housekeeping) housekeeping.emplace(1);
    if (opt.spawner) spawner.emplace(1);
    bench b(opt);
    if (housekeeping) agentctl::use_housekeeping_executor(b.io, housekeeping->get_executor());
    if (spawner) agentctl::use_spawn_executor(b.io, spawner->get_executor());
    const char* path = std::getenv("PATH");
    auto exe = agentctl::resolve_executable(opt.argv[0], path ? path : "/usr/bin:/bin");
    if (!exe) {
        std::fprintf(stderr, "exec_bench: %s\n", exe.error().message.c_str());
        return 2;
    }
    b.request.executable = *exe;
    b.request.argv = opt.argv;
    b.request.stdout_limit = opt.cap;
    b.request.stderr_limit = opt.cap;
    b.request.combined_limit = 2 * opt.cap;
    b.request.timeout = opt.timeout_s > 0 && !opt.absolute
                            ? std::chrono::milliseconds(static_cast<long long>(opt.timeout_s * 1000))
                            : std::chrono::hours(24);
    b.request.containment = opt.containment;

    b.rss_idle = status_kib("VmRSS:");
    boost::asio::steady_timer all(b.io);
    b.start = clock_type::now();
    if (opt.absolute || opt.hold_s > 0) {
        double s = opt.absolute ? opt.timeout_s : opt.hold_s;
        b.deadline = b.start + std::chrono::microseconds(static_cast<long long>(s * 1e6));
        all.expires_at(b.deadline);
        all.async_wait([&b](boost::system::error_code) {
            b.deadline = clock_type::now();
            if (b.opt.hold_s > 0) b.rss_held = status_kib("VmRSS:");
            for (auto& s : b.signals) s.emit(boost::asio::cancellation_type::terminal);
        });
    }
    for (long i = 0; i < opt.j; ++i) b.launch();
    b.io.run();
    if (b.end == clock_type::time_point{}) b.end = clock_type::now();
    double wall_s = std::chrono::duration<double>(b.end - b.start).count();

    std::sort(b.latency_ms.begin(), b.latency_ms.end());
    std::printf(
        "{\"bench\":\"exec_bench\",\"program\":\"%s\",\"n\":%ld,\"j\":%ld,\"timeout_s\":%g,\"absolute_"
        "deadline\":%s,"
        "\"containment\":\"%s\",\"wall_s\":%.6f,\"tasks_per_s\":%.1f,\"bytes_captured\":%llu,"
        "\"captured_mb_per_s\":%.1f,\"exit_zero\":%ld,\"timed_out\":%ld,\"cancelled\":%ld,\"overflows\":%ld,"
        "\"spawn_errors\":%ld,\"vm_hwm_kib\":%ld,\"self_cpu_s\":%.3f,",
        exe->c_str(), opt.n, opt.j, opt.timeout_s, opt.absolute ? "true" : "false",
        opt.containment == agentctl::containment_policy::automatic ? "automatic" : "process-group", wall_s,
        static_cast<double>(opt.n) / wall_s, static_cast<unsigned long long>(b.captured),
        static_cast<double>(b.captured) / 1e6 / wall_s, b.exit_zero, b.timed_out, b.cancelled, b.overflows,
        b.spawn_errors, status_kib("VmHWM:"), self_cpu_s());
    if (opt.hold_s > 0) {
        std::printf(
            "\"rss_idle_kib\":%ld,\"rss_held_kib\":%ld,\"kib_per_task\":%.2f,", b.rss_idle, b.rss_held,
            static_cast<double>(b.rss_held - b.rss_idle) / static_cast<double>(std::min(opt.n, opt.j)));
    }
    if (b.latency_ms.empty()) {
        std::printf("\"latency_ms\":null}\n");
    } else {
        std::printf("\"latency_ms\":{\"count\":%zu,\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f}}\n",
                    b.latency_ms.size(), percentile(b.latency_ms, 0.50), percentile(b.latency_ms, 0.99),
                    b.latency_ms.back());
    }
    return b.spawn_errors == 0 ? 0 : 1;
}
