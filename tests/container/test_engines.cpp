// Container mode against the real engines: every case runs on Docker and on Podman, checks
// from inside the container, and ends by proving that no container of the run is left.
#include "harness.hpp"

#include "../support/error_text.hpp"
#include "../support/skips.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

using namespace agentctl;
using namespace ctr_test;
namespace bdata = boost::unit_test::data;

namespace {

const std::vector<std::string> engines = {"docker", "podman"};
const std::string probe = "/usr/local/bin/probe";
const std::string allow = "    processAllowlist: [probe, sh, nope, script.sh]\n";

/// Lines of `text` starting with `prefix` (the prefix removed).
std::vector<std::string> tagged(const std::string& text, const std::string& prefix) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
    return out;
}

/// The `n`-th line starting with `prefix` (prefix removed), or "<none>".
std::string one(const std::string& text, const std::string& prefix, std::size_t n = 0) {
    auto all = tagged(text, prefix);
    return all.size() <= n ? "<none>" : all[n];
}

std::string alnum(const std::string& s, std::size_t max) {
    std::string out;
    for (char c : s)
        if (out.size() < max && std::isalnum(static_cast<unsigned char>(c))) out.push_back(c);
    return out;
}

std::string message_of(const task_result& t) {
    return t.error ? std::string(to_string(t.error->code)) + ": " + t.error->message : "";
}

std::string single(const std::string& action, const std::string& task_extra = "") {
    return "    - {id: t, uses: action:" + action + task_extra + "}\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engines_live)

// T-CTR-01/05/08/09, T-LIM-01/03/04, T-FS-10, T-CTR-15: what the process sees inside.
BOOST_DATA_TEST_CASE(the_fixed_controls_hold_inside_the_container, bdata::make(engines), engine) {
    temp_dir ws;
    ::symlink("/etc/hostname", (ws.path() + "/hostlink").c_str());
    ::symlink("/var/run/docker.sock", (ws.path() + "/socklink").c_str());
    ::symlink("/usr/local/bin/probe", (ws.path() + "/imagelink").c_str());
    std::string script = R"SH(
echo "ids $(id -u):$(id -g)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status | tr -d '\t' | sed 's/^/status /'
while read dev mnt fs opts rest; do
  case $mnt in /|/workspace|/tmp|/dev/shm|/dev/mqueue) echo "mount $mnt $fs $opts";; esac
done < /proc/mounts
echo "net $(ls /sys/class/net | tr '\n' ' ')"
find / -path /proc -prune -o -path /sys -prune -o -type d -print 2>/dev/null | while read d; do
  if touch "$d/.agentctl-probe" 2>/dev/null; then echo "writable $d"; rm -f "$d/.agentctl-probe"; fi
done
echo "pids $(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)"
echo "memory $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
if [ -e /sys/fs/cgroup/memory.swap.max ]; then echo "swap v2 $(cat /sys/fs/cgroup/memory.swap.max)"
elif [ -e /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes ]; then echo "swap v1 $(cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes)"
else echo "swap unsupported"; fi
echo "cpu $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us))"
echo "connect $(nc -w 5 1.1.1.1 53 </dev/null 2>&1 | head -n 1)"
echo "hostlink $(cat /workspace/hostlink 2>&1)"
[ -x /workspace/imagelink ] && echo "imagelink resolves in the image"
if [ -e /workspace/socklink ] || [ -e /var/run/docker.sock ] || [ -e /run/docker.sock ]; then echo "docker.sock reachable"; fi
echo "home ${HOME-unset}"
if touch "$HOME/.agentctl-home" 2>/dev/null; then echo "home writable"; else echo "home read-only"; fi
)SH";
    action_options o;
    o.timeout = "60";
    o.container = "        memoryLimitBytes: 33554432\n        cpuLimitMillis: 500\n        pidsLimit: 37\n";
    auto wf = make_workflow(allow, container_action("inside", engine, "/bin/sh", {"-c", script}, o), single("inside"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST_REQUIRE(t.state == task_state::succeeded, std::string(stderr_of(t)));
    BOOST_TEST(t.isolation == "container");
    BOOST_TEST(t.engine == engine);
    BOOST_TEST(t.containment == "engine");
    const std::string s(stdout_of(t));
    BOOST_TEST_MESSAGE(s);
    BOOST_TEST(one(s, "ids ") == "65532:65532");
    BOOST_TEST(one(s, "status CapEff:") == "0000000000000000");
    BOOST_TEST(one(s, "status CapPrm:") == "0000000000000000");
    BOOST_TEST(one(s, "status NoNewPrivs:") == "1");
    // Read-only root and workspace; /tmp the only writable place, small, noexec, nosuid, nodev.
    std::string root = one(s, "mount / ");
    BOOST_TEST(root.find(" ro,") != std::string::npos, root);
    std::string work = one(s, "mount /workspace ");
    BOOST_TEST(work.find(" ro,") != std::string::npos, work);
    std::string tmp = one(s, "mount /tmp ");
    BOOST_TEST(tmp.rfind("tmpfs rw,", 0) == 0u, tmp);
    for (const char* opt : {"nosuid", "nodev", "noexec", "size=16384k"}) BOOST_TEST(tmp.find(opt) != std::string::npos, tmp);
    BOOST_TEST(tagged(s, "mount /dev/shm ").empty(), "no /dev/shm");
    // Both engines mount a world-writable /dev/mqueue of their own; agentctl puts a read-only
    // tmpfs over it (measured on Docker 28 and Podman 4.3 here).
    std::string mq = one(s, "mount /dev/mqueue ");
    BOOST_TEST(mq.rfind("tmpfs ro,", 0) == 0u, mq);
    BOOST_TEST((tagged(s, "writable ") == std::vector<std::string>{"/tmp"}), s);
    BOOST_TEST(one(s, "net ") == "lo ");
    std::string connect = one(s, "connect ");
    BOOST_TEST(connect.find("unreachable") != std::string::npos, connect);
    // The limits in force, byte-exact.
    BOOST_TEST(one(s, "pids ") == "37");
    BOOST_TEST(one(s, "memory ") == "33554432");
    // --memory-swap equal to --memory: no swap on top. cgroup v1 states it as memory + swap
    // (memsw), v2 as the swap alone.
    std::string swap = one(s, "swap ");
    if (swap == "unsupported")
        test_support::cannot_check("this kernel does not account swap: the swap limit cannot be read");
    else
        BOOST_TEST((swap == "v1 33554432" || swap == "v2 0"), swap);
    BOOST_TEST(one(s, "cpu ") == "50000 100000");
    // Workspace symlinks resolve inside the container; no engine socket.
    std::ifstream host_hostname("/etc/hostname");
    std::string host_name;
    std::getline(host_hostname, host_name);
    BOOST_TEST(one(s, "hostlink ") != host_name);
    BOOST_TEST(!tagged(s, "imagelink resolves in the image").empty());
    BOOST_TEST(tagged(s, "docker.sock").empty());
    // T-CTR-08: 65532 has no passwd entry; agentctl sets no HOME, and an action cannot declare
    // one (HOME steers the engine client). Docker then sets HOME=/, Podman the working
    // directory, /workspace (measured: Docker 28, Podman 4.3): read-only either way, so a tool
    // that writes to $HOME fails (docs/TESTING.md).
    BOOST_TEST(one(s, "home ") == (engine == "docker" ? "/" : "/workspace"));
    BOOST_TEST(one(s, "home ", 1) == "read-only");
    require_no_containers_left(out);
}

// T-CTR-01, T-FS-09: the authorised cwd is bound read-only at /workspace, whatever its name.
BOOST_DATA_TEST_CASE(the_cwd_is_bound_read_only_even_with_odd_characters, bdata::make(engines), engine) {
    temp_dir ws;
    std::string odd = "odd, name: \"q\" 'x' $y";
    std::filesystem::create_directories(ws.path() + "/" + odd);
    std::ofstream(ws.path() + "/" + odd + "/data.txt") << "payload\n";
    std::string script = "cat data.txt; pwd; touch x 2>/dev/null || echo ro-workspace; touch /x 2>/dev/null || echo ro-root;"
                         " mkdir /etc/y 2>/dev/null || echo ro-etc";
    action_options o;
    std::string quoted_odd = "\"odd, name: \\\"q\\\" 'x' $y\"";
    o.extra = "      cwd: " + quoted_odd + "\n";
    auto wf = make_workflow(allow, container_action("bound", engine, "/bin/sh", {"-c", script}, o), single("bound"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST_REQUIRE(t.state == task_state::succeeded, std::string(stderr_of(t)));
    BOOST_TEST(std::string(stdout_of(t)) == "payload\n/workspace\nro-workspace\nro-root\nro-etc\n");
    BOOST_TEST(!std::filesystem::exists(ws.path() + "/" + odd + "/x"));
    require_no_containers_left(out);
}

// T-CTR-03/04: /tmp is writable but small, noexec and nodev.
BOOST_DATA_TEST_CASE(tmp_is_small_and_not_executable, bdata::make(engines), engine) {
    temp_dir ws;
    // Each failure with its message: the errno that the control causes, not any failure.
    std::string script =
        "cp /usr/local/bin/probe /tmp/p && { /tmp/p exit 0; } 2>/tmp/e; echo \"exec $? $(tr '\\n' ' ' "
        "</tmp/e)\";"
        // dd's message cannot go to a file in the /tmp it fills.
        " echo \"dd $({ dd if=/dev/zero of=/tmp/fill bs=1048576 count=20; echo status $?; } 2>&1 | tr '\\n' "
        "' ')\";"
        " echo \"size $(stat -c %s /tmp/fill)\"; rm -f /tmp/fill;"
        " mknod /tmp/null c 1 3 2>/tmp/e; echo \"mknod $? $(tr '\\n' ' ' </tmp/e)\"";
    auto wf = make_workflow(allow, container_action("tmp", engine, "/bin/sh", {"-c", script}), single("tmp"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST_REQUIRE(t.state == task_state::succeeded, std::string(stderr_of(t)));
    const std::string s(stdout_of(t));
    // noexec: EACCES, which the shell reports as 126.
    BOOST_TEST(one(s, "exec ").rfind("126 ", 0) == 0u, s);
    BOOST_TEST(one(s, "exec ").find("Permission denied") != std::string::npos, s);
    // size=16m: ENOSPC at 16 MiB.
    BOOST_TEST(one(s, "dd ").find("status 1") != std::string::npos, s);
    BOOST_TEST(one(s, "dd ").find("No space left on device") != std::string::npos, s);
    BOOST_TEST(std::stoll(one(s, "size ")) <= 16777216, s);
    // No CAP_MKNOD (--cap-drop=ALL): EPERM before nodev would matter (nodev is checked in /proc/mounts).
    BOOST_TEST(one(s, "mknod ").rfind("1 ", 0) == 0u, s);
    BOOST_TEST(one(s, "mknod ").find("Operation not permitted") != std::string::npos, s);
    require_no_containers_left(out);
}

// T-ENV-01/04: values reach the container by name only; never in any command line.
BOOST_DATA_TEST_CASE(environment_values_travel_by_name_only, bdata::make(engines), engine) {
    temp_dir ws;
    std::string secret = "S3CR3T-" + cli_test::make_nonce();
    std::string script = "echo \"len ${#TOKEN}\"; case \"$TOKEN\" in S3CR3T-*) echo prefix-ok;; esac;"
                         " [ -n \"${EMPTY+x}\" ] && echo \"empty-set ${#EMPTY}\"; echo \"$TOKEN\";"
                         // Runs until the test has looked at every command line (a marker file).
                         " while [ ! -e /workspace/looked ]; do sleep 0.05; done";
    action_options o;
    o.extra = "      env:\n        TOKEN: {env: SECRET_SRC}\n        EMPTY: {value: \"\"}\n";
    std::string policy = allow + "    environmentAllowlist: [TOKEN, SECRET_SRC, EMPTY]\n";
    auto wf = make_workflow(policy, container_action("env", engine, "/bin/sh", {"-c", script}, o), single("env"));
    bool client_seen = false;
    std::vector<pid_t> leaks;
    run_setup setup = in(ws.path());
    setup.env["SECRET_SRC"] = secret;
    setup.poll = [&](run_control& c) {
        if (cli_test::processes_with("agentctl-shell-" + alnum(c.run_id, 32)).empty()) return false;
        client_seen = true;
        leaks = cli_test::processes_with(secret);
        ws.write("looked", "");
        return true;
    };
    auto out = run_yaml(wf, setup);
    const auto& t = out.task("t");
    BOOST_TEST_REQUIRE(t.state == task_state::succeeded, std::string(stderr_of(t)));
    BOOST_TEST(client_seen);
    BOOST_TEST(leaks.empty(), "the secret is in a command line");
    BOOST_TEST(one(std::string(stdout_of(t)), "len ") == std::to_string(secret.size()));
    BOOST_TEST(!tagged(std::string(stdout_of(t)), "prefix-ok").empty());
    BOOST_TEST(one(std::string(stdout_of(t)), "empty-set ") == "0");
    BOOST_TEST(std::string(stdout_of(t)).find(secret) == std::string::npos);
    BOOST_TEST(std::string(stdout_of(t)).find("[REDACTED]") != std::string::npos);
    require_no_containers_left(out);
}

// T-CTR-10, T-TIME-01: a timeout ends the container through the engine even when PID 1
// ignores SIGTERM; the output before the timeout is kept.
BOOST_DATA_TEST_CASE(a_timeout_removes_a_container_that_ignores_sigterm, bdata::make(engines), engine) {
    temp_dir ws;
    action_options o;
    o.timeout = "2";
    auto wf = make_workflow(allow,
                       container_action("stubborn", engine, "/bin/sh",
                                        {"-c", "echo before-timeout; exec /usr/local/bin/probe trap-term ignore"}, o),
                       single("stubborn"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST(t.state == task_state::timed_out, message_of(t));
    BOOST_TEST(std::string(stdout_of(t)) == "before-timeout\n");
    BOOST_TEST(out.wall < 2s + 15s);
    require_no_containers_left(out);
}

// killGraceSeconds > 0: SIGTERM through the engine, then removal after the grace.
BOOST_DATA_TEST_CASE(a_timeout_with_grace_sends_sigterm_first, bdata::make(engines), engine) {
    temp_dir ws;
    action_options o;
    o.timeout = "2";
    auto wf = make_workflow(allow,
                       container_action("polite", engine, probe, {"trap-term", "exit", "0"}, o) +
                           container_action("stubborn", engine, probe, {"trap-term", "ignore"}, o),
                       "    - {id: polite, uses: action:polite, failure: continue}\n"
                       "    - {id: stubborn, uses: action:stubborn, failure: continue}\n",
                       "  runtime: {killGraceSeconds: 3}\n");
    auto out = run_yaml(wf, in(ws.path()).with_jobs(2));
    BOOST_TEST_REQUIRE(!out.report.error, (out.report.error ? out.report.error->message : ""));
    BOOST_TEST(out.task("polite").state == task_state::timed_out, message_of(out.task("polite")));
    BOOST_TEST(out.task("stubborn").state == task_state::timed_out, message_of(out.task("stubborn")));
    // The polite one ended on SIGTERM (exit 0), well before the grace; the other needed SIGKILL.
    // Compared with each other, not with a wall-clock bound: under load the engines' stop and
    // removal add seconds to both alike (4.8-5.0 s for the polite one at load 21), while the
    // grace still separates them by about 3 s.
    BOOST_TEST(out.task("polite").duration_ms + 1000u < out.task("stubborn").duration_ms);
    BOOST_TEST(out.task("stubborn").duration_ms >= 2000u + 2900u);
    BOOST_TEST(out.task("stubborn").duration_ms < 2000u + 3000u + 12000u);
    require_no_containers_left(out);
}

// T-CAN-01/04, T-CTR-11: cancellation while the container runs, gracefully and at once.
BOOST_DATA_TEST_CASE(cancellation_removes_the_running_container, bdata::make(engines) * bdata::make({0, 1}), engine,
                     terminal) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("sleepy", engine, probe, {"sleep", "300"}), single("sleepy"));
    bool seen_running = false;
    auto out = run_yaml(wf, in(ws.path()).with_poll([&](run_control& c) {
                                 auto r = engine_cli(engine, {"ps", "--format", "{{.Names}}", "--filter",
                                                              "label=agentctl.run=" + c.run_id});
                                 if (r.out.empty()) return false;
                                 seen_running = true;
                                 c.cancel(terminal ? boost::asio::cancellation_type::terminal
                                                   : boost::asio::cancellation_type::total);
                                 return true;
                             }));
    BOOST_TEST(seen_running);
    BOOST_TEST(out.report.state == run_state::cancelled);
    BOOST_TEST(out.report.exit_code() == 130);
    BOOST_TEST(out.task("t").state == task_state::cancelled);
    BOOST_TEST(out.wall < 60s);
    require_no_containers_left(out);
}

// Cancelled before anything started: nothing is created.
BOOST_DATA_TEST_CASE(cancellation_before_the_start_creates_nothing, bdata::make(engines), engine) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("sleepy", engine, probe, {"sleep", "300"}), single("sleepy"));
    auto out = run_yaml(wf, in(ws.path()).with_poll([](run_control& c) {
                                 c.cancel(boost::asio::cancellation_type::total);
                                 return true;
                             }));
    BOOST_TEST(out.report.state == run_state::cancelled);
    BOOST_TEST(out.task("t").state == task_state::cancelled);
    require_no_containers_left(out);
}

// T-OUT-10: a flood is cut at the cap; the container is removed through the engine.
BOOST_DATA_TEST_CASE(an_output_flood_is_capped_and_its_container_removed, bdata::make(engines), engine) {
    temp_dir ws;
    action_options o;
    o.extra = "      stdoutLimitBytes: 65536\n";
    auto wf = make_workflow(allow, container_action("flood", engine, probe, {"flood", "--fd", "1"}, o), single("flood"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST(t.state == task_state::output_limit_exceeded);
    BOOST_TEST(t.limit_stream == "stdout");
    BOOST_TEST(std::string(stdout_of(t)).size() == 65536u);
    BOOST_TEST(out.wall < 30s);
    require_no_containers_left(out);
    // T-CTR-16: the killed client left no engine helper behind (conmon names the container).
    BOOST_TEST(cli_test::processes_with("agentctl-shell-" + alnum(out.report.run_id, 32)).empty());
}

// T-CTR-06/07, T-SIG-09: the container's own status, told apart from the engine's.
BOOST_DATA_TEST_CASE(exit_statuses_are_the_containers_own, bdata::make(engines), engine) {
    temp_dir ws;
    std::ofstream(ws.path() + "/script.sh") << "#!/bin/sh\necho hi\n";
    ::chmod((ws.path() + "/script.sh").c_str(), 0644);
    std::string actions;
    std::string tasks;
    for (int code : {3, 125, 126, 127, 255}) {
        std::string name = "e" + std::to_string(code);
        actions += container_action(name, engine, probe, {"exit", std::to_string(code)});
        tasks += "    - {id: " + name + ", uses: action:" + name + ", failure: continue}\n";
    }
    actions += container_action("missing", engine, "/nope", {}) +
               container_action("noexec", engine, "/workspace/script.sh", {});
    tasks += "    - {id: missing, uses: action:missing, failure: continue}\n"
             "    - {id: noexec, uses: action:noexec, failure: continue}\n";
    auto out = run_yaml(make_workflow(allow, actions, tasks), in(ws.path()).with_jobs(4));
    for (int code : {3, 125, 126, 127, 255}) {
        const auto& t = out.task("e" + std::to_string(code));
        BOOST_TEST(t.state == task_state::failed, code);
        BOOST_TEST((t.exit_code && *t.exit_code == code), code);
        BOOST_TEST((t.error && t.error->code == "exit_nonzero"), code);
    }
    const auto& missing = out.task("missing");
    BOOST_TEST(missing.state == task_state::spawn_failed);
    BOOST_TEST((missing.error && missing.error->code == "executable_not_found"), message_of(missing));
    BOOST_TEST(!missing.exit_code);
    const auto& noexec = out.task("noexec");
    BOOST_TEST(noexec.state == task_state::spawn_failed);
    BOOST_TEST((noexec.error && noexec.error->code == "permission_denied"), message_of(noexec));
    require_no_containers_left(out);
}

// T-RES-04, T-CTR-15: the memory limit kills; the engine's word on it is reported.
BOOST_DATA_TEST_CASE(out_of_memory_is_reported, bdata::make(engines), engine) {
    temp_dir ws;
    action_options o;
    o.container = "        memoryLimitBytes: 16777216\n";
    auto wf =
        make_workflow(allow, container_action("hog", engine, probe, {"alloc", "128"}, o), single("hog"));
    // Docker records OOMKilled, but not every time: once, under load, a container killed at
    // its limit came back with OOMKilled false (dockerd's event and the exit race on cgroup
    // v1). That we read the record is shown by one of three tries; every try must say it.
    bool docker_said_oom = false;
    for (int attempt = 0; attempt < 3 && !docker_said_oom; ++attempt) {
        auto out = run_yaml(wf, in(ws.path()));
        const auto& t = out.task("t");
        BOOST_TEST(t.state == task_state::failed);
        BOOST_TEST((t.exit_code && *t.exit_code == 137));
        BOOST_REQUIRE(t.error);
        BOOST_TEST_MESSAGE(engine << ": " << t.error->code << ": " << t.error->message);
        // Podman with runc on cgroup v1 does not record it, and then we say so.
        BOOST_TEST(
            (t.error->code == "oom_killed" || t.error->message.find("memory limit") != std::string::npos),
            t.error->message);
        require_no_containers_left(out);
        docker_said_oom = t.error->code == "oom_killed";
        if (engine != "docker") break;
    }
    if (engine == "docker")
        BOOST_TEST(docker_said_oom, "docker never reported the out-of-memory kill in 3 tries");
}

// T-RES-01/02: a fork bomb meets the pids limit; a sibling container keeps working.
BOOST_DATA_TEST_CASE(a_fork_bomb_meets_the_pids_limit, bdata::make(engines), engine) {
    temp_dir ws;
    action_options bomb;
    bomb.timeout = "60";
    bomb.container = "        pidsLimit: 16\n";
    // The inner shell forks until fork fails (it then exits); builtins only afterwards.
    std::string script = "sh -c 'while :; do sleep 30 & done' 2>/dev/null;"
                         " read c < /sys/fs/cgroup/pids.current 2>/dev/null || read c < /sys/fs/cgroup/pids/pids.current;"
                         " echo \"current $c\"";
    auto wf = make_workflow(allow,
                       container_action("bomb", engine, "/bin/sh", {"-c", script}, bomb) +
                           container_action("sibling", engine, probe, {"exit", "0"}),
                       "    - {id: bomb, uses: action:bomb, failure: continue}\n"
                       "    - {id: sibling, uses: action:sibling}\n");
    auto out = run_yaml(wf, in(ws.path()).with_jobs(2));
    const auto& t = out.task("bomb");
    BOOST_TEST(t.state == task_state::succeeded, std::string(stderr_of(t)));
    BOOST_TEST(std::stoi(one(std::string(stdout_of(t)), "current ")) <= 16, std::string(stdout_of(t)));
    BOOST_TEST(out.task("sibling").state == task_state::succeeded);
    require_no_containers_left(out);
}

// T-CTR-12: many containers at once, unique names, all removed.
BOOST_DATA_TEST_CASE(many_containers_at_once_are_all_removed, bdata::make(engines), engine) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("echo", engine, probe, {"exit", "0"}),
                       "    - {id: fan, uses: action:echo, foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8]}}\n");
    auto out = run_yaml(wf, in(ws.path()).with_jobs(4));
    BOOST_TEST(out.report.state == run_state::succeeded);
    for (const auto& t : out.report.tasks) BOOST_TEST(t.state == task_state::succeeded);
    require_no_containers_left(out);
}

// T-TIME-05: the container appears only after the timeout (a slow engine client); it is
// still removed, and the run ends without it. The client's marker and the engine's own event
// log show that the late container did exist.
BOOST_DATA_TEST_CASE(a_container_created_after_the_timeout_is_removed, bdata::make(engines), engine) {
    temp_dir ws;
    temp_dir bin;
    std::string started = bin.path() + "/late-started";
    std::string wrapper = bin.write(engine, "#!/bin/sh\nif [ \"$1\" = run ]; then sleep 3; touch " + started +
                                                "; fi\nexec " + engine_path(engine) + " \"$@\"\n");
    ::chmod(wrapper.c_str(), 0755);
    action_options o;
    o.timeout = "1";
    auto wf = make_workflow(allow, container_action("late", engine, probe, {"sleep", "300"}, o), single("late"));
    auto since = std::to_string(::time(nullptr) - 10);
    auto out = run_yaml(wf, in(ws.path()).with_search_path(bin.path() + ":/usr/bin:/bin"));
    const auto& t = out.task("t");
    BOOST_TEST(t.state == task_state::timed_out, message_of(t));
    BOOST_TEST(out.wall < 30s);
    require_no_containers_left(out);
    BOOST_TEST(std::filesystem::exists(started), "the client never got past its delay: no late container");
    std::vector<std::string> events = {"events", "--since", since};
    // Docker's --until is inclusive of whole seconds only: a second past now (it then waits for it).
    if (engine == "docker")
        events.insert(events.end(),
                      {"--until", std::to_string(::time(nullptr) + 2), "--format", "{{.Action}}"});
    else
        events.insert(events.end(), {"--stream=false", "--format", "{{.Status}}"});
    events.insert(events.end(), {"--filter", "label=agentctl.run=" + out.report.run_id});
    auto log = engine_cli(engine, events);
    BOOST_TEST(log.exit_code == 0, log.err);
    BOOST_TEST(tagged(log.out, "create").size() == 1u, engine << " events: " << log.out);
}

// The sweep when a run ends: a container that an engine created after its client had
// vanished leaves nothing for its launch to wait for. Here the client records its arguments
// and fails at once; the test then creates that very container (same name and labels,
// detached) from outside agentctl's process tree, while another task still runs. The sweep
// removes it before the run reports.
BOOST_DATA_TEST_CASE(the_end_of_run_sweep_removes_containers_nobody_waited_for, bdata::make(engines), engine) {
    temp_dir ws;
    temp_dir bin;
    std::string recorded = bin.path() + "/vanishing.args";
    std::string wrapper = bin.write(engine, "#!/bin/sh\ncase \"$*\" in *agentctl.task=vanishing*)\n"
                                            "  printf '%s\\0' \"$@\" > " + recorded + ".tmp && mv " + recorded +
                                                ".tmp " + recorded + "\n  exit 1;;\nesac\nexec " +
                                                engine_path(engine) + " \"$@\"\n");
    ::chmod(wrapper.c_str(), 0755);
    action_options o;
    o.timeout = "60";
    auto wf = make_workflow(allow,
                            container_action("vanishing", engine, probe, {"sleep", "300"}, o) +
                                container_action("slow", engine, probe, {"sleep", "5"}, o),
                            "    - {id: vanishing, uses: action:vanishing, failure: continue}\n"
                            "    - {id: slow, uses: action:slow}\n");
    bool created = false, seen = false;
    auto setup = in(ws.path()).with_jobs(2).with_search_path(bin.path() + ":/usr/bin:/bin");
    setup.poll = [&](run_control& c) {
        if (!created) {
            std::ifstream file(recorded, std::ios::binary);
            if (!file) return false;
            std::vector<std::string> args;
            for (std::string arg; std::getline(file, arg, '\0');) args.push_back(arg);
            BOOST_REQUIRE(!args.empty() && args.front() == "run");
            args.insert(args.begin() + 1, "--detach");
            auto r = engine_cli(engine, args);
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, engine << " run --detach failed: " << r.err);
            created = true;
        }
        auto r = engine_cli(engine, {"ps", "--all", "--format", "{{.Names}}", "--filter",
                                     "label=agentctl.run=" + c.run_id, "--filter", "label=agentctl.task=vanishing"});
        seen = !r.out.empty();
        return seen;
    };
    auto out = run_yaml(wf, setup);
    BOOST_TEST(seen);
    // Failed or spawn_failed, depending on what the engine's event log held when the launch
    // asked: either way not a success.
    BOOST_TEST(out.task("vanishing").state != task_state::succeeded);
    BOOST_TEST(out.task("slow").state == task_state::succeeded);
    BOOST_TEST(!out.report.error, (out.report.error ? out.report.error->message : ""));
    require_no_containers_left(out);
}

// T-CTR-17/18: when a run ends it also removes the leftovers of a crashed runner on this host
// (owner pid gone), and nothing else: not another runner's live container, not one owned on
// another host, not an unlabelled one whose name looks like ours.
BOOST_DATA_TEST_CASE(the_end_of_run_sweep_removes_only_dead_owners_leftovers, bdata::make(engines), engine) {
    auto names = start_owned_containers(engine);

    temp_dir ws;
    auto wf = make_workflow(allow, container_action("a", engine, probe, {"exit", "0"}), single("a"));
    auto out = run_yaml(wf, in(ws.path()));
    BOOST_TEST(out.task("t").state == task_state::succeeded, message_of(out.task("t")));
    BOOST_TEST(!out.report.error, (out.report.error ? out.report.error->message : ""));
    BOOST_TEST(container_gone(engine, names["dead"]));
    BOOST_TEST(container_exists(engine, names["live"]));
    BOOST_TEST(container_exists(engine, names["elsewhere"]));
    BOOST_TEST(container_exists(engine, names["unlabelled"]));
    remove_containers(engine, names);
    require_no_containers_left(out);
}

// T-TIME-06: agentctl's own timeout and grace are the only limits on a container task. The
// bound of the engine calls (10 s for inspect, kill, rm, events) does not apply to the run
// itself: a 12 s task under a 20 s timeout succeeds; a 12 s grace (longer than the engines'
// default stop timeout, 10 s) is waited out in full before the SIGKILL.
BOOST_DATA_TEST_CASE(agentctls_timeout_and_grace_are_the_only_limits, bdata::make(engines), engine) {
    temp_dir ws;
    action_options longer;
    longer.timeout = "20";
    action_options stubborn;
    stubborn.timeout = "2";
    auto wf =
        make_workflow(allow,
                      container_action("longer", engine, probe, {"sleep", "12"}, longer) +
                          container_action("stubborn", engine, probe, {"trap-term", "ignore"}, stubborn),
                      "    - {id: longer, uses: action:longer, failure: continue}\n"
                      "    - {id: stubborn, uses: action:stubborn, failure: continue}\n",
                      "  runtime: {killGraceSeconds: 12}\n");
    auto out = run_yaml(wf, in(ws.path()).with_jobs(2));
    const auto& l = out.task("longer");
    BOOST_TEST(l.state == task_state::succeeded, message_of(l));
    BOOST_TEST(l.duration_ms >= 12000u);
    const auto& st = out.task("stubborn");
    BOOST_TEST(st.state == task_state::timed_out, message_of(st));
    BOOST_TEST(st.duration_ms >= 2000u + 11900u);
    BOOST_TEST(st.duration_ms < 2000u + 12000u + 15000u);
    require_no_containers_left(out);
}

// T-FS-09: the workspace is bound by its canonical path, resolved when the run starts. Reached
// through a symlink, the container sees the real folder (the bind source, read with inspect
// while it runs, is that folder); moving the symlink to another folder during the run changes
// nothing for the run's later containers. A workspace that does not exist fails the run before
// any container exists, and nothing creates it (a bind mount, not a volume).
BOOST_DATA_TEST_CASE(the_workspace_is_bound_by_its_canonical_path, bdata::make(engines), engine) {
    temp_dir base;
    std::filesystem::create_directories(base.path() + "/a");
    std::filesystem::create_directories(base.path() + "/b");
    base.write("a/who", "a\n");
    base.write("b/who", "b\n");
    std::filesystem::permissions(base.path() + "/b", std::filesystem::perms(0755));
    std::filesystem::create_directory_symlink(base.path() + "/a", base.path() + "/link");
    std::string real = std::filesystem::canonical(base.path() + "/a").string();
    action_options o;
    o.timeout = "60";
    auto wf = make_workflow(
        allow,
        container_action("first", engine, "/bin/sh",
                         {"-c", "cat /workspace/who; while [ ! -e /workspace/swapped ]; do sleep 0.05; done"},
                         o) +
            container_action("second", engine, "/bin/sh", {"-c", "cat /workspace/who"}),
        "    - {id: first, uses: action:first}\n    - {id: second, uses: action:second, needs: [first]}\n");
    std::string source;
    bool swapped = false;
    auto setup = in(base.path() + "/link");
    setup.poll = [&](run_control& c) {
        auto names = engine_cli(
            engine, {"ps", "--format", "{{.Names}}", "--filter", "label=agentctl.run=" + c.run_id});
        if (names.out.empty()) return false;
        std::string name = names.out.substr(0, names.out.find('\n'));
        auto mounts = engine_cli(
            engine,
            {"container", "inspect", "--format",
             "{{range .Mounts}}{{if eq .Destination \"/workspace\"}}{{.Source}}{{end}}{{end}}", name});
        source = mounts.out.substr(0, mounts.out.find('\n'));
        std::filesystem::create_directory_symlink(base.path() + "/b", base.path() + "/next");
        std::filesystem::rename(base.path() + "/next", base.path() + "/link");
        swapped = true;
        base.write("a/swapped", "");
        return true;
    };
    auto out = run_yaml(wf, setup);
    BOOST_TEST(swapped);
    BOOST_TEST(source == real);
    BOOST_TEST(out.task("first").state == task_state::succeeded, message_of(out.task("first")));
    BOOST_TEST(std::string(stdout_of(out.task("first"))) == "a\n");
    BOOST_TEST(out.task("second").state == task_state::succeeded, message_of(out.task("second")));
    BOOST_TEST(std::string(stdout_of(out.task("second"))) == "a\n");
    require_no_containers_left(out);

    auto gone = run_yaml(make_workflow(allow + "    workspaceRoot: gone\n",
                                       container_action("a", engine, probe, {"exit", "0"}), single("a")),
                         in(base.path()));
    BOOST_REQUIRE(gone.report.error);
    BOOST_TEST(gone.report.error->code == "workspace_unavailable", gone.report.error->message);
    BOOST_TEST(gone.task("t").state == task_state::skipped);
    BOOST_TEST(!std::filesystem::exists(base.path() + "/gone"));
    require_no_containers_left(gone);
}

// T-SIG-08 in containers: the command starts with default dispositions and an empty signal
// mask on both engines. Docker's init is tini; Podman's own, catatonit, starts the command
// with SIGTSTP, SIGTTIN and SIGTTOU blocked (SigBlk 0000000000380000), so agentctl gives
// Podman a static tini with --init-path (docs/TESTING.md, "An init in containers").
BOOST_DATA_TEST_CASE(the_command_starts_with_default_signal_dispositions_and_an_empty_mask,
                     bdata::make(engines), engine) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("signals", engine, probe, {"report-signals"}),
                            single("signals"));
    auto out = run_yaml(wf, in(ws.path()));
    const auto& t = out.task("t");
    BOOST_TEST_REQUIRE(t.state == task_state::succeeded, message_of(t));
    BOOST_TEST(std::string(stdout_of(t)) ==
               "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n");
    require_no_containers_left(out);
}

// T-CTR-14, with --init (docs/TESTING.md recommends it): a graceful timeout sends SIGTERM
// through the engine, and a command without a handler dies of it at once (143), as it would
// outside a container. Without an init the command is PID 1, which the kernel shields from
// every signal it does not handle: the container then outlives the whole 30 s grace until the
// SIGKILL.
BOOST_AUTO_TEST_CASE(a_graceful_timeout_ends_a_command_without_a_handler_at_once) {
    for (const auto& engine : engines) {
        temp_dir ws;
        action_options o;
        o.timeout = "2";
        auto wf = make_workflow(allow, container_action("plain", engine, probe, {"sleep", "300"}, o),
                                single("plain"), "  runtime: {killGraceSeconds: 30}\n");
        auto out = run_yaml(wf, in(ws.path()));
        const auto& t = out.task("t");
        BOOST_TEST(t.state == task_state::timed_out, engine << ": " << message_of(t));
        BOOST_TEST(t.duration_ms < 2000u + 15000u,
                   engine << ": " << t.duration_ms << " ms: SIGTERM did not end the command, the grace did");
        require_no_containers_left(out);
    }
}

// T-CTR-13, with --init: an orphan re-parented to PID 1 is reaped when it exits. A command as
// PID 1 rarely reaps children it did not start (the probe's leader here never does), and each
// zombie holds one of the pidsLimit slots until the container ends. Checked from outside
// (`exec ps`) while the container runs, then the run is cancelled.
BOOST_AUTO_TEST_CASE(orphaned_zombies_are_reaped_inside_the_container) {
    for (const auto& engine : engines) {
        temp_dir ws;
        action_options o;
        o.timeout = "120";
        auto wf = make_workflow(allow,
                                container_action("orphans", engine, probe,
                                                 {"fork-hold", "--double-fork", "--child-sleep", "0.2",
                                                  "--leader", "sleep", "--leader-sleep", "300"},
                                                 o),
                                single("orphans"));
        int zombies = -1;
        std::string listing;
        std::optional<std::chrono::steady_clock::time_point> holder_gone;
        auto setup = in(ws.path());
        setup.poll = [&](run_control& c) {
            auto names = engine_cli(
                engine, {"ps", "--format", "{{.Names}}", "--filter", "label=agentctl.run=" + c.run_id});
            if (names.out.empty()) return false;
            auto ps = engine_cli(
                engine, {"exec", names.out.substr(0, names.out.find('\n')), "ps", "-o", "stat,comm"});
            int running = 0, dead = 0;
            for (const auto& line : tagged(ps.out, "")) {
                if (line.find("probe") == std::string::npos) continue;
                (line[0] == 'Z' ? dead : running) += 1;
            }
            if (ps.exit_code != 0 || running != 1) return false;  // the holder still sleeps
            // The holder is a zombie from its exit until init's SIGCHLD handler reaps it, so
            // one look can catch it in that moment. Without an init it stays for the leader's
            // 300 s, so 10 s of looks that all see it is a zombie nobody reaps.
            auto now = std::chrono::steady_clock::now();
            if (!holder_gone) holder_gone = now;
            zombies = dead;
            listing = ps.out;
            if (dead != 0 && now - *holder_gone < std::chrono::seconds(10)) return false;
            c.cancel(boost::asio::cancellation_type::terminal);
            return true;
        };
        auto out = run_yaml(wf, setup);
        BOOST_TEST(out.report.state == run_state::cancelled, engine);
        BOOST_TEST(zombies >= 0, engine << ": the holder was never seen gone");
        BOOST_TEST(zombies == 0, engine << ": " << zombies << " zombie(s) inside: " << listing);
        require_no_containers_left(out);
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(preflight)

// T-ENV-03: a declared variable missing from agentctl's environment stops the run first.
BOOST_AUTO_TEST_CASE(an_unset_source_variable_stops_the_run_before_any_container) {
    temp_dir ws;
    action_options o;
    o.extra = "      env: {TOKEN: {env: AGENTCTL_TEST_SURELY_UNSET}}\n";
    auto wf = make_workflow(allow + "    environmentAllowlist: [TOKEN, AGENTCTL_TEST_SURELY_UNSET]\n",
                            container_action("a", "podman", probe, {"exit", "0"}, o), single("a"));
    auto out = run_yaml(wf, in(ws.path()));
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->message.find("AGENTCTL_TEST_SURELY_UNSET") != std::string::npos,
               out.report.error->message);
    BOOST_TEST(out.task("t").state == task_state::skipped);
    require_no_containers_left(out);
}

// T-ENG-01: no engine in the trusted search path (a relative entry is never searched).
BOOST_AUTO_TEST_CASE(a_missing_engine_fails_closed_before_anything_runs) {
    temp_dir ws;
    temp_dir bin;
    std::string planted = bin.write("docker", "#!/bin/sh\ntouch " + ws.path() + "/planted-ran\n");
    ::chmod(planted.c_str(), 0755);
    auto here = std::filesystem::current_path();
    std::filesystem::current_path(bin.path());
    auto wf = make_workflow(allow, container_action("a", "auto", probe, {"exit", "0"}), single("a"));
    auto out = run_yaml(wf, in(ws.path()).with_search_path(".:bin:"));
    std::filesystem::current_path(here);
    BOOST_TEST(out.report.state == run_state::failed);
    BOOST_TEST(out.report.exit_code() == 4);
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->code == "isolation_unavailable");
    BOOST_TEST(out.report.error->message.find("not found") != std::string::npos, out.report.error->message);
    BOOST_TEST(out.task("t").state == task_state::skipped);
    BOOST_TEST(!std::filesystem::exists(ws.path() + "/planted-ran"));
}

// Podman without a static tini to give its --init (catatonit would block signals in the
// command): the engine is unavailable, said why, and nothing runs.
BOOST_AUTO_TEST_CASE(podman_without_a_static_tini_fails_closed) {
    temp_dir ws;
    temp_dir bin;
    BOOST_TEST_REQUIRE(::symlink("/usr/bin/podman", (bin.path() + "/podman").c_str()) == 0);
    if (std::filesystem::exists("/usr/libexec/docker/docker-init")) {
        test_support::cannot_check(
            "/usr/libexec/docker/docker-init exists: podman finds a tini without the PATH");
        return;
    }
    auto wf = make_workflow(allow, container_action("a", "podman", probe, {"exit", "0"}), single("a"));
    auto out = run_yaml(wf, in(ws.path()).with_search_path(bin.path()));
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->code == "isolation_unavailable");
    BOOST_TEST(out.report.error->message.find("podman needs a static tini") != std::string::npos,
               out.report.error->message);
    BOOST_TEST(out.task("t").state == task_state::skipped);
    require_no_containers_left(out);
}

// T-ENG-02 and "an explicit engine never falls back": Docker's daemon is down.
BOOST_AUTO_TEST_CASE(a_stopped_daemon_fails_closed_and_docker_never_falls_back) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("a", "docker", probe, {"exit", "0"}), single("a"));
    run_setup setup = in(ws.path());
    setup.env["DOCKER_HOST"] = "unix://" + ws.path() + "/no-daemon.sock";
    auto out = run_yaml(wf, setup);
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->code == "isolation_unavailable");
    BOOST_TEST(out.report.error->message.find("docker") != std::string::npos, out.report.error->message);
    BOOST_TEST(out.report.error->message.find("podman") == std::string::npos, out.report.error->message);
    BOOST_TEST(out.report.exit_code() == 4);
    BOOST_TEST(out.task("t").state == task_state::skipped);

    // auto: Docker first, Podman when Docker cannot serve the image.
    auto auto_wf = make_workflow(allow, container_action("a", "auto", probe, {"exit", "0"}), single("a"));
    auto fell = run_yaml(auto_wf, setup);
    BOOST_TEST(fell.report.state == run_state::succeeded);
    BOOST_TEST(fell.task("t").engine == "podman");
    auto first = run_yaml(auto_wf, in(ws.path()));
    BOOST_TEST(first.task("t").engine == "docker");
    require_no_containers_left(fell);
    require_no_containers_left(first);
}

// T-ENG-03: an engine client that never answers is bounded (10 s) and killed.
BOOST_DATA_TEST_CASE(a_hung_engine_is_bounded, bdata::make(engines), engine) {
    temp_dir ws;
    temp_dir bin;
    std::string nonce = cli_test::make_nonce();
    std::string hung = bin.write(engine, "#!/bin/sh\nexec " + cli_test::probe_bin() + " sleep 600 --nonce " + nonce + "\n");
    ::chmod(hung.c_str(), 0755);
    auto wf = make_workflow(allow, container_action("a", engine, probe, {"exit", "0"}), single("a"));
    auto out = run_yaml(wf, in(ws.path()).with_search_path(bin.path() + ":/usr/bin:/bin"));
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->code == "isolation_unavailable");
    BOOST_TEST(out.report.error->message.find("no answer within 10 s") != std::string::npos, out.report.error->message);
    BOOST_TEST(out.wall < 20s);
    BOOST_TEST(cli_test::processes_with(nonce).empty());
}

// T-IMG-03: a digest that is not present locally; nothing is pulled.
BOOST_DATA_TEST_CASE(an_absent_image_fails_closed_without_a_pull, bdata::make(engines), engine) {
    temp_dir ws;
    auto before = engine_cli(engine, {"image", "ls", "--all", "--quiet", "--no-trunc"});
    action_options o;
    o.image_ref = "docker.io/library/busybox@sha256:" + std::string(64, 'e');
    auto out = run_yaml(make_workflow(allow, container_action("a", engine, probe, {"exit", "0"}, o), single("a")),
                        in(ws.path()));
    BOOST_REQUIRE(out.report.error);
    BOOST_TEST(out.report.error->code == "isolation_unavailable");
    BOOST_TEST(out.report.exit_code() == 4);
    auto after = engine_cli(engine, {"image", "ls", "--all", "--quiet", "--no-trunc"});
    BOOST_TEST(before.out == after.out);
}

// T-IMG-04/07: a repo digest must belong to that very name; an image without repo digests
// gets a diagnostic that says so.
BOOST_AUTO_TEST_CASE(repo_digests_match_by_name_and_digest_only) {
    temp_dir ws;
    // A name of our own: Podman lists a repo digest per name of the image.
    std::string name = "localhost/agentctl-digest-" + cli_test::make_nonce();
    BOOST_REQUIRE(engine_cli("podman", {"tag", image(), name + ":x"}).exit_code == 0);
    auto digests = engine_cli("podman", {"image", "inspect", "--format", "{{range .RepoDigests}}{{.}} {{end}}", image()});
    auto at = digests.out.find(name + "@sha256:");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "podman lists no repo digest for " << name << ": " << digests.out);
    std::string digest = digests.out.substr(at + name.size() + 1, 71);
    auto run_ref = [&](const std::string& engine, const std::string& ref) {
        action_options o;
        o.image_ref = ref;
        return run_yaml(make_workflow(allow, container_action("a", engine, probe, {"exit", "0"}, o), single("a")),
                        in(ws.path()));
    };
    auto exact = run_ref("podman", name + "@" + digest);
    BOOST_TEST(exact.report.state == run_state::succeeded);
    require_no_containers_left(exact);
    auto shorter = run_ref("podman", name.substr(0, name.size() - 1) + "@" + digest);
    BOOST_TEST((shorter.report.error && shorter.report.error->code == "isolation_unavailable"));
    auto other = run_ref("podman", name + "-other@" + digest);
    BOOST_TEST((other.report.error && other.report.error->code == "isolation_unavailable"));
    engine_cli("podman", {"untag", image(), name + ":x"});

    // Docker loaded the image from an archive: it has no repo digest under any name. (The
    // fixture named it too, so removing our tag leaves the image.)
    std::string tag = name + ":loaded-" + cli_test::make_nonce();
    BOOST_REQUIRE(engine_cli("docker", {"tag", image(), tag}).exit_code == 0);
    auto loaded = run_ref("docker", name + "@" + digest);
    engine_cli("docker", {"rmi", tag});
    BOOST_REQUIRE(loaded.report.error);
    BOOST_TEST(loaded.report.error->code == "isolation_unavailable");
    BOOST_TEST(loaded.report.error->message.find("<none>") != std::string::npos, loaded.report.error->message);
}

// /usr/local/bin/docker may be a newer client than /usr/bin/docker: both drive the daemon.
BOOST_AUTO_TEST_CASE(the_distribution_docker_client_works_too) {
    temp_dir ws;
    auto wf = make_workflow(allow, container_action("a", "docker", probe, {"exit", "0"}), single("a"));
    auto out = run_yaml(wf, in(ws.path()).with_search_path("/usr/bin:/bin"));
    BOOST_TEST(out.report.state == run_state::succeeded);
    BOOST_TEST(out.task("t").command == "/usr/bin/docker");
    require_no_containers_left(out);
}

BOOST_AUTO_TEST_SUITE_END()
