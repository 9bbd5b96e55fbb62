// Container engine argument vectors and output parsing (docs/DESIGN.md, "Containers").
#include "runner/container/argv.hpp"

#include "exec/client.hpp"
#include "runner/lines.hpp"
#include "spec/engine_variables.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>

namespace agentctl::container {
namespace {

constexpr std::string_view digest_prefix = "sha256:";

std::vector<std::string_view> words(std::string_view s) {
    std::vector<std::string_view> out;
    while (!s.empty()) {
        auto start = s.find_first_not_of(" \t\r\n");
        if (start == std::string_view::npos) break;
        s.remove_prefix(start);
        auto end = s.find_first_of(" \t\r\n");
        out.push_back(s.substr(0, end));
        if (end == std::string_view::npos) break;
        s.remove_prefix(end);
    }
    return out;
}

std::string normalise_repository(std::string_view name) {
    // Drop a tag: a ':' after the last '/' (a ':' before it is a registry port).
    auto slash = name.rfind('/');
    auto colon = name.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash))
        name = name.substr(0, colon);
    auto first_slash = name.find('/');
    if (first_slash == std::string_view::npos) return "docker.io/library/" + std::string(name);
    std::string_view domain = name.substr(0, first_slash);
    bool is_domain = domain.find('.') != std::string_view::npos ||
                     domain.find(':') != std::string_view::npos || domain == "localhost";
    if (!is_domain) return "docker.io/" + std::string(name);
    std::string_view rest = name.substr(first_slash + 1);
    if (domain == "index.docker.io") domain = "docker.io";
    if (domain == "docker.io" && rest.find('/') == std::string_view::npos)
        return "docker.io/library/" + std::string(rest);
    return std::string(domain) + "/" + std::string(rest);
}

std::string unix_time(std::chrono::system_clock::time_point t) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    char buf[48];
    std::snprintf(buf, sizeof buf, "%lld.%09lld", static_cast<long long>(ns / 1000000000),
                  static_cast<long long>(ns % 1000000000));
    return buf;
}

// The repository of NAME[:TAG]@sha256:D, as given (tag dropped), for `image ls`.
std::string repository_of(std::string_view reference) {
    std::string name(reference.substr(0, reference.rfind('@')));
    auto slash = name.rfind('/');
    auto colon = name.rfind(':');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) name.resize(colon);
    return name;
}

}  // namespace

std::vector<std::string> client_environment(const host_environment& host_env,
                                            const std::vector<std::string>& action_env) {
    std::vector<std::string> env;
    if (host_env)
        for (auto name : engine_client_variables)
            if (auto value = host_env(name)) env.push_back(std::string(name) + "=" + *value);
    env.insert(env.end(), action_env.begin(), action_env.end());
    return env;
}

std::string excerpt(std::string_view text) {
    return exec::excerpt(text);
}

std::string describe(const process_result& r) {
    return exec::describe_call(r, call_timeout, call_output_limit);
}

bool says_no_such_container(std::string_view stderr_text) {
    std::string lower(stderr_text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return lower.find("no such container") != std::string::npos ||
           lower.find("no container with name or id") != std::string::npos ||
           lower.find("no such object") != std::string::npos;
}

std::optional<repo_digest> parse_repo_digest(std::string_view reference) {
    auto at = reference.rfind('@');
    if (at == std::string_view::npos || at == 0) return std::nullopt;
    std::string_view digest = reference.substr(at + 1);
    if (digest.substr(0, digest_prefix.size()) != digest_prefix) return std::nullopt;
    return repo_digest{normalise_repository(reference.substr(0, at)), std::string(digest)};
}

image_probe match_image(std::string_view engine_name, std::string_view reference,
                        std::string_view inspect_output) {
    image_probe probe;
    auto tokens = words(inspect_output);
    if (tokens.empty()) {
        probe.message = std::string(engine_name) + " image inspect printed no image id";
        return probe;
    }
    std::string id(tokens[0]);
    if (id.substr(0, digest_prefix.size()) != digest_prefix) id = std::string(digest_prefix) + id;
    auto wanted = parse_repo_digest(reference);
    if (!wanted) {
        if (id == reference) {
            probe.ok = true;
            probe.image_id = id;
        } else {
            probe.message = std::string(engine_name) + " resolved " + std::string(reference) +
                            " to a different image, " + id;
        }
        return probe;
    }
    std::string found;
    for (std::size_t i = 1; i < tokens.size(); ++i) {
        auto have = parse_repo_digest(tokens[i]);
        if (have && have->repository == wanted->repository && have->digest == wanted->digest) {
            probe.ok = true;
            probe.image_id = id;
            return probe;
        }
        found += (found.empty() ? "" : ", ") + std::string(tokens[i]);
    }
    if (found.empty())
        probe.message =
            std::string(engine_name) + " found image " + id + " for " + std::string(reference) +
            " but it has no recorded repo digest, so it cannot be shown to be the pinned one (images "
            "loaded with `load` or built locally have none): refer to it as " +
            id + ", or pull it by digest before the run";
    else
        probe.message = std::string(engine_name) + " found image " + id + " for " + std::string(reference) +
                        " but its repo digests (" + found + ") do not include the pinned one";
    return probe;
}

std::optional<std::string> mount_source_field(std::string_view path) {
    std::string field = "\"source=";
    for (char c : path) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) return std::nullopt;
        if (c == '"') field.push_back('"');  // CSV: a quote inside a quoted field is doubled
        field.push_back(c);
    }
    field.push_back('"');
    return field;
}

std::string cpus_text(std::uint32_t millis) {
    std::string frac = std::to_string(millis % 1000);
    return std::to_string(millis / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

init_exec_failure init_exec_failure_of(int exit_code, std::string_view stderr_text) {
    // tini: exit 127 (ENOENT) or 126, "[FATAL tini (7)] exec /x failed: REASON"; catatonit:
    // exit 1, "ERROR (catatonit:6): failed to exec pid1: REASON".
    std::size_t at = std::string_view::npos;
    if (exit_code == 127 || exit_code == 126) {
        if (auto tini = stderr_text.find("[FATAL tini ("); tini != std::string_view::npos) {
            auto failed = stderr_text.find(" failed: ", tini);
            if (stderr_text.find("] exec ", tini) < failed) at = failed + 9;
        }
    } else if (exit_code == 1) {
        constexpr std::string_view catatonit = "failed to exec pid1: ";
        auto line = stderr_text.find("(catatonit:");
        if (line != std::string_view::npos) {
            auto failed = stderr_text.find(catatonit, line);
            if (failed != std::string_view::npos) at = failed + catatonit.size();
        }
    }
    if (at == std::string_view::npos) return init_exec_failure::none;
    std::string_view reason = stderr_text.substr(at, stderr_text.find('\n', at) - at);
    if (reason.starts_with("No such file or directory") || reason.starts_with("Not a directory"))
        return init_exec_failure::not_found;
    return init_exec_failure::not_executable;  // EACCES, ENOEXEC, ...
}

std::vector<std::string> run_argv(const engine& e, const action_spec& action, const invocation& s,
                                  const std::vector<std::string>& args) {
    const container_spec& c = *action.container;
    std::string memory = std::to_string(c.memory_limit_bytes) + "b";
    // --init: a small init (tini) is PID 1 and the command its child, so that the command gets
    // the default signal dispositions (SIGTERM ends it) and orphans are reaped (docs/TESTING.md,
    // "An init in containers").
    std::vector<std::string> argv = {"run", "--rm", "--init"};
    if (!e.init_path.empty()) argv.push_back("--init-path=" + e.init_path);
    argv.insert(argv.end(), {"--pull=never", "--network=none", "--read-only"});
    // Podman mounts writable tmpfs on /run, /tmp and /var/tmp under --read-only by default.
    if (e.name == "podman") argv.push_back("--read-only-tmpfs=false");
    argv.insert(argv.end(),
                {
                    // A private IPC namespace without /dev/shm (writable in both engines otherwise).
                    "--ipc=none",
                    "--user=65532:65532",
                    "--cap-drop=ALL",
                    "--security-opt=no-new-privileges",
                    "--memory=" + memory,
                    "--memory-swap=" + memory,  // equal: no swap on top of the limit
                    "--cpus=" + cpus_text(c.cpu_limit_millis),
                    "--pids-limit=" + std::to_string(c.pids_limit),
                    "--tmpfs=/tmp:rw,noexec,nosuid,nodev,size=16777216",
                    // World-writable (1777) in both engines, even with --ipc=none.
                    "--tmpfs=/dev/mqueue:ro",
                    "--mount=type=bind," + *mount_source_field(s.workspace) + ",target=/workspace,readonly",
                    "--workdir=/workspace",
                    // Output reaches us through the attached client only; the engine keeps no log of it.
                    "--log-driver=none",
                    "--name=" + s.name,
                });
    for (const auto& label : s.labels) argv.push_back("--label=" + label);
    argv.push_back("--entrypoint=" + action.command);
    if (s.interactive) argv.push_back("--interactive");
    for (const auto& name : s.env_names) {
        argv.push_back("--env");
        argv.push_back(name);
    }
    argv.push_back(s.image_id);
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

container_events parse_events(std::string_view output) {
    container_events ev;
    while (!output.empty()) {
        auto line = words(next_line(output));
        if (line.empty()) continue;
        ev.known = true;
        std::string_view action = line[0];
        if (action == "start" || action == "init") ev.started = true;
        if (action == "oom") ev.oom = true;
        if ((action == "die" || action == "died") && line.size() > 1) {
            ev.started = true;
            ev.exit_code = std::atoi(std::string(line[1]).c_str());
        }
    }
    return ev;
}

std::vector<std::string> remove_argv(const engine& e, const std::vector<std::string>& names) {
    std::vector<std::string> argv = {"rm", "--force"};
    if (e.name == "podman") argv.push_back("--time=0");
    argv.insert(argv.end(), names.begin(), names.end());
    return argv;
}

std::optional<owner_label> parse_owner_label(std::string_view value) {
    // Ours hold only the characters the launcher's label_safe keeps.
    for (char c : value) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_' || c == ':' || c == '/';
        if (!ok) return std::nullopt;
    }
    // From the right: PID, STARTTIME and INSTANCE hold no ':', the host is the rest.
    auto instance_at = value.rfind(':');
    if (instance_at == std::string_view::npos || instance_at == 0) return std::nullopt;
    auto start_at = value.rfind(':', instance_at - 1);
    if (start_at == std::string_view::npos || start_at == 0) return std::nullopt;
    auto pid_at = value.rfind(':', start_at - 1);
    if (pid_at == std::string_view::npos || pid_at == 0) return std::nullopt;
    owner_label out;
    out.host = std::string(value.substr(0, pid_at));
    out.instance = std::string(value.substr(instance_at + 1));
    out.start_time = std::string(value.substr(start_at + 1, instance_at - start_at - 1));
    std::string_view pid = value.substr(pid_at + 1, start_at - pid_at - 1);
    auto is_digits = [](std::string_view s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    if (out.instance.empty() || !is_digits(out.start_time) || !is_digits(pid)) return std::nullopt;
    auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), out.pid);
    if (ec != std::errc() || end != pid.data() + pid.size() || out.pid <= 0 || out.pid > INT_MAX)
        return std::nullopt;
    return out;
}

bool owner_is_dead(std::string_view label_value, std::string_view our_host,
                   const start_time_reader& start_time_of) {
    auto owner = parse_owner_label(label_value);
    if (!owner || owner->host != our_host) return false;
    auto start = start_time_of(owner->pid);
    if (!start) return true;             // no such process
    if (start->empty()) return false;    // exists, start time unknown: leave it
    return *start != owner->start_time;  // the pid was reused
}

std::vector<std::string> owned_list_argv(const engine& e) {
    // Docker's template has .Label; Podman's has only the .Labels map.
    std::string format = e.name == "podman" ? "{{.Names}} {{index .Labels \"agentctl.owner\"}}"
                                            : "{{.Names}} {{.Label \"agentctl.owner\"}}";
    return {"ps", "--all", "--filter", "label=agentctl.owner", "--format", format};
}

std::vector<std::string> dead_owner_containers(std::string_view ps_output, std::string_view our_host,
                                               const start_time_reader& start_time_of) {
    std::vector<std::string> dead;
    while (!ps_output.empty()) {
        std::string_view line = next_line(ps_output);
        // A name holds no space; the label value is the rest of the line.
        auto space = line.find(' ');
        if (space == 0 || space == std::string_view::npos) continue;
        if (owner_is_dead(line.substr(space + 1), our_host, start_time_of))
            dead.emplace_back(line.substr(0, space));
    }
    return dead;
}

std::vector<std::string> inspect_image_argv(const std::string& reference) {
    return {"image", "inspect", "--format", "{{.Id}}{{range .RepoDigests}} {{.}}{{end}}", reference};
}

std::vector<std::string> list_repository_argv(std::string_view reference) {
    return {"image",
            "ls",
            "--no-trunc",
            "--digests",
            "--format",
            "{{.ID}}@{{.Digest}}",
            repository_of(reference)};
}

std::string repository_hint(std::string_view reference, std::string_view list_output) {
    std::string present;
    for (auto w : words(list_output)) present += (present.empty() ? "" : ", ") + std::string(w);
    if (present.empty()) return "";
    return repository_of(reference) + " is present locally as " + present +
           " (<none> means no recorded repo digest: refer to the image by its id, sha256:<id>)";
}

std::string label_safe(std::string_view s, std::size_t max) {
    std::string out;
    for (char c : s.substr(0, max)) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_' || c == ':' || c == '/';
        out.push_back(ok ? c : '_');
    }
    return out;
}

std::vector<std::string> events_argv(const engine& e, const std::string& name,
                                     std::chrono::system_clock::time_point since,
                                     std::chrono::system_clock::time_point until) {
    // A margin for a daemon whose clock is a little behind ours; the name is unique anyway.
    std::string from = unix_time(since - std::chrono::seconds(10));
    if (e.name == "podman")
        return {"events",   "--since",           from,       "--stream=false",
                "--filter", "container=" + name, "--format", "{{.Status}} {{.ContainerExitCode}}"};
    // Docker streams until --until: now, which has passed for a local daemon.
    return {"events",
            "--since",
            from,
            "--until",
            unix_time(until),
            "--filter",
            "container=" + name,
            "--format",
            "{{.Action}} {{index .Actor.Attributes \"exitCode\"}}"};
}

std::vector<std::string> run_list_argv(std::string_view run_label, std::string_view owner_label) {
    return {"ps",       "--all",
            "--format", "{{.Names}}",
            "--filter", "label=agentctl.run=" + std::string(run_label),
            "--filter", "label=agentctl.owner=" + std::string(owner_label)};
}

std::vector<std::string> names_in(std::string_view text) {
    std::vector<std::string> names;
    while (!text.empty()) {
        std::string_view line = next_line(text);
        if (!line.empty()) names.emplace_back(line);
    }
    return names;
}

}  // namespace agentctl::container
