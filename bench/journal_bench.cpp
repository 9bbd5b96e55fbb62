// journal_bench: the run journal's writer under the engine's two extreme workloads, on its
// own worker thread as the CLI will run it. Prints one JSON line per run.
//
//   small  journal_bench small -n 10000 -j 64        intent (synced) + handle + end + final of
//                                                    small rows: W1's journal traffic (-s BYTES:
//                                                    stdout per task, default 0 like /bin/true)
//   big    journal_bench big -n 2000 -j 64 -s 1048576  ends carrying 1 MiB of stdout: W2's
//          options: --threshold B (streams >= B go to files; 0: never), --page-size N,
//          --checkpoint PAGES (wal_autocheckpoint), --gc incremental|vacuum (then remove the run)
//   open   journal_bench open --db PATH [--no-check] [--write]  time to open (and quick_check) a
//          journal; --write opens it as `run` does, so that its close seals it (the next open of
//          the unchanged file skips the check: docs/JOURNAL.md, "The integrity check")
//   raw    journal_bench raw -n 2000 -s 1048576      the ceiling: one thread writes J distinct
//          buffers in turn to files with write(2), no journal (with --full, fdatasync each)
//   both:  --full (synchronous=FULL, stream files fdatasync'ed), --db PATH (default: a fresh
//          file in a temporary folder under $TMPDIR or /tmp, removed afterwards), --burst K
//          (tasks finishing per refill, default 1), --serial (the loop itself waits for each sync,
//          so nothing finishes meanwhile; default: started tasks run on while a sync is pending)
//
// Tasks are instantaneous: everything measured is the journal's cost, never a process's.
#include <agentctl/journal.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <sqlite3.h>

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace agentctl;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
    std::string mode;
    long n = 0;
    long j = 64;
    long burst = 1;
    std::size_t size = 1024 * 1024;
    std::size_t threshold = 64 * 1024;
    int page_size = 4096;
    int checkpoint = 1000;
    bool full = false;
    bool check = true;
    bool write = false;
    bool serial = false;
    std::string gc;  // "", "incremental", "vacuum"
    std::string db;
};

[[noreturn]] void usage() {
    std::fprintf(
        stderr,
        "usage: journal_bench small|big|open|raw [-n N] [-j J] [-s BYTES] [--burst K] [--threshold B]\n"
        "                     [--page-size N] [--checkpoint PAGES] [--full] [--gc incremental|vacuum]\n"
        "                     [--db PATH] [--no-check] [--write] [--serial]\n");
    std::exit(2);
}

options parse(int argc, char** argv) {
    if (argc < 2) usage();
    options o;
    o.mode = argv[1];
    if (o.mode != "small" && o.mode != "big" && o.mode != "open" && o.mode != "raw") usage();
    o.n = o.mode == "small" ? 10000 : 2000;
    o.size = o.mode == "small" ? 0 : 1024 * 1024;  // raw and big: 1 MiB  // /bin/true prints nothing
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage();
            return argv[++i];
        };
        if (a == "-n")
            o.n = std::stol(value());
        else if (a == "-j")
            o.j = std::stol(value());
        else if (a == "-s")
            o.size = std::stoul(value());
        else if (a == "--burst")
            o.burst = std::stol(value());
        else if (a == "--threshold")
            o.threshold = std::stoul(value());
        else if (a == "--page-size")
            o.page_size = std::stoi(value());
        else if (a == "--checkpoint")
            o.checkpoint = std::stoi(value());
        else if (a == "--full")
            o.full = true;
        else if (a == "--no-check")
            o.check = false;
        else if (a == "--write")
            o.write = true;
        else if (a == "--serial")
            o.serial = true;
        else if (a == "--gc")
            o.gc = value();
        else if (a == "--db")
            o.db = value();
        else
            usage();
    }
    if (o.threshold == 0) o.threshold = SIZE_MAX;
    return o;
}

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

double cpu_seconds(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::uint64_t journal_bytes(const std::string& db) {
    std::uint64_t n = 0;
    std::error_code ec;
    for (const char* s : {"", "-wal", "-shm"})
        if (std::filesystem::exists(db + s, ec)) n += std::filesystem::file_size(db + s, ec);
    if (std::filesystem::exists(db + "-streams", ec))
        for (const auto& e : std::filesystem::recursive_directory_iterator(db + "-streams"))
            if (e.is_regular_file()) n += e.file_size();
    return n;
}

// The writer's worker: one thread running an io_context, as the CLI will have it.
struct worker_thread {
    asio::io_context io;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard{io.get_executor()};
    std::thread thread{[this] {
        pthread_setname_np(pthread_self(), "journal-writer");  // for perf --comm
        io.run();
    }};

    double cpu() {  // the worker thread's CPU time so far
        std::promise<double> p;
        asio::post(io, [&] { p.set_value(cpu_seconds(CLOCK_THREAD_CPUTIME_ID)); });
        return p.get_future().get();
    }
    ~worker_thread() {
        guard.reset();
        thread.join();
    }
};

// async_sync() waited for on the run's io_context; returns the latency.
double sync(journal_writer& w, asio::io_context& io) {
    auto t = clock_type::now();
    bool done = false;
    std::optional<journal_error> error;
    w.async_sync([&](std::optional<journal_error> e) {
        error = std::move(e);
        done = true;
    });
    io.restart();
    while (!done) io.run_one();
    if (error) {
        std::fprintf(stderr, "journal_bench: %s\n", error->message.c_str());
        std::exit(1);
    }
    return seconds_since(t);
}

journal_run make_run(long tasks) {
    journal_run r;
    r.run_id = "bench-" + std::to_string(::getpid()) + "-" +
               std::to_string(clock_type::now().time_since_epoch().count());
    r.workflow_name = "bench";
    r.workflow_path = "/bench.yaml";
    r.workflow_source = std::string(4096, '#');
    r.workflow_digest = "sha256:0";
    r.plan_digest = "sha256:1";
    r.base_dir = "/tmp";
    r.agentctl_version = "bench";
    r.task_count = static_cast<std::uint32_t>(tasks);
    r.owner = this_process_owner();
    return r;
}

attempt_intent make_intent(std::uint32_t i) {
    attempt_intent a;
    a.task_index = i;
    a.task_id = "t--" + std::to_string(i);
    a.isolation = "process";
    a.argv = {"/bin/true"};
    a.env_names = {"PATH"};
    a.limits = boost::json::object{{"timeoutMs", 120000}, {"stdoutBytes", 1048576}, {"stderrBytes", 1048576}};
    return a;
}

// A result as the built-in runner makes it: the streams kept in `output`.
task_result make_result(std::string out) {
    task_result r;
    r.state = task_state::succeeded;
    r.attempts = 1;
    r.exit_code = 0;
    r.duration_ms = 1;
    r.command = "/bin/true";
    r.isolation = "process";
    r.containment = "cgroup";
    r.output_bytes = out.size();
    r.output = boost::json::object{{"status", "changed"},
                                   {"changed", true},
                                   {"exitCode", 0},
                                   {"stdout", std::move(out)},
                                   {"stderr", ""}};
    r.streams_in_output = true;
    return r;
}

journal open_journal(const options& o, const std::string& path) {
    journal_open_options jo;
    jo.durability = o.full ? journal_durability::full : journal_durability::normal;
    jo.stream_file_threshold = o.threshold;
    jo.page_size = o.page_size;
    jo.wal_autocheckpoint = o.checkpoint;
    auto j = journal::open(path, journal_access::write, jo);
    if (!j) {
        std::fprintf(stderr, "journal_bench: %s\n", j.error().message.c_str());
        std::exit(1);
    }
    return std::move(*j);
}

long max_rss_kib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int run_workload(const options& o, const std::string& path) {
    asio::io_context io;
    worker_thread worker;
    double run_cpu0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    auto writer =
        std::make_unique<journal_writer>(io.get_executor(), worker.io.get_executor(), open_journal(o, path));
    journal_run run = make_run(o.n);
    std::string run_id = run.run_id;
    bool big = o.mode == "big";
    std::string capture_template(o.size, 'x');
    for (std::size_t i = 0; i < capture_template.size(); ++i)
        capture_template[i] = static_cast<char>('a' + (i * 7) % 26);

    auto started = clock_type::now();
    writer->record_run(std::move(run));
    sync(*writer, io);
    std::vector<double> latencies;
    std::deque<std::uint32_t> in_flight;
    std::uint32_t next = 0, done = 0;
    auto n = static_cast<std::uint32_t>(o.n);
    std::size_t waiting = 0;  // tasks whose intents are recorded, waiting for their sync
    auto start_batch = [&](std::uint32_t first, std::uint32_t last) {
        for (std::uint32_t i = first; i < last; ++i) {
            writer->record_handle(attempt_handle{i, 1, 100000 + i, 1,
                                                 "/sys/fs/cgroup/agentctl-" + std::to_string(i), "", "", ""});
            in_flight.push_back(i);
        }
    };
    io.restart();
    while (done < n) {
        // Fill the free slots: their intents, one sync, and they start once it completes.
        std::uint32_t first = next;
        while (in_flight.size() + waiting + (next - first) < static_cast<std::size_t>(o.j) && next < n)
            writer->record_intent(make_intent(next++));
        if (next > first) {
            if (o.serial) {
                latencies.push_back(sync(*writer, io));
                start_batch(first, next);
            } else {
                // Meanwhile the tasks already started run on and finish.
                std::uint32_t last = next;
                waiting += last - first;
                auto t = clock_type::now();
                writer->async_sync([&, first, last, t](std::optional<journal_error> e) {
                    if (e) {
                        std::fprintf(stderr, "journal_bench: %s\n", e->message.c_str());
                        std::exit(1);
                    }
                    latencies.push_back(seconds_since(t));
                    waiting -= last - first;
                    start_batch(first, last);
                });
            }
        }
        if (in_flight.empty()) {  // nothing runs until a sync completes
            if (io.stopped()) io.restart();
            io.run_one();
            continue;
        }
        // The oldest tasks finish: their ends and finals are recorded without waiting,
        // unless the writer says too much is queued.
        for (long k = 0; k < o.burst && !in_flight.empty(); ++k) {
            std::uint32_t i = in_flight.front();
            in_flight.pop_front();
            attempt_end e{i, 1, make_result(std::string(capture_template)), false};
            // The final's streams are the end's (streams_attempt): not carried twice.
            task_final f{i, "t--" + std::to_string(i), make_result(std::string()), 1, false};
            bool full = writer->record_end(std::move(e));
            full |= writer->record_final(std::move(f));
            if (full) sync(*writer, io);
            ++done;
        }
        if (io.stopped()) io.restart();
        io.poll();
    }
    writer->record_run_end(journal_run_end{journal_run_state::succeeded, 0, std::nullopt});
    sync(*writer, io);
    double wall = seconds_since(started);
    double run_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - run_cpu0;
    double writer_cpu = worker.cpu();
    auto stats = writer->stats();
    std::uint64_t bytes_open = journal_bytes(path);

    auto closing = clock_type::now();
    bool closed = false;
    writer->async_close([&](std::optional<journal_error>) { closed = true; });
    io.restart();
    while (!closed) io.run_one();
    double close_s = seconds_since(closing);
    writer.reset();

    std::sort(latencies.begin(), latencies.end());
    auto pct = [&](double p) {
        return latencies.empty()
                   ? 0.0
                   : latencies[std::min(latencies.size() - 1, std::size_t(p * latencies.size()))];
    };
    double mb = big ? static_cast<double>(stats.stream_bytes) / 1e6 : 0.0;
    std::printf(
        "{\"mode\":\"%s\",\"serial\":%s,\"tasks\":%ld,\"jobs\":%ld,\"burst\":%ld,\"stream_bytes\":%zu,"
        "\"durability\":\"%"
        "s\","
        "\"threshold\":%lld,\"page_size\":%d,\"checkpoint\":%d,\"wall_s\":%.3f,\"close_s\":%.3f,\"records\":%"
        "llu,"
        "\"commits\":%llu,\"paced_commits\":%llu,\"largest_batch\":%llu,\"syncs\":%zu,\"sync_p50_us\":%.0f,"
        "\"sync_p99_us\":%.0f,"
        "\"writer_cpu_s\":%.3f,\"run_cpu_s\":%.3f,\"mb_per_s\":%.0f,\"stream_files\":%llu,"
        "\"peak_queued_mib\":%.1f,\"max_rss_mib\":%.1f,\"journal_mib\":%.1f,\"journal_mib_closed\":%.1f",
        o.mode.c_str(), o.serial ? "true" : "false", o.n, o.j, o.burst, o.size, o.full ? "full" : "normal",
        o.threshold == SIZE_MAX ? -1LL : static_cast<long long>(o.threshold), o.page_size, o.checkpoint, wall,
        close_s, static_cast<unsigned long long>(stats.records),
        static_cast<unsigned long long>(stats.commits), static_cast<unsigned long long>(stats.paced_commits),
        static_cast<unsigned long long>(stats.largest_batch), latencies.size(), pct(0.5) * 1e6,
        pct(0.99) * 1e6, writer_cpu, run_cpu, big ? mb / wall : 0.0,
        static_cast<unsigned long long>(stats.stream_files),
        static_cast<double>(stats.peak_queued_bytes) / 1048576.0, static_cast<double>(max_rss_kib()) / 1024.0,
        static_cast<double>(bytes_open) / 1048576.0, static_cast<double>(journal_bytes(path)) / 1048576.0);

    if (!o.gc.empty()) {
        auto t = clock_type::now();
        if (o.gc == "incremental") {
            auto j = journal::open(path, journal_access::write);
            if (!j) return 1;
            auto r = j->gc(0, {});
            if (!r) {
                std::fprintf(stderr, "journal_bench: %s\n", r.error().message.c_str());
                return 1;
            }
        } else {
            // The alternative: delete the rows, then rewrite the whole database with VACUUM.
            sqlite3* db = nullptr;
            char* err = nullptr;
            if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
                sqlite3_exec(db,
                             "BEGIN; DELETE FROM streams; DELETE FROM attempts; DELETE FROM results; DELETE "
                             "FROM runs; "
                             "COMMIT; VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
                             nullptr, nullptr, &err) != SQLITE_OK) {
                std::fprintf(stderr, "journal_bench: VACUUM: %s\n", err ? err : sqlite3_errmsg(db));
                return 1;
            }
            sqlite3_close(db);
            std::filesystem::remove_all(path + "-streams");
        }
        std::printf(",\"gc\":\"%s\",\"gc_s\":%.3f,\"journal_mib_after_gc\":%.1f", o.gc.c_str(),
                    seconds_since(t), static_cast<double>(journal_bytes(path)) / 1048576.0);
    }
    std::printf("}\n");
    return 0;
}

// write(2) of the stream bytes to files, as fast as one thread can: what "into the page
// cache" means on this machine at this moment.
int raw_workload(const options& o, const std::string& dir) {
    // As many distinct buffers as tasks in flight, so that the bytes come from memory, not
    // from a cache-hot template.
    std::vector<std::string> buffers(static_cast<std::size_t>(std::max(1L, o.j)));
    for (auto& b : buffers) {
        b.assign(o.size, 'x');
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + (i * 7) % 26);
    }
    auto started = clock_type::now();
    double cpu0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < o.n; ++i) {
        std::string name = dir + "/raw-" + std::to_string(i);
        FILE* f = std::fopen(name.c_str(), "wbe");
        if (!f) return 1;
        int fd = fileno(f);
        const std::string& data = buffers[static_cast<std::size_t>(i) % buffers.size()];
        for (std::size_t off = 0; off < data.size();) {
            ssize_t n = ::write(fd, data.data() + off, data.size() - off);
            if (n <= 0) return 1;
            off += static_cast<std::size_t>(n);
        }
        if (o.full) ::fdatasync(fd);
        std::fclose(f);
    }
    double wall = seconds_since(started);
    std::printf(
        "{\"mode\":\"raw\",\"tasks\":%ld,\"stream_bytes\":%zu,\"durability\":\"%s\",\"wall_s\":%.3f,"
        "\"writer_cpu_s\":%.3f,\"mb_per_s\":%.0f}\n",
        o.n, o.size, o.full ? "full" : "normal", wall, cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0,
        static_cast<double>(o.n) * static_cast<double>(o.size) / 1e6 / wall);
    return 0;
}

int open_workload(const options& o) {
    journal_open_options jo;
    jo.quick_check = o.check;
    auto t = clock_type::now();
    auto j = journal::open(o.db, o.write ? journal_access::write : journal_access::read, jo);
    double s = seconds_since(t);
    if (!j) {
        std::fprintf(stderr, "journal_bench: %s\n", j.error().message.c_str());
        return 1;
    }
    std::printf(
        "{\"mode\":\"open\",\"write\":%s,\"quick_check\":%s,\"quick_checked\":%s,\"open_s\":%.3f,"
        "\"journal_mib\":%.1f}\n",
        o.write ? "true" : "false", o.check ? "true" : "false", j->quick_checked() ? "true" : "false", s,
        static_cast<double>(journal_bytes(o.db)) / 1048576.0);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    options o = parse(argc, argv);
    if (o.mode == "open") {
        if (o.db.empty()) usage();
        return open_workload(o);
    }
    std::string dir;
    std::string path = o.db;
    if (path.empty()) {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/journal-bench-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!::mkdtemp(buf.data())) return 1;
        dir = buf.data();
        path = dir + "/journal.db";
    }
    int rc = o.mode == "raw"
                 ? raw_workload(o, dir.empty() ? std::filesystem::path(path).parent_path().string() : dir)
                 : run_workload(o, path);
    if (!dir.empty()) std::filesystem::remove_all(dir);
    return rc;
}
