#include "harness.hpp"

#include <agentctl/parse.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace asio = boost::asio;
using namespace agentctl;

namespace ctr_test {

namespace {

std::string getenv_or(const char* name, const std::string& fallback = "") {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

std::string quoted(const std::string& s) {
    return boost::json::serialize(boost::json::string(s));
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < text.size()) {
        auto nl = text.find('\n', at);
        std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        if (!line.empty()) out.push_back(line);
        if (nl == std::string::npos) break;
        at = nl + 1;
    }
    return out;
}

}  // namespace

const std::string& image() {
    static const std::string value = [] {
        std::string v = getenv_or("AGENTCTL_TEST_IMAGE");
        if (v.empty()) throw std::runtime_error("AGENTCTL_TEST_IMAGE is not set: run through tools/container-fixture");
        return v;
    }();
    return value;
}

std::string engine_path(const std::string& engine) {
    auto path = resolve_executable(engine, getenv_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
    if (!path) throw std::runtime_error(path.error().message);
    return *path;
}

std::vector<std::string> fixture_env() {
    std::vector<std::string> env;
    for (const char* name : {"DOCKER_HOST", "CONTAINERS_CONF"})
        if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
    return env;
}

cli_test::command_result engine_cli(const std::string& engine, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {engine_path(engine)};
    argv.insert(argv.end(), args.begin(), args.end());
    cli_test::command_options options;
    options.env = fixture_env();
    options.bound = 60s;
    return cli_test::run(argv, options);
}

namespace {
// Field 22 of /proc/PID/stat: the start time that, with the pid, names a process.
std::string start_time(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22; ++i) fields >> field;
    return field;
}
}  // namespace

owner_labels make_owner_labels() {
    char host_buf[256] = {};
    ::gethostname(host_buf, sizeof host_buf - 1);
    std::string host = host_buf;
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    BOOST_REQUIRE(child > 0);
    std::string child_start = start_time(child);  // a zombie until reaped: still readable
    int status = 0;
    BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
    BOOST_REQUIRE(!child_start.empty());
    owner_labels o;
    o.dead = host + ":" + std::to_string(child) + ":" + child_start + ":deadbeef";
    o.live = host + ":" + std::to_string(::getpid()) + ":" + start_time(::getpid()) + ":11ve0000";
    o.elsewhere = "elsewhere.invalid:" + std::to_string(child) + ":" + child_start + ":e15e0000";
    return o;
}

std::map<std::string, std::string> start_owned_containers(const std::string& engine) {
    owner_labels labels = make_owner_labels();
    std::random_device rd;
    std::string tag = std::to_string(rd() % 1000000);
    std::map<std::string, std::string> names;
    for (const auto& [kind, owner] : std::map<std::string, std::string>{{"dead", labels.dead},
                                                                        {"live", labels.live},
                                                                        {"elsewhere", labels.elsewhere},
                                                                        {"unlabelled", ""}}) {
        std::string name = "agentctl-job-" + kind + "-" + tag;
        std::vector<std::string> args = {"run", "--detach", "--network=none", "--name",
                                         name,  "--label",  "agentctl.test=1"};
        if (!owner.empty()) {
            args.push_back("--label");
            args.push_back("agentctl.owner=" + owner);
        }
        args.insert(args.end(), {image(), "sleep", "300"});
        auto r = engine_cli(engine, args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, engine << " run --detach " << name << " failed: " << r.err);
        names[kind] = name;
    }
    return names;
}

bool container_exists(const std::string& engine, const std::string& name) {
    return engine_cli(engine, {"container", "inspect", "--format", "{{.Name}}", name}).exit_code == 0;
}

bool container_gone(const std::string& engine, const std::string& name) {
    for (int i = 0; i < 50; ++i) {
        if (!container_exists(engine, name)) return true;
        ::usleep(100000);  // the engine's own removal, which has no event to wait for here
    }
    return false;
}

void remove_containers(const std::string& engine, const std::map<std::string, std::string>& names) {
    std::vector<std::string> rm = {"rm", "--force"};
    if (engine == "podman") rm.push_back("--time=0");
    for (const auto& entry : names) rm.push_back(entry.second);
    engine_cli(engine, rm);
}

std::vector<std::string> containers_labelled(const std::string& engine, const std::string& label) {
    auto r = engine_cli(engine, {"ps", "--all", "--format", "{{.Names}}", "--filter", "label=" + label});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, engine << " ps failed: " << r.err);
    return lines(r.out);
}

std::string make_workflow(const std::string& policy, const std::string& actions, const std::string& tasks,
                     const std::string& runtime_block) {
    return "apiVersion: agentctl.dev/v1\n"
           "kind: Workflow\n"
           "metadata: {name: ctr-test}\n"
           "spec:\n"
           "  policy:\n"
           "    approval: never\n" +
           policy + runtime_block + "  actions:\n" + actions + "  tasks:\n" + tasks;
}

std::string container_action(const std::string& name, const std::string& engine, const std::string& command,
                             const std::vector<std::string>& args, const action_options& options) {
    std::string list;
    for (const auto& a : args) list += (list.empty() ? "" : ", ") + quoted(a);
    std::string text = "    " + name + ":\n"
                       "      kind: builtin.shell.exec\n"
                       "      command: " + quoted(command) + "\n"
                       "      args: [" + list + "]\n"
                       "      isolation: container\n"
                       "      container:\n"
                       "        image: " + quoted(options.image_ref.empty() ? image() : options.image_ref) + "\n"
                       "        runtime: " + engine + "\n" +
                       options.container;
    if (!options.timeout.empty()) text += "      timeoutSeconds: " + options.timeout + "\n";
    return text + options.extra;
}

const task_result& run_outcome::task(const std::string& id) const {
    auto i = compiled->find(id);
    if (!i) throw std::runtime_error("no task " + id);
    return report.tasks.at(*i);
}

run_outcome run_yaml(const std::string& yaml, const run_setup& setup) {
    run_outcome out;
    parse_result parsed = parse_workflow(yaml, "test.yaml");
    for (const auto& d : parsed.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE_MESSAGE(parsed.document, "the test workflow does not parse:\n" << yaml);
    compile_result compiled = compile(*parsed.document);
    for (const auto& d : compiled.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE_MESSAGE(compiled.compiled, "the test workflow does not compile:\n" << yaml);
    out.compiled.emplace(std::move(*compiled.compiled));
    // Bound into the container, the workspace must be readable by its user (65532).
    std::filesystem::permissions(setup.workspace, std::filesystem::perms(0755));

    std::random_device rd;
    char id[32];
    std::snprintf(id, sizeof id, "ctr-test-%08x%08x", rd(), rd());

    run_settings options;
    options.jobs = setup.jobs;
    options.run_id = id;
    options.base_dir = setup.workspace;
    options.search_path = setup.search_path.value_or(getenv_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
    auto overrides = setup.env;
    options.host_env = [overrides](std::string_view name) -> std::optional<std::string> {
        auto it = overrides.find(std::string(name));
        if (it != overrides.end()) return it->second;
        const char* v = std::getenv(std::string(name).c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
    };

    asio::io_context io(1);
    asio::cancellation_signal signal;
    run_control control{&signal, id};
    bool done = false, poll_done = !setup.poll;
    auto begun = std::chrono::steady_clock::now();
    async_run(io.get_executor(), *out.compiled, std::move(options),
              asio::bind_cancellation_slot(signal.slot(), [&](run_report r) {
                  out.report = std::move(r);
                  done = true;
              }));
    while (!done) {
        io.run_for(20ms);
        if (io.stopped()) io.restart();
        if (!done && !poll_done) poll_done = setup.poll(control);
        auto elapsed = std::chrono::steady_clock::now() - begun;
        if (!done && !out.hung && elapsed > setup.bound) {
            out.hung = true;
            signal.emit(asio::cancellation_type::terminal);
        }
        if (!done && elapsed > setup.bound + 60s) throw std::runtime_error("the run did not end after a terminal cancellation");
    }
    out.wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun);
    BOOST_TEST(!out.hung, "the run passed its bound of " << setup.bound.count() << " s");
    return out;
}

void require_no_containers_left(const run_outcome& out) {
    for (const char* engine : {"docker", "podman"}) {
        auto left = containers_labelled(engine, "agentctl.run=" + out.report.run_id);
        BOOST_TEST(left.empty(), engine << " still has containers of run " << out.report.run_id);
        if (!left.empty()) {  // keep later cases clean
            std::vector<std::string> rm = {"rm", "--force"};
            rm.insert(rm.end(), left.begin(), left.end());
            engine_cli(engine, rm);
        }
    }
}

}  // namespace ctr_test
