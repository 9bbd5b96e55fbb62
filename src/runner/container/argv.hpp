// Container engines without effects: the argument vectors agentctl gives `docker` and
// `podman`, and the parsing of what they print. Pure: no system call, no Asio, no clock (the
// event window is given). The lifecycle that runs these lives beside it
// (launcher.cpp); the decisions are in docs/DESIGN.md, "Containers".
#pragma once

#include <agentctl/process_types.hpp>
#include <agentctl/spec.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::container {

/// Reads agentctl's own environment (runner_settings::host_env).
using host_environment = std::function<std::optional<std::string>(std::string_view)>;

/// An engine client found on this host.
struct engine {
    std::string name;  ///< "docker" | "podman"
    std::string path;  ///< absolute path of a regular executable file
    /// The static tini that `run --init-path` gives Podman, whose own init (catatonit) starts
    /// the command with SIGTSTP, SIGTTIN and SIGTTOU blocked; empty: the engine's own init
    /// (Docker's is tini). docs/TESTING.md, "An init in containers".
    std::string init_path = {};
};

/// The engine and the exact image a container action runs with (the strict preflight's choice).
struct choice {
    container::engine engine;
    std::string image_id;  ///< the inspected id, so that a tag moved meanwhile cannot change it
};

/// Bounds of every engine call but `run` itself.
inline constexpr std::chrono::seconds call_timeout{10};
inline constexpr std::uint64_t call_output_limit = 64 * 1024;

/// Variables forwarded from agentctl's environment to an engine client: the engine's own
/// connection and configuration variables.
const std::vector<std::string_view>& forwarded_variables();

/// The client's environment: only the forwarded variables that are set, then `action_env`
/// ("NAME=value", the action's resolved values, passed on by name with --env NAME).
std::vector<std::string> client_environment(const host_environment& host_env,
                                            const std::vector<std::string>& action_env = {});

/// Stderr as one line for messages: newlines flattened, at most 512 bytes then "…";
/// "no diagnostic output" when empty.
std::string excerpt(std::string_view text);

/// How a finished call went, for messages: "exit status N", "no answer within 10 s", ...
std::string describe(const process_result& r);

/// Under --init, a command the image cannot run is the init's failure, not the engine's: the
/// init's line on stderr with its exit status (tini: 127 or 126, `[FATAL tini (7)] exec /x
/// failed: REASON`; catatonit: 1, `ERROR (catatonit:6): failed to exec pid1: REASON`). Which
/// of the two it was, by REASON, if it was.
enum class init_exec_failure { none, not_found, not_executable };
init_exec_failure init_exec_failure_of(int exit_code, std::string_view stderr_text);

/// True when an engine's stderr says the container does not exist.
bool says_no_such_container(std::string_view stderr_text);

/// Whether the pinned image is available on one engine.
struct image_probe {
    bool ok = false;
    std::string image_id;  ///< "sha256:<64 hex>" when ok
    std::string message;   ///< why not (names the engine), or what was found
};

/// `image inspect` arguments whose output match_image() reads.
std::vector<std::string> inspect_image_argv(const std::string& reference);

/// Checks `image inspect --format` output ("<id> <repo digest>...") against `reference`.
image_probe match_image(std::string_view engine_name, std::string_view reference,
                        std::string_view inspect_output);

/// `image ls` arguments listing what is present of `reference`'s repository, and the
/// sentence added to a failed probe from its output (empty when nothing is present).
std::vector<std::string> list_repository_argv(std::string_view reference);
std::string repository_hint(std::string_view reference, std::string_view list_output);

/// `NAME@sha256:D` split into the repository (tag dropped, normalised the way both engines
/// do: docker.io/library/ for a bare name) and the digest; nullopt for `sha256:ID`.
struct repo_digest {
    std::string repository;
    std::string digest;
};
std::optional<repo_digest> parse_repo_digest(std::string_view reference);

/// What one `run` needs beyond the action itself.
struct invocation {
    std::string name;                    ///< unique container name
    std::vector<std::string> labels;     ///< "key=value"
    std::string image_id;                ///< the inspected image, "sha256:<64 hex>"
    std::string workspace;               ///< canonical host path bound read-only at /workspace
    std::vector<std::string> env_names;  ///< passed by name: --env NAME
    bool interactive = false;            ///< stdin carries data
};

/// The `run` argument vector after the engine (docs/DESIGN.md, "Containers"): --rm, fixed
/// controls, limits, the bind, names and labels, --entrypoint=command, --env NAME..., the
/// image, then `args` (which can no longer be read as engine options).
std::vector<std::string> run_argv(const engine& e, const action_spec& action, const invocation& how,
                                  const std::vector<std::string>& args);

/// `source=PATH` as one CSV field of --mount, quoted so that no character of PATH can end it;
/// nullopt when PATH holds a control character (the engines' CSV readers rewrite "\r\n").
std::optional<std::string> mount_source_field(std::string_view path);

/// `--cpus` text for CPU millis: 500 -> "0.500", 1000 -> "1.000".
std::string cpus_text(std::uint32_t millis);

/// Label values and container names: only characters both engines and their filters take
/// as they are (others become '_'), at most `max` of them.
std::string label_safe(std::string_view s, std::size_t max = 128);

/// What an engine's event log says about one container.
struct container_events {
    bool known = false;            ///< the log could be read and mentions the container
    bool started = false;          ///< it was started
    std::optional<int> exit_code;  ///< it died with this status
    bool oom = false;              ///< the engine recorded an out-of-memory kill
};

/// `events` arguments for container `name` between `since` and `until` (wall clock).
std::vector<std::string> events_argv(const engine& e, const std::string& name,
                                     std::chrono::system_clock::time_point since,
                                     std::chrono::system_clock::time_point until);

/// Parses `events --format` lines ("<action> <exit code>"; Docker's "start", "die", "oom",
/// Podman's "init", "start", "died", ...).
container_events parse_events(std::string_view output);

/// Arguments that remove containers at once: podman stops with a 10 s grace unless told.
std::vector<std::string> remove_argv(const engine& e, const std::vector<std::string>& names);

/// `ps` arguments listing the names of this run's containers (labelled with its run id and
/// owner), and the names in that output.
std::vector<std::string> run_list_argv(std::string_view run_label, std::string_view owner_label);
std::vector<std::string> names_in(std::string_view ps_output);

/// Reads a process's start time (exec::process_start_time): nullopt gone, "" unknown.
using start_time_reader = std::function<std::optional<std::string>(long pid)>;

/// An `agentctl.owner` label value, HOST:PID:STARTTIME:INSTANCE.
struct owner_label {
    std::string host;
    long pid = 0;            ///< > 0
    std::string start_time;  ///< decimal digits
    std::string instance;    ///< not empty
};

/// Parses an owner label value; nullopt unless every field is well formed and every character
/// is one a label of ours can hold (a-z A-Z 0-9 . - _ : /).
std::optional<owner_label> parse_owner_label(std::string_view value);

/// True only for a container whose owner was an agentctl on `our_host` (as our own labels
/// spell it) that is gone: its pid does not exist, or exists with another start time (a
/// reused pid). Another host, an unparsable label or an unknown start time: false, never touched.
bool owner_is_dead(std::string_view label_value, std::string_view our_host,
                   const start_time_reader& start_time_of);

/// `ps` arguments listing every container with an owner label, one "NAME OWNER" per line.
std::vector<std::string> owned_list_argv(const engine& e);

/// Names in `ps` output (owned_list_argv) whose owner is dead (owner_is_dead).
std::vector<std::string> dead_owner_containers(std::string_view ps_output, std::string_view our_host,
                                               const start_time_reader& start_time_of);

}  // namespace agentctl::container
