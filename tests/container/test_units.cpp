// The pure parts of container mode: the run argv, image matching, the client environment
// and the front end's container rules. No engine is needed.
#include "exec/host.hpp"
#include "runner/container/argv.hpp"

#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

using namespace agentctl;
namespace ctr = agentctl::container;

namespace {

const std::string digest_a = "sha256:" + std::string(64, 'a');
const std::string digest_b = "sha256:" + std::string(64, 'b');

bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::ptrdiff_t index_of(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) - v.begin();
}

action_spec container_spec_action() {
    action_spec a;
    a.name = "worker";
    a.command = "/bin/fixture";
    a.isolation = isolation_mode::container;
    container_spec c;
    c.image = digest_a;
    c.memory_limit_bytes = 33554432;
    c.cpu_limit_millis = 500;
    c.pids_limit = 16;
    a.container = c;
    return a;
}

std::vector<std::string> diagnostic_codes(const std::string& yaml) {
    parse_result parsed = parse_workflow(yaml, "t.yaml");
    std::vector<std::string> codes;
    for (const auto& d : parsed.diags.items()) codes.push_back(d.code);
    if (parsed.document) {
        compile_result c = compile(*parsed.document);
        for (const auto& d : c.diags.items()) codes.push_back(d.code);
    }
    return codes;
}

std::string one_container_action(const std::string& container_lines, const std::string& env_lines = "") {
    return "apiVersion: agentctl.dev/v1\n"
           "kind: Workflow\n"
           "metadata: {name: t}\n"
           "spec:\n"
           "  policy:\n"
           "    processAllowlist: [worker]\n"
           "    environmentAllowlist: [LD_PRELOAD, DOCKER_API_VERSION, CONTAINERS_STORAGE_CONF, HTTP_PROXY, http_proxy,\n"
           "                           XDG_DATA_HOME, NOTIFY_SOCKET, TOKEN, PODMAN_USERNS]\n"
           "    approval: never\n"
           "  actions:\n"
           "    a:\n"
           "      kind: builtin.shell.exec\n"
           "      command: /usr/local/bin/worker\n" +
           env_lines +
           "      isolation: container\n"
           "      container:\n" +
           container_lines + "  tasks:\n    - {id: t, uses: action:a}\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(units)

BOOST_AUTO_TEST_CASE(run_argv_fixes_every_control_and_ends_with_the_image_and_args) {
    action_spec a = container_spec_action();
    ctr::invocation s;
    s.name = "agentctl-shell-run1-abcd-1";
    s.labels = {"agentctl.run=run1"};
    s.image_id = digest_a;
    s.workspace = "/srv/work";
    s.env_names = {"FIXTURE_TOKEN"};
    std::vector<std::string> args = {"--privileged", "-v/:/host", "--entrypoint=/bin/sh"};
    for (std::string engine : {"docker", "podman"}) {
        auto argv = ctr::run_argv(ctr::engine{engine, "/usr/bin/" + engine}, a, s, args);
        BOOST_TEST(argv.front() == "run");
        BOOST_TEST(argv[1] == "--rm");
        for (const char* flag :
             {"--init", "--pull=never", "--network=none", "--read-only", "--ipc=none", "--user=65532:65532", "--cap-drop=ALL",
              "--security-opt=no-new-privileges", "--memory=33554432b", "--memory-swap=33554432b", "--cpus=0.500",
              "--pids-limit=16", "--tmpfs=/tmp:rw,noexec,nosuid,nodev,size=16777216", "--tmpfs=/dev/mqueue:ro",
              "--mount=type=bind,\"source=/srv/work\",target=/workspace,readonly", "--workdir=/workspace",
              "--log-driver=none", "--name=agentctl-shell-run1-abcd-1", "--label=agentctl.run=run1",
              "--entrypoint=/bin/fixture"})
            BOOST_TEST(has(argv, flag), engine << " lacks " << flag);
        BOOST_TEST(has(argv, "--read-only-tmpfs=false") == (engine == "podman"));
        BOOST_TEST(!has(argv, "--interactive"));
        auto env = index_of(argv, "--env");
        BOOST_REQUIRE(env + 1 < static_cast<std::ptrdiff_t>(argv.size()));
        BOOST_TEST(argv[env + 1] == "FIXTURE_TOKEN");  // by name: no value anywhere in argv
        // The image, then the action's arguments, last: they cannot become engine options.
        auto image = index_of(argv, digest_a);
        BOOST_TEST(image == static_cast<std::ptrdiff_t>(argv.size() - args.size() - 1));
        BOOST_TEST(std::equal(args.begin(), args.end(), argv.begin() + image + 1));
        BOOST_TEST(index_of(argv, "--privileged") > image);
    }
    s.interactive = true;
    BOOST_TEST(has(ctr::run_argv(ctr::engine{"docker", "/usr/bin/docker"}, a, s, {}), "--interactive"));
    // Podman gets the static tini it was given for its --init (catatonit blocks signals).
    auto podman = ctr::run_argv(ctr::engine{"podman", "/usr/bin/podman", "/usr/bin/tini-static"}, a, s, {});
    BOOST_TEST(index_of(podman, "--init-path=/usr/bin/tini-static") == index_of(podman, "--init") + 1);
    BOOST_TEST(index_of(podman, "--init-path=/usr/bin/tini-static") < index_of(podman, digest_a));
    for (const auto& arg : ctr::run_argv(ctr::engine{"docker", "/usr/bin/docker"}, a, s, {}))
        BOOST_TEST(arg.rfind("--init-path", 0) != 0u, arg);
}

BOOST_AUTO_TEST_CASE(cpus_are_written_with_three_decimals) {
    BOOST_TEST(ctr::cpus_text(1) == "0.001");
    BOOST_TEST(ctr::cpus_text(500) == "0.500");
    BOOST_TEST(ctr::cpus_text(1000) == "1.000");
    BOOST_TEST(ctr::cpus_text(1500) == "1.500");
    BOOST_TEST(ctr::cpus_text(64000) == "64.000");
}

BOOST_AUTO_TEST_CASE(mount_source_is_one_quoted_csv_field) {
    BOOST_TEST(*ctr::mount_source_field("/a b") == "\"source=/a b\"");
    BOOST_TEST(*ctr::mount_source_field("/a,b:c=d") == "\"source=/a,b:c=d\"");
    BOOST_TEST(*ctr::mount_source_field("/a\"b") == "\"source=/a\"\"b\"");
    BOOST_TEST(!ctr::mount_source_field("/a\nb"));
    BOOST_TEST(!ctr::mount_source_field("/a\rb"));
    BOOST_TEST(!ctr::mount_source_field(std::string("/a\x7f", 3)));
}

BOOST_AUTO_TEST_CASE(removal_never_waits_for_a_stop_timeout) {
    auto podman = ctr::remove_argv(ctr::engine{"podman", "/usr/bin/podman"}, {"x", "y"});
    BOOST_TEST((podman == std::vector<std::string>{"rm", "--force", "--time=0", "x", "y"}));
    auto docker = ctr::remove_argv(ctr::engine{"docker", "/usr/bin/docker"}, {"x"});
    BOOST_TEST((docker == std::vector<std::string>{"rm", "--force", "x"}));
}

// T-CTR-17/18: the owner label, HOST:PID:STARTTIME:INSTANCE, and what makes its owner dead.
BOOST_AUTO_TEST_CASE(owner_labels_parse_only_when_every_field_is_well_formed) {
    auto ok = ctr::parse_owner_label("build-7.example:1234:98765:ab12cd34");
    BOOST_REQUIRE(ok);
    BOOST_TEST(ok->host == "build-7.example");
    BOOST_TEST(ok->pid == 1234);
    BOOST_TEST(ok->start_time == "98765");
    BOOST_TEST(ok->instance == "ab12cd34");
    auto colon_host = ctr::parse_owner_label("a:b:1:2:x");  // fields from the right
    BOOST_REQUIRE(colon_host);
    BOOST_TEST(colon_host->host == "a:b");
    for (std::string bad : {"", "host", "host:1:2", ":1:2:x", "host:1:2:", "host:1::x", "host::2:x", "host:0:2:x",
                            "host:-1:2:x", "host:+1:2:x", "host:1x:2:x", "host:1:2a:x", "host:99999999999:2:x",
                            "host: 1:2:x", "host:1:2:x y", "host:1:2:x\n", "h\u00f6st:1:2:x"})
        BOOST_TEST(!ctr::parse_owner_label(bad), bad);
}

BOOST_AUTO_TEST_CASE(only_a_gone_owner_on_this_host_is_dead) {
    // pid -> what /proc says: absent (gone), a start time, or "" (exists, unreadable).
    std::map<long, std::string> running = {{100, "5000"}, {200, ""}};
    int asked = 0;
    ctr::start_time_reader reader = [&](long pid) -> std::optional<std::string> {
        ++asked;
        auto it = running.find(pid);
        return it == running.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto dead = [&](const std::string& label) { return ctr::owner_is_dead(label, "here", reader); };
    BOOST_TEST(dead("here:300:5000:aa"));    // no such process
    BOOST_TEST(dead("here:100:4999:aa"));    // the pid was reused by another process
    BOOST_TEST(!dead("here:100:5000:aa"));   // alive: another runner's live container (T-CTR-18)
    BOOST_TEST(!dead("here:200:1:aa"));      // exists, start time unknown: left alone
    asked = 0;
    BOOST_TEST(!dead("there:300:5000:aa"));  // another host's pids mean nothing here
    BOOST_TEST(!dead("here:300::aa"));       // unparsable: never touched
    BOOST_TEST(!dead("here.example:300:5000:aa"));
    BOOST_TEST(asked == 0);
}

BOOST_AUTO_TEST_CASE(the_dead_owner_sweep_picks_names_from_ps_output) {
    ctr::start_time_reader reader = [](long pid) -> std::optional<std::string> {
        if (pid == 100) return std::string("5000");
        return std::nullopt;
    };
    std::string ps = "agentctl-main-r1-aa-1 here:300:5000:aa\n"
                     "agentctl-job-live here:100:5000:bb\r\n"
                     "other-host here2:300:5000:cc\n"
                     "empty-label \n"
                     "odd here:300:5000:dd extra words\n"
                     "\n"
                     "job-crashed here:301:7:ee";
    auto dead = ctr::dead_owner_containers(ps, "here", reader);
    BOOST_TEST((dead == std::vector<std::string>{"agentctl-main-r1-aa-1", "job-crashed"}));
    BOOST_TEST(ctr::dead_owner_containers("", "here", reader).empty());
}

BOOST_AUTO_TEST_CASE(the_owned_list_format_is_each_engines_own) {
    auto docker = ctr::owned_list_argv(ctr::engine{"docker", "/usr/bin/docker"});
    BOOST_TEST((docker == std::vector<std::string>{"ps", "--all", "--filter", "label=agentctl.owner", "--format",
                                                   "{{.Names}} {{.Label \"agentctl.owner\"}}"}));
    auto podman = ctr::owned_list_argv(ctr::engine{"podman", "/usr/bin/podman"});
    BOOST_TEST(podman.back() == "{{.Names}} {{index .Labels \"agentctl.owner\"}}");
}

BOOST_AUTO_TEST_CASE(start_times_come_from_proc_and_a_reaped_pid_has_none) {
    std::ifstream stat("/proc/self/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));  // field 3 onwards
    std::string field;
    for (int i = 3; i <= 22; ++i) fields >> field;
    BOOST_TEST(agentctl::exec::process_start_time(::getpid()).value_or("<none>") == field);
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    BOOST_REQUIRE(child > 0);
    int status = 0;
    BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
    BOOST_TEST(!agentctl::exec::process_start_time(child));
    BOOST_TEST(!agentctl::exec::process_start_time(0));
    BOOST_TEST(!agentctl::exec::process_start_time(-1));
}

BOOST_AUTO_TEST_CASE(an_image_id_must_match_exactly) {
    BOOST_TEST(ctr::match_image("docker", digest_a, digest_a + "\n").ok);
    BOOST_TEST(ctr::match_image("podman", digest_a, std::string(64, 'a') + " localhost/x@" + digest_b).ok);
    auto other = ctr::match_image("docker", digest_a, digest_b);
    BOOST_TEST(!other.ok);
    BOOST_TEST(other.message.find(digest_b) != std::string::npos, other.message);
    BOOST_TEST(!ctr::match_image("docker", digest_a, "").ok);
}

BOOST_AUTO_TEST_CASE(a_repo_digest_must_match_name_and_digest) {
    std::string id = digest_b;
    auto ok = [&](const std::string& ref, const std::string& digests) {
        return ctr::match_image("docker", ref, id + " " + digests).ok;
    };
    BOOST_TEST(ok("registry.example/worker@" + digest_a, "registry.example/worker@" + digest_a));
    BOOST_TEST(!ok("registry.example/worker@" + digest_a, "registry.example/worker2@" + digest_a));
    BOOST_TEST(!ok("registry.example/worker@" + digest_a, "registry.example/worke@" + digest_a));
    BOOST_TEST(!ok("registry.example/worker@" + digest_a, "registry.example/worker@" + digest_b));
    BOOST_TEST(!ok("worker@" + digest_a, "myworker@" + digest_a));
    // Docker shows familiar names, Podman fully qualified ones.
    BOOST_TEST(ok("alpine@" + digest_a, "docker.io/library/alpine@" + digest_a));
    BOOST_TEST(ok("docker.io/library/alpine@" + digest_a, "alpine@" + digest_a));
    BOOST_TEST(ok("library/alpine@" + digest_a, "alpine@" + digest_a));
    BOOST_TEST(ok("user/tool@" + digest_a, "docker.io/user/tool@" + digest_a));
    // The tag is ignored; a registry port is not a tag.
    BOOST_TEST(ok("alpine:3.20@" + digest_a, "alpine@" + digest_a));
    BOOST_TEST(ok("localhost:5000/x@" + digest_a, "localhost:5000/x@" + digest_a));
    BOOST_TEST(!ok("localhost:5000/x@" + digest_a, "localhost/x@" + digest_a));
    auto loaded = ctr::match_image("docker", "localhost/x@" + digest_a, id);
    BOOST_TEST(!loaded.ok);
    BOOST_TEST(loaded.message.find("no recorded repo digest") != std::string::npos, loaded.message);
}

BOOST_AUTO_TEST_CASE(the_client_gets_only_engine_variables_then_the_action_values) {
    std::map<std::string, std::string> host = {{"DOCKER_HOST", "unix:///x.sock"}, {"CONTAINERS_CONF", "/c.conf"},
                                               {"PATH", "/usr/bin"},             {"LD_PRELOAD", "/evil.so"},
                                               {"SSH_AUTH_SOCK", "/agent"},      {"AWS_SECRET_ACCESS_KEY", "k"}};
    auto env = ctr::client_environment(
        [&](std::string_view name) -> std::optional<std::string> {
            auto it = host.find(std::string(name));
            return it == host.end() ? std::nullopt : std::optional<std::string>(it->second);
        },
        {"TOKEN=s3cr3t"});
    std::sort(env.begin(), env.end());
    BOOST_TEST((env == std::vector<std::string>{"CONTAINERS_CONF=/c.conf", "DOCKER_HOST=unix:///x.sock",
                                                "PATH=/usr/bin", "TOKEN=s3cr3t"}));
}

BOOST_AUTO_TEST_CASE(event_logs_tell_the_containers_status_from_the_engines) {
    auto podman = ctr::parse_events("create 0\ninit 0\nstart 0\nattach 0\ndied 125\nremove 0\n");
    BOOST_TEST((podman.known && podman.started && podman.exit_code == 125 && !podman.oom));
    auto docker = ctr::parse_events("create \nattach \nstart \noom \ndie 137\ndestroy \n");
    BOOST_TEST((docker.known && docker.started && docker.exit_code == 137 && docker.oom));
    auto never = ctr::parse_events("create \nattach \ndestroy \n");
    BOOST_TEST((never.known && !never.started && !never.exit_code));
    BOOST_TEST(!ctr::parse_events("").known);
}

BOOST_AUTO_TEST_CASE(no_such_container_in_either_engines_words) {
    BOOST_TEST(ctr::says_no_such_container("Error response from daemon: No such container: x"));
    BOOST_TEST(ctr::says_no_such_container("Error: no container with name or ID \"x\" found: no such container"));
    BOOST_TEST(ctr::says_no_such_container("Error: inspecting object: no such container x"));
    BOOST_TEST(!ctr::says_no_such_container("Cannot connect to the Docker daemon"));
}

BOOST_AUTO_TEST_CASE(front_end_refuses_variables_that_steer_the_engine) {
    for (std::string name : {"LD_PRELOAD", "DOCKER_API_VERSION", "CONTAINERS_STORAGE_CONF", "HTTP_PROXY", "http_proxy",
                             "XDG_DATA_HOME", "NOTIFY_SOCKET", "PODMAN_USERNS"}) {
        auto codes = diagnostic_codes(one_container_action("        image: " + digest_a + "\n",
                                                           "      env: {" + name + ": {value: x}}\n"));
        BOOST_TEST(has(codes, "engine_variable_not_allowed"), name);
    }
    auto fine = diagnostic_codes(one_container_action("        image: " + digest_a + "\n", "      env: {TOKEN: {value: x}}\n"));
    BOOST_TEST(fine.empty());
}

BOOST_AUTO_TEST_CASE(front_end_refuses_unpinned_and_malformed_images) {
    std::string hex(64, 'c');
    for (std::string image : std::vector<std::string>{"alpine", "alpine:3.20", "alpine:latest", "sha256:" + std::string(63, 'c'), "sha256:" + std::string(65, 'c'),
          "sha256:" + std::string(64, 'C'), "sha512:" + hex, "sha256:", "alpine@", "alpine@sha256:" + hex + "@sha256:" + hex,
          "--privileged@sha256:" + hex, "-v/:/host@sha256:" + hex, "al pine@sha256:" + hex, "@sha256:" + hex}) {
        auto codes = diagnostic_codes(one_container_action("        image: \"" + image + "\"\n"));
        BOOST_TEST(has(codes, "invalid_image_reference"), image);
    }
    for (std::string image : std::vector<std::string>{"sha256:" + hex, "registry.example/w@sha256:" + hex, "alpine:3.20@sha256:" + hex}) {
        auto codes = diagnostic_codes(one_container_action("        image: \"" + image + "\"\n"));
        BOOST_TEST(codes.empty(), image);
    }
}

BOOST_AUTO_TEST_CASE(front_end_limits_are_exact_ranges) {
    auto codes = [&](const std::string& field, const std::string& value) {
        return diagnostic_codes(one_container_action("        image: " + digest_a + "\n        " + field + ": " + value + "\n"));
    };
    BOOST_TEST(codes("memoryLimitBytes", "16777216").empty());
    BOOST_TEST(codes("memoryLimitBytes", "17179869184").empty());
    for (std::string bad : {"16777215", "17179869185", "0", "-1", "1.5e7", "\"16MiB\"", "0x1000000"})
        BOOST_TEST(!codes("memoryLimitBytes", bad).empty(), bad);
    BOOST_TEST(codes("cpuLimitMillis", "1").empty());
    BOOST_TEST(codes("cpuLimitMillis", "64000").empty());
    for (std::string bad : {"0", "-1", "64001", "0.5", "\"1,5\""}) BOOST_TEST(!codes("cpuLimitMillis", bad).empty(), bad);
    BOOST_TEST(codes("pidsLimit", "1").empty());
    BOOST_TEST(codes("pidsLimit", "4096").empty());
    for (std::string bad : {"0", "-1", "4097", "9223372036854775808"}) BOOST_TEST(!codes("pidsLimit", bad).empty(), bad);
    BOOST_TEST(!codes("runtime", "lxc").empty());
}

BOOST_AUTO_TEST_SUITE_END()

// Under --init, the init reports a command it cannot run; nothing else is taken for that.
BOOST_AUTO_TEST_CASE(init_exec_failures_are_told_from_the_commands_own_status) {
    using ctr::init_exec_failure;
    BOOST_TEST((ctr::init_exec_failure_of(
                    127, "[FATAL tini (7)] exec /bin/nope failed: No such file or directory\n") ==
                init_exec_failure::not_found));
    BOOST_TEST(
        (ctr::init_exec_failure_of(126, "[FATAL tini (7)] exec /etc/passwd failed: Permission denied\n") ==
         init_exec_failure::not_executable));
    BOOST_TEST((ctr::init_exec_failure_of(
                    1, "ERROR (catatonit:6): failed to exec pid1: No such file or directory\n") ==
                init_exec_failure::not_found));
    BOOST_TEST(
        (ctr::init_exec_failure_of(1, "ERROR (catatonit:6): failed to exec pid1: Permission denied\n") ==
         init_exec_failure::not_executable));
    BOOST_TEST((ctr::init_exec_failure_of(127, "ERROR (catatonit:6): failed to exec pid1: No such file") ==
                init_exec_failure::none));
    // The command's own 127 (a shell's "not found"), or the init's line with another status.
    BOOST_TEST((ctr::init_exec_failure_of(127, "sh: nope: not found\n") == init_exec_failure::none));
    BOOST_TEST((ctr::init_exec_failure_of(1, "[FATAL tini (7)] exec /bin/nope failed: x") ==
                init_exec_failure::none));
    BOOST_TEST((ctr::init_exec_failure_of(0, "") == init_exec_failure::none));
}
