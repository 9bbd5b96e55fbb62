// crash_victim: a program that uses the watchdog the way the agentctl CLI does, for the crash
// tests to SIGKILL. It starts the watchdog first thing, runs trees of
//     sh -c "P sleep 300 & setsid P sleep 301 & P sleep 302; wait"    (P: the probe)
// through async_run_process, and writes its marker once every process of every tree runs.
//
//   crash_victim --probe PATH --pidfile-dir DIR --marker PATH [--trees N] [--process-group]
//                [--escapee DIR] [--no-watchdog] [--report PATH]
//                [--engine NAME PATH OWNER] [--engine-env NAME=VALUE]...
//                [--scancel PATH] [--scancel-env NAME=VALUE]... [--job ID]... [--release ID]...
//                [--on-sigint note|cancel] [--clean-exit] [--drop-watchdog]
//                [--container NAME PATH IMAGE]... [--container-dir DIR] [--owner LABEL]
//
// The nonce that tags every tree process comes from $AGENTCTL_TEST_NONCE, not argv, so that
// this process itself never matches a scan for it. The marker holds "victim PID" and
// "watchdog PID" lines (0 without a watchdog). --escapee adds a tree whose double-forked
// setsid holder (pidfiles in DIR) no process group reaches. --clean-exit cancels everything
// once ready, waits, says clean_exit() and exits 0; --drop-watchdog destroys the watchdog
// without clean_exit() once ready (as an exception unwinding main would) and keeps running.
// --container runs `PATH run --rm` of IMAGE labelled agentctl.owner=LABEL (and
// agentctl.test=1), with DIR bound at /m where it touches a file once it runs; the engine is
// announced to the watchdog with the engine variables of our own environment, and the
// marker waits for every container's file too.
#include <agentctl/process.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;

struct options {
    std::string probe, pidfile_dir, marker, escapee_dir, report, on_sigint;
    int trees = 4;
    bool process_group = false, no_watchdog = false, clean_exit = false, drop_watchdog = false;
    std::vector<agentctl::engine_client> engines;
    std::vector<std::string> engine_env;
    std::string scancel;
    std::vector<std::string> scancel_env, jobs, releases;
    struct container {
        std::string engine, path, image;
    };
    std::vector<container> containers;
    std::string container_dir, owner;
};

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "crash_victim: %s\n", what.c_str());
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("missing value after " + a);
            return argv[++i];
        };
        if (a == "--probe")
            o.probe = value();
        else if (a == "--pidfile-dir")
            o.pidfile_dir = value();
        else if (a == "--marker")
            o.marker = value();
        else if (a == "--trees")
            o.trees = std::atoi(value().c_str());
        else if (a == "--process-group")
            o.process_group = true;
        else if (a == "--escapee")
            o.escapee_dir = value();
        else if (a == "--no-watchdog")
            o.no_watchdog = true;
        else if (a == "--report")
            o.report = value();
        else if (a == "--engine") {
            agentctl::engine_client e;
            e.name = value();
            e.path = value();
            e.owner_label = value();
            o.engines.push_back(e);
        } else if (a == "--engine-env")
            o.engine_env.push_back(value());
        else if (a == "--scancel")
            o.scancel = value();
        else if (a == "--scancel-env")
            o.scancel_env.push_back(value());
        else if (a == "--job")
            o.jobs.push_back(value());
        else if (a == "--release")
            o.releases.push_back(value());
        else if (a == "--on-sigint")
            o.on_sigint = value();
        else if (a == "--clean-exit")
            o.clean_exit = true;
        else if (a == "--drop-watchdog")
            o.drop_watchdog = true;
        else if (a == "--container") {
            options::container c;
            c.engine = value();
            c.path = value();
            c.image = value();
            o.containers.push_back(c);
        } else if (a == "--container-dir")
            o.container_dir = value();
        else if (a == "--owner")
            o.owner = value();
        else
            fail("unknown option " + a);
    }
    if (o.probe.empty() || o.pidfile_dir.empty() || o.marker.empty())
        fail("--probe, --pidfile-dir, --marker needed");
    return o;
}

int count_files(const std::string& dir) {
    int n = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            if (e->d_name[0] == '.') continue;
            // A pidfile counts once written: "<pid> <start>".
            std::ifstream in(dir + "/" + e->d_name);
            long pid = 0, start = 0;
            if (in >> pid >> start) ++n;
        }
        ::closedir(d);
    }
    return n;
}

int count_entries(const std::string& dir) {
    int n = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
        ::closedir(d);
    }
    return n;
}

int processes_with(const std::string& nonce) {
    int n = 0;
    if (DIR* d = ::opendir("/proc")) {
        while (dirent* e = ::readdir(d)) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
            std::stringstream text;
            text << in.rdbuf();
            if (text.str().find(nonce) != std::string::npos) ++n;
        }
        ::closedir(d);
    }
    return n;
}

void write_atomically(const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << text;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
    options opt = parse(argc, argv);
    const char* nonce_env = std::getenv("AGENTCTL_TEST_NONCE");
    if (nonce_env == nullptr || *nonce_env == 0) fail("AGENTCTL_TEST_NONCE is not set");
    std::string nonce = nonce_env;

    // First thing, before any thread: the watchdog.
    std::optional<agentctl::watchdog> wd;
    if (!opt.no_watchdog) {
        agentctl::watchdog_options wo;
        wo.report_path = opt.report;
        std::string error;
        wd = agentctl::watchdog::start(wo, error);
        if (!wd) fail("watchdog: " + error);
    }

    // As the CLI: the cgroup leaves are made ahead and removed on a housekeeping thread, so
    // empty spare leaves sit beside the trees' when the victim dies.
    asio::thread_pool housekeeping(1);
    asio::io_context io(1);
    agentctl::use_housekeeping_executor(io, housekeeping.get_executor());
    if (wd) {
        wd->observe(io);
        for (auto e : opt.engines) {
            e.env = opt.engine_env;
            wd->announce_engine(e);
        }
        if (!opt.scancel.empty()) wd->announce_slurm({opt.scancel, opt.scancel_env});
        for (auto& j : opt.jobs) wd->announce_slurm_job(j);
        for (auto& j : opt.releases) wd->release_slurm_job(j);
    }
    // The engine clients' environment: the engines' own variables from ours, nothing else.
    std::vector<std::string> engine_env;
    for (const char* name :
         {"DOCKER_HOST", "CONTAINER_HOST", "CONTAINERS_CONF", "XDG_RUNTIME_DIR", "HOME", "PATH"}) {
        if (const char* v = std::getenv(name)) engine_env.push_back(std::string(name) + "=" + v);
    }
    if (wd) {
        // Announced before the first container exists.
        for (auto& c : opt.containers) wd->announce_engine({c.engine, c.path, engine_env, opt.owner});
    }

    auto policy = opt.process_group ? agentctl::containment_policy::process_group_only
                                    : agentctl::containment_policy::automatic;
    std::list<asio::cancellation_signal> cancels;
    int running = 0;
    bool ready = false;
    auto start = [&](std::vector<std::string> argv_, bool engine_client = false) {
        agentctl::process_request r;
        r.executable = argv_[0];
        r.argv = std::move(argv_);
        r.timeout = std::chrono::seconds(600);
        // Engine clients never get a cgroup leaf (as in the container launcher).
        r.containment = engine_client ? agentctl::containment_policy::process_group_only : policy;
        if (engine_client) r.env = engine_env;
        auto& c = cancels.emplace_back();
        ++running;
        agentctl::async_run_process(io.get_executor(), std::move(r),
                                    asio::bind_cancellation_slot(c.slot(), [&](agentctl::process_result) {
                                        if (--running == 0 && opt.clean_exit && ready) {
                                            // Everything we started is accounted for.
                                            bool confirmed = wd && wd->clean_exit();
                                            write_atomically(opt.marker + ".clean",
                                                             confirmed ? "confirmed\n" : "unconfirmed\n");
                                            io.stop();
                                        }
                                    }));
    };
    std::string tag = " --nonce " + nonce + " --pidfile-dir " + opt.pidfile_dir;
    for (int i = 0; i < opt.trees; ++i) {
        start({"/bin/sh", "-c",
               opt.probe + " sleep 300" + tag + " & /usr/bin/setsid " + opt.probe + " sleep 301" + tag +
                   " & " + opt.probe + " sleep 302" + tag + "; wait"});
    }
    for (std::size_t i = 0; i < opt.containers.size(); ++i) {
        const auto& c = opt.containers[i];
        start({c.path, "run", "--rm", "--label", "agentctl.owner=" + opt.owner, "--label", "agentctl.test=1",
               "--network=none", "--volume", opt.container_dir + ":/m", c.image, "/bin/sh", "-c",
               "touch /m/ready-" + std::to_string(i) + "; exec sleep 300"},
              true);
    }
    int expected_files = 3 * opt.trees, expected_procs = 4 * opt.trees;
    if (!opt.escapee_dir.empty()) {
        start({opt.probe, "fork-hold", "--double-fork", "--setsid", "--leader", "sleep", "--hold", "none",
               "--pidfile-dir", opt.escapee_dir, "--nonce", nonce});
        expected_procs += 2;
    }

    std::optional<asio::signal_set> sigint;
    int sigints = 0;
    std::function<void()> wait_sigint = [&] {
        sigint->async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            ++sigints;
            if (wd) wd->note("sigint " + std::to_string(sigints));
            if (opt.on_sigint == "cancel") {
                for (auto& c : cancels) c.emit(asio::cancellation_type::terminal);
            }
            wait_sigint();
        });
    };
    if (!opt.on_sigint.empty()) {
        sigint.emplace(io, SIGINT);
        wait_sigint();
    }

    // Ready once every pidfile is written and every process carrying the nonce runs.
    int ino = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ino < 0) fail("inotify");
    asio::posix::stream_descriptor events(io, ino);
    for (const auto& dir : {opt.pidfile_dir, opt.escapee_dir, opt.container_dir}) {
        if (!dir.empty() && ::inotify_add_watch(ino, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
            fail(dir);
    }
    asio::steady_timer settle(io);
    std::function<void()> check = [&] {
        int files =
            count_files(opt.pidfile_dir) + (opt.escapee_dir.empty() ? 0 : count_files(opt.escapee_dir));
        bool written = files >= expected_files + (opt.escapee_dir.empty() ? 0 : 2) &&
                       (opt.containers.empty() ||
                        count_entries(opt.container_dir) >= static_cast<int>(opt.containers.size()));
        if (written && processes_with(nonce) != expected_procs) {
            // Every pidfile is there but a process is still on its way in or out (the escapee's
            // intermediate exits just after its child wrote its pidfile): look again shortly.
            settle.expires_after(std::chrono::milliseconds(5));
            settle.async_wait([&](boost::system::error_code ec) {
                if (!ec) check();
            });
            return;
        }
        if (written) {
            ready = true;
            write_atomically(opt.marker, "victim " + std::to_string(::getpid()) + "\nwatchdog " +
                                             std::to_string(wd ? wd->pid() : 0) + "\n");
            if (opt.clean_exit) {
                for (auto& c : cancels) c.emit(asio::cancellation_type::terminal);
            }
            if (opt.drop_watchdog) wd.reset();
            return;
        }
        events.async_wait(asio::posix::descriptor_base::wait_read, [&](boost::system::error_code ec) {
            if (ec) return;
            char buf[4096];
            while (::read(ino, buf, sizeof buf) > 0) {
            }
            check();
        });
    };
    check();
    io.run();
    return 0;
}
