// `agentctl worker` as a process, driven over pipes the way the Slurm backend drives it through
// srun (docs/WORKER.md, "The worker's loop"): the handshake, runs, cancels, the end of the
// connection killing every task tree, the digest refusal and protocol errors. No Slurm here.
// Synchronised on frames and marker files; every wait is bounded.
#include "json/sha256.hpp"
#include "worker_protocol/messages.hpp"

#include <boost/algorithm/string/join.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace fs = std::filesystem;
namespace wp = agentctl::worker_protocol;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

std::string agentctl_bin() {
    const char* bin = std::getenv("AGENTCTL_BIN");
    BOOST_TEST_REQUIRE(bin != nullptr, "AGENTCTL_BIN is not set (run through meson test)");
    return bin;
}

std::string file_digest(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    agentctl::sha256 h;
    h.update(bytes.str());
    auto d = h.finish();
    return std::string(d.begin(), d.end());
}

/// A fresh folder for one case's workspace and marker files.
struct scratch {
    fs::path dir;
    scratch() {
        char tmpl[] = "/tmp/agentctl-worker-test-XXXXXX";
        BOOST_TEST_REQUIRE(::mkdtemp(tmpl) != nullptr);
        dir = tmpl;
    }
    ~scratch() {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }
    /// Until `name` exists in the folder, or `bound` passes (then false).
    bool wait_for(const std::string& name, milliseconds bound = 20s) const {
        auto until = steady::now() + bound;
        while (!fs::exists(dir / name)) {
            if (steady::now() >= until) return false;
            std::this_thread::sleep_for(2ms);  // polling a marker file, not a timing assumption
        }
        return true;
    }
    std::string read(const std::string& name) const {
        std::ifstream in(dir / name);
        std::string s;
        std::getline(in, s);
        return s;
    }
};

/// The start time of a process (field 22 of /proc/PID/stat), or "" when it is gone or a zombie.
std::string live_start_time(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return "";
    auto close = stat.rfind(')');
    if (close == std::string::npos) return "";
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    std::vector<std::string> fields;
    while (rest >> field) fields.push_back(field);
    if (fields.size() < 20 || fields[0] == "Z") return "";
    return fields[19];
}

/// `agentctl worker` with its stdin, stdout and stderr on pipes.
class worker_process {
public:
    worker_process() {
        int in[2], out[2], err[2];
        BOOST_TEST_REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
        BOOST_TEST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        BOOST_TEST_REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        std::string bin = agentctl_bin();
        std::string word = "worker";
        char* argv[] = {bin.data(), word.data(), nullptr};
        int rc = ::posix_spawn(&pid_, bin.c_str(), &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        ::close(in[0]);
        ::close(out[1]);
        ::close(err[1]);
        in_ = in[1];
        out_ = out[0];
        err_ = err[0];
        BOOST_TEST_REQUIRE(rc == 0);
    }
    ~worker_process() {
        if (in_ >= 0) ::close(in_);
        if (!reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        ::close(out_);
        ::close(err_);
    }

    pid_t pid() const { return pid_; }

    void send(const std::string& bytes) {
        std::size_t done = 0;
        while (done < bytes.size()) {
            ssize_t n = ::write(in_, bytes.data() + done, bytes.size() - done);
            BOOST_TEST_REQUIRE(n > 0, "write to the worker failed");
            done += static_cast<std::size_t>(n);
        }
    }
    void close_input() {
        ::close(in_);
        in_ = -1;
    }

    static std::string hello_frame(const std::string& digest, std::uint32_t heartbeat_ms = 1000) {
        wp::hello h;
        h.build_digest = digest;
        h.run_id = "test-run";
        h.heartbeat_ms = heartbeat_ms;
        std::string frame;
        BOOST_TEST_REQUIRE(!wp::append_hello(frame, h));
        return frame;
    }
    void hello(const std::string& digest, std::uint32_t heartbeat_ms = 1000) {
        send(hello_frame(digest, heartbeat_ms));
    }

    /// The next frame that is not a heartbeat; nullopt when the stream ended. Fails the case
    /// when none comes within `bound`.
    std::optional<wp::frame> next(milliseconds bound = 20s) {
        auto until = steady::now() + bound;
        wp::frame f;
        for (;;) {
            auto s = decoder_.next(f);
            if (s == wp::frame_decoder::status::error)
                BOOST_FAIL("not a frame: " << decoder_.error()->message);
            if (s == wp::frame_decoder::status::frame) {
                if (f.type == wp::message_type::welcome || f.type == wp::message_type::refuse)
                    decoder_.set_limit(wp::payload_limit);
                if (f.type == wp::message_type::heartbeat) continue;
                return f;
            }
            if (eof_) return std::nullopt;
            pump(until);
            BOOST_TEST_REQUIRE(bool(steady::now() < until),
                               "no frame from the worker in time; stderr: " << stderr_);
        }
    }

    wp::welcome welcome() {
        auto f = next();
        BOOST_TEST_REQUIRE(f.has_value());
        BOOST_TEST_REQUIRE(int(f->type) == int(wp::message_type::welcome), "stderr: " << stderr_);
        auto w = wp::decode_welcome(f->payload);
        BOOST_TEST_REQUIRE(bool(w));
        return *w;
    }

    /// The worker's exit status (256 + signal when killed), within `bound`.
    int wait(milliseconds bound = 20s) {
        auto until = steady::now() + bound;
        for (;;) {
            int status = 0;
            pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                reaped_ = true;
                drain_rest();
                return WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
            }
            BOOST_TEST_REQUIRE(bool(steady::now() < until),
                               "the worker did not exit in time; stderr: " << stderr_);
            pump(std::min(until, steady::now() + 5ms));
        }
    }

    const std::string& stderr_text() const { return stderr_; }

private:
    // Reads what is there on stdout and stderr (both, so neither pipe fills up).
    void pump(steady::time_point until) {
        pollfd fds[2] = {{eof_ ? -1 : out_, POLLIN, 0}, {err_eof_ ? -1 : err_, POLLIN, 0}};
        auto left = std::chrono::duration_cast<milliseconds>(until - steady::now()).count();
        if (::poll(fds, 2, static_cast<int>(std::max<long>(0, std::min<long>(left, 100)))) <= 0) return;
        char buf[65536];
        if (fds[0].revents) {
            ssize_t n = ::read(out_, buf, sizeof buf);
            if (n <= 0)
                eof_ = true;
            else
                decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        }
        if (fds[1].revents) {
            ssize_t n = ::read(err_, buf, sizeof buf);
            if (n <= 0)
                err_eof_ = true;
            else
                stderr_.append(buf, static_cast<std::size_t>(n));
        }
    }
    void drain_rest() {
        auto until = steady::now() + 5s;
        while ((!eof_ || !err_eof_) && steady::now() < until) pump(until);
    }

    pid_t pid_ = -1;
    int in_ = -1, out_ = -1, err_ = -1;
    bool eof_ = false, err_eof_ = false, reaped_ = false;
    std::string stderr_;
    wp::frame_decoder decoder_;
};

wp::run_request shell(std::uint64_t tag, const fs::path& root, const std::string& script) {
    wp::run_request r;
    r.tag = tag;
    r.executable = "/bin/sh";
    r.argv = {"sh", "-c", script};
    r.env = {"PATH=/usr/bin:/bin", "GREETING=hello"};
    r.workspace_root = root.string();
    r.stdout_limit = 1 << 20;
    r.stderr_limit = 1 << 20;
    r.combined_limit = 2 << 20;
    r.timeout_ms = 60000;
    r.drain_grace_ms = 250;
    return r;
}

std::string run_frame(const wp::run_request& r) {
    std::string frame;
    BOOST_TEST_REQUIRE(!wp::append_run(frame, r));
    return frame;
}

std::string cancel_frame(std::uint64_t tag, wp::cancel_kind kind) {
    std::string frame;
    BOOST_TEST_REQUIRE(!wp::append_cancel(frame, {tag, kind}));
    return frame;
}

/// A background child of a running task, as /proc knew it once the task was up.
struct sleeper {
    pid_t pid = 0;
    std::string start;  ///< its start time: another value (or none) later means it is gone
};

/// Runs task `tag`, a shell whose background `sleep 300` outlives it unless its tree is
/// killed, and waits for its marker file.
sleeper start_sleeper(worker_process& w, const scratch& s, std::uint64_t tag = 1) {
    w.send(run_frame(shell(tag, s.dir, "sleep 300 & echo $! > child; touch ready; wait")));
    BOOST_TEST_REQUIRE(s.wait_for("ready"), "the task did not start; stderr: " << w.stderr_text());
    sleeper out;
    out.pid = std::stoi(s.read("child"));
    out.start = live_start_time(out.pid);
    BOOST_TEST_REQUIRE(!out.start.empty());
    return out;
}

/// A task's frames up to its result: started (when spawned), its output, the result.
struct task_frames {
    std::optional<wp::started_note> started;
    std::string out, err;
    wp::run_result result;
};

/// Frames until the result of `tag`; the frames of other tags go to `others`.
task_frames until_result(worker_process& w, std::uint64_t tag,
                         std::map<std::uint64_t, task_frames>* others = nullptr) {
    std::map<std::uint64_t, task_frames> seen;
    for (;;) {
        auto f = w.next();
        BOOST_TEST_REQUIRE(f.has_value(), "the stream ended before the result; stderr: " << w.stderr_text());
        std::uint64_t of = 0;
        if (f->type == wp::message_type::started) {
            auto m = wp::decode_started(f->payload);
            BOOST_TEST_REQUIRE(bool(m));
            of = m->tag;
            seen[of].started = *m;
        } else if (f->type == wp::message_type::output) {
            auto m = wp::decode_output(f->payload);
            BOOST_TEST_REQUIRE(bool(m));
            of = m->tag;
            (m->stream == wp::stream_id::stdout_stream ? seen[of].out : seen[of].err) += m->bytes;
        } else {
            BOOST_TEST_REQUIRE(int(f->type) == int(wp::message_type::result));
            auto m = wp::decode_result(f->payload);
            BOOST_TEST_REQUIRE(bool(m));
            of = m->tag;
            seen[of].result = *m;
            if (of == tag) {
                task_frames t = seen[of];
                if (others)
                    for (auto& [k, v] : seen)
                        if (k != tag) (*others)[k] = v;
                return t;
            }
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(worker_process_suite)

BOOST_AUTO_TEST_CASE(handshake_then_clean_close) {
    worker_process w;
    std::string digest = file_digest(agentctl_bin());
    w.hello(digest);
    wp::welcome welcome = w.welcome();
    BOOST_TEST(!wp::check_welcome(welcome, digest));
    BOOST_TEST(welcome.build_digest == digest);  // the SHA-256 of the very file that runs
    BOOST_TEST(welcome.pid == static_cast<std::uint32_t>(w.pid()));
    BOOST_TEST(welcome.cpus >= 1u);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    BOOST_TEST(welcome.node == host);
    w.close_input();
    // Nothing ran: the last frame says so (docs/WORKER.md, "The end of a run").
    auto bye = w.next();
    BOOST_TEST_REQUIRE(bye.has_value());
    BOOST_TEST_REQUIRE(int(bye->type) == int(wp::message_type::bye));
    BOOST_TEST(wp::decode_bye(bye->payload)->tasks == 0u);
    BOOST_TEST(!w.next().has_value());
    BOOST_TEST(w.wait() == 0, w.stderr_text());
}

BOOST_AUTO_TEST_CASE(runs_a_task_as_a_local_run_does) {
    scratch s;
    fs::create_directory(s.dir / "sub");
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    auto r = shell(7, s.dir,
                   "printf '%s|%s|' \"$GREETING\" \"$(pwd)\"; env | wc -l; printf 'to stderr' >&2; exit 3");
    r.cwd = "sub";
    w.send(run_frame(r));
    task_frames t = until_result(w, 7);
    BOOST_TEST_REQUIRE(t.started.has_value());
    BOOST_TEST(t.started->pid > 0u);
    BOOST_TEST(t.started->start_lo <= t.started->start_hi);
    // Exactly the declared environment (PATH, GREETING, and the PWD sh sets), the cwd beneath the root.
    BOOST_TEST(t.out == "hello|" + fs::canonical(s.dir / "sub").string() + "|3\n");
    BOOST_TEST(t.err == "to stderr");
    BOOST_TEST(int(t.result.outcome) == int(wp::run_outcome::exited));
    BOOST_TEST(t.result.exit_code.value_or(99) == 3u);
    BOOST_TEST(!t.result.signal.has_value());
    BOOST_TEST(t.result.stdout_size == t.out.size());
    BOOST_TEST(t.result.stderr_size == t.err.size());
    BOOST_TEST(t.result.error_code.empty());

    // A cwd that leaves the root runs nothing.
    auto escape = shell(8, s.dir, "touch ran");
    escape.cwd = "..";
    w.send(run_frame(escape));
    task_frames e = until_result(w, 8);
    BOOST_TEST(!e.started.has_value());
    BOOST_TEST(int(e.result.outcome) == int(wp::run_outcome::spawn_failed));
    BOOST_TEST(e.result.error_code == "cwd_unavailable");
    BOOST_TEST(!fs::exists(s.dir / "ran"));

    // The output cap is the worker's, as locally.
    auto loud = shell(9, s.dir, "head -c 100000 /dev/zero");
    loud.stdout_limit = 1000;
    w.send(run_frame(loud));
    task_frames l = until_result(w, 9);
    BOOST_TEST(int(l.result.outcome) == int(wp::run_outcome::output_limit_exceeded));
    BOOST_TEST(l.out.size() == 1000u);
    BOOST_TEST(l.result.limit_stream == "stdout");
    w.close_input();
    // Every task reaped, then the bye, the last frame.
    auto bye = w.next();
    BOOST_TEST_REQUIRE(bye.has_value());
    BOOST_TEST_REQUIRE(int(bye->type) == int(wp::message_type::bye));
    BOOST_TEST(wp::decode_bye(bye->payload)->tasks >= 1u);
    BOOST_TEST(!w.next().has_value());
    BOOST_TEST(w.wait() == 0, w.stderr_text());
}

BOOST_AUTO_TEST_CASE(cancel_ends_the_tree) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    sleeper child = start_sleeper(w, s);
    w.send(cancel_frame(1, wp::cancel_kind::terminal));
    task_frames t = until_result(w, 1);
    BOOST_TEST(int(t.result.outcome) == int(wp::run_outcome::cancelled));
    BOOST_TEST(live_start_time(child.pid) != child.start);  // the background sleep is gone too
    BOOST_TEST_REQUIRE(t.started.has_value());
    BOOST_TEST(live_start_time(static_cast<pid_t>(t.started->pid)).empty());
    // A cancel that crosses the result on the wire is ignored.
    w.send(cancel_frame(1, wp::cancel_kind::graceful));
    w.close_input();
    BOOST_TEST(w.wait() == 0, w.stderr_text());
}

BOOST_AUTO_TEST_CASE(closing_stdin_kills_every_task_tree) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    std::uint32_t cpus = w.welcome().cpus;
    std::uint32_t tasks = std::min<std::uint32_t>(cpus, 3);
    std::vector<std::pair<pid_t, std::string>> processes;
    for (std::uint32_t i = 0; i < tasks; ++i) {
        std::string n = std::to_string(i);
        w.send(run_frame(shell(
            i + 1, s.dir,
            "sleep 300 & echo $! > child" + n + "; echo $$ > leader" + n + "; touch ready" + n + "; wait")));
    }
    for (std::uint32_t i = 0; i < tasks; ++i) {
        std::string n = std::to_string(i);
        BOOST_TEST_REQUIRE(s.wait_for("ready" + n), "task " << n << " did not start; " << w.stderr_text());
        for (const char* what : {"child", "leader"}) {
            pid_t pid = std::stoi(s.read(what + n));
            processes.emplace_back(pid, live_start_time(pid));
            BOOST_TEST_REQUIRE(!processes.back().second.empty());
        }
    }
    w.close_input();
    BOOST_TEST(w.wait() == 3, w.stderr_text());  // tasks were running: not a clean close
    BOOST_TEST(w.stderr_text().find("killing them") != std::string::npos, w.stderr_text());
    // The worker waited for the trees before it exited: nothing of them is left.
    for (auto& [pid, start] : processes)
        BOOST_TEST(live_start_time(pid) != start, "pid " << pid << " survived");
}

std::string slots_frame(std::uint32_t count) {
    std::string frame;
    BOOST_TEST_REQUIRE(!wp::append_slots(frame, {count}));
    return frame;
}

// Pipelining (docs/WORKER.md): beyond its slot count a run waits in the worker's queue and
// starts, in arrival order, when a running one ends; `started` says when.
BOOST_AUTO_TEST_CASE(runs_beyond_the_slots_wait_in_the_queue) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    w.send(slots_frame(1));
    sleeper first = start_sleeper(w, s, 1);
    w.send(run_frame(shell(2, s.dir, "touch second")));
    w.send(run_frame(shell(3, s.dir, "test -e second && touch third")));
    w.send(cancel_frame(1, wp::cancel_kind::terminal));
    // The frames in the order they came: "started 1", ..., up to the result of 3.
    std::vector<std::string> order;
    for (bool done = false; !done;) {
        auto f = w.next();
        BOOST_TEST_REQUIRE(f.has_value(), "the stream ended early; stderr: " << w.stderr_text());
        if (f->type == wp::message_type::started) {
            order.push_back("started " + std::to_string(wp::decode_started(f->payload)->tag));
        } else if (f->type == wp::message_type::result) {
            auto r = wp::decode_result(f->payload);
            BOOST_TEST_REQUIRE(bool(r));
            order.push_back("result " + std::to_string(r->tag));
            if (r->tag == 3) {
                BOOST_TEST(r->exit_code.value_or(99) == 0u);  // 2 ran before 3
                done = true;
            }
        }
    }
    std::vector<std::string> expected = {"started 1", "result 1",  "started 2",
                                         "result 2",  "started 3", "result 3"};
    BOOST_TEST(order == expected, boost::algorithm::join(order, ", "));
    BOOST_TEST(live_start_time(first.pid) != first.start);
    w.close_input();
    BOOST_TEST(w.wait() == 0, w.stderr_text());
}

// A cancel of a queued run drops it: its result says cancelled, with no `started` before it,
// and it never runs.
BOOST_AUTO_TEST_CASE(a_queued_run_cancelled_never_starts) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    w.send(slots_frame(1));
    sleeper first = start_sleeper(w, s, 1);
    w.send(run_frame(shell(2, s.dir, "touch ran")));
    w.send(cancel_frame(2, wp::cancel_kind::graceful));
    std::map<std::uint64_t, task_frames> others;
    task_frames second = until_result(w, 2, &others);
    BOOST_TEST(!second.started.has_value());
    BOOST_TEST(int(second.result.outcome) == int(wp::run_outcome::cancelled));
    BOOST_TEST(second.result.error_message.find("never started") != std::string::npos);
    // Task 1 still runs; once it ends the queue is empty: nothing else starts.
    w.send(cancel_frame(1, wp::cancel_kind::terminal));
    task_frames one = until_result(w, 1);
    BOOST_TEST(int(one.result.outcome) == int(wp::run_outcome::cancelled));
    w.close_input();
    BOOST_TEST(w.wait() == 0, w.stderr_text());
    BOOST_TEST(!fs::exists(s.dir / "ran"));
    BOOST_TEST(live_start_time(first.pid) != first.start);
}

// The connection ends with runs queued: they are dropped, never started, and the running
// task's tree is killed as always.
BOOST_AUTO_TEST_CASE(closing_stdin_drops_the_queue) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    w.send(slots_frame(1));
    sleeper first = start_sleeper(w, s, 1);
    for (std::uint64_t tag = 2; tag <= 4; ++tag)
        w.send(run_frame(shell(tag, s.dir, "touch ran" + std::to_string(tag))));
    w.close_input();
    BOOST_TEST(w.wait() == 3, w.stderr_text());
    for (int tag = 2; tag <= 4; ++tag) BOOST_TEST(!fs::exists(s.dir / ("ran" + std::to_string(tag))));
    BOOST_TEST(live_start_time(first.pid) != first.start);
}

BOOST_AUTO_TEST_CASE(sigterm_kills_every_task_tree) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()));
    w.welcome();
    sleeper child = start_sleeper(w, s);
    ::kill(w.pid(), SIGTERM);
    BOOST_TEST(w.wait() == 3, w.stderr_text());
    BOOST_TEST(live_start_time(child.pid) != child.start);
}

BOOST_AUTO_TEST_CASE(another_build_is_refused_and_nothing_runs) {
    scratch s;
    worker_process w;
    std::string digest = file_digest(agentctl_bin());
    digest[0] = static_cast<char>(digest[0] ^ 1);
    // Sent behind the hello in the same write: it must never run. (In two writes, a worker
    // that refuses before the second one has exited, and the write raises SIGPIPE here: the
    // worker computes its digest before the hello arrives.)
    w.send(worker_process::hello_frame(digest) + run_frame(shell(1, s.dir, "touch ran")));
    auto f = w.next();
    BOOST_TEST_REQUIRE(f.has_value());
    BOOST_TEST_REQUIRE(int(f->type) == int(wp::message_type::refuse));
    auto r = wp::decode_refuse(f->payload);
    BOOST_TEST_REQUIRE(bool(r));
    BOOST_TEST(int(r->reason) == int(wp::refusal_reason::build_digest));
    BOOST_TEST(r->message.find(wp::digest_text(digest)) != std::string::npos, r->message);
    BOOST_TEST(!w.next().has_value());
    BOOST_TEST(w.wait() == 3);
    BOOST_TEST(!fs::exists(s.dir / "ran"));
}

BOOST_AUTO_TEST_CASE(a_protocol_error_ends_the_worker) {
    {
        // Text instead of frames: its fifth byte is no message type.
        worker_process w;
        w.send("hello there, are you a worker?\n");
        BOOST_TEST(!w.next().has_value());
        BOOST_TEST(w.wait() == 3);
        BOOST_TEST(w.stderr_text().find("protocol error (unknown_type)") != std::string::npos,
                   w.stderr_text());
    }
    {
        // A hello header announcing more than the handshake allows: refused on the header alone.
        worker_process w;
        w.send(std::string("\x01\x10\x00\x00\x01", 5));
        BOOST_TEST(!w.next().has_value());
        BOOST_TEST(w.wait() == 3);
        BOOST_TEST(w.stderr_text().find("protocol error (frame_too_large)") != std::string::npos,
                   w.stderr_text());
    }
    {
        // A run before the handshake.
        scratch s;
        worker_process w;
        w.send(run_frame(shell(1, s.dir, "touch ran")));
        BOOST_TEST(!w.next().has_value());
        BOOST_TEST(w.wait() == 3);
        BOOST_TEST(w.stderr_text().find("protocol error (") != std::string::npos, w.stderr_text());
        BOOST_TEST(!fs::exists(s.dir / "ran"));
    }
    {
        // A frame cut short by the end of the stream, with a task running: it is killed.
        scratch s;
        worker_process w;
        w.hello(file_digest(agentctl_bin()));
        w.welcome();
        sleeper child = start_sleeper(w, s);
        w.send(run_frame(shell(2, s.dir, "true")).substr(0, 9));
        w.close_input();
        BOOST_TEST(w.wait() == 3);
        BOOST_TEST(w.stderr_text().find("truncated_stream") != std::string::npos, w.stderr_text());
        BOOST_TEST(live_start_time(child.pid) != child.start);
    }
}

BOOST_AUTO_TEST_CASE(a_silent_driver_is_taken_for_gone) {
    scratch s;
    worker_process w;
    w.hello(file_digest(agentctl_bin()), /*heartbeat_ms=*/50);
    w.welcome();
    sleeper child = start_sleeper(w, s);
    // The pipe stays open but nothing more is sent: after three intervals the worker ends it.
    BOOST_TEST(w.wait() == 3);
    BOOST_TEST(w.stderr_text().find("taking it for gone") != std::string::npos, w.stderr_text());
    BOOST_TEST(live_start_time(child.pid) != child.start);
}

BOOST_AUTO_TEST_SUITE_END()
