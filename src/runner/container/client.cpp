#include "runner/container/client.hpp"

#include <agentctl/process.hpp>

#include "exec/client.hpp"
#include "exec/host.hpp"

namespace asio = boost::asio;

namespace agentctl::container {

expected<engine> find_engine(std::string_view name, std::string_view search_path) {
    auto path = resolve_executable(name, search_path);
    if (path) return engine{std::string(name), *path};
    if (name != "podman") return path.error();
    // Where the Podman installer for macOS puts it; harmless elsewhere.
    const std::string fallback = "/opt/podman/bin/podman";
    if (exec::is_executable_file(fallback)) return engine{"podman", fallback};
    return task_error{path.error().code, path.error().message + " nor at " + fallback};
}

expected<std::string> find_static_tini(std::string_view search_path) {
    // Statically linked by name: a bind-mounted init must run in any image, busybox and
    // scratch included (the dynamically linked /usr/bin/tini would not).
    for (std::string_view name : {"tini-static", "docker-init"})
        if (auto path = resolve_executable(name, search_path)) return path;
    const std::string fallback = "/usr/libexec/docker/docker-init";
    if (exec::is_executable_file(fallback)) return fallback;
    return task_error{
        error_code::executable_not_found,
        "podman needs a static tini for its --init (its own, catatonit, starts the command with "
        "SIGTSTP, SIGTTIN and SIGTTOU blocked): neither tini-static nor docker-init is in the "
        "PATH, nor " +
            fallback + "; install tini (Debian, Ubuntu: the tini package)"};
}

asio::awaitable<process_result> call(const engine& e, std::vector<std::string> args,
                                     std::vector<std::string> env, bool cancellable) {
    exec::client_call c;
    c.executable = e.path;
    c.args = std::move(args);
    c.env = std::move(env);
    c.timeout = call_timeout;
    c.output_limit = call_output_limit;
    co_return co_await exec::call_client(std::move(c), cancellable);
}

asio::awaitable<image_probe> probe_image(const engine& e, const std::string& reference,
                                         const host_environment& host_env) {
    auto env = client_environment(host_env);
    process_result r = co_await call(e, inspect_image_argv(reference), env, /*cancellable=*/true);
    if (r.outcome == process_outcome::exited && r.exit_code == 0)
        co_return match_image(e.name, reference, r.stdout_bytes);

    image_probe probe;
    probe.message =
        e.name + " could not inspect the pinned image (" + describe(r) + "): " + excerpt(r.stderr_bytes);
    if (r.outcome != process_outcome::exited) co_return probe;
    // Explain a common case: the repository is there, but not under the pinned digest (an
    // image loaded from an archive has no repo digest at all). Never used to pick an image.
    if (!parse_repo_digest(reference)) co_return probe;
    process_result listed = co_await call(e, list_repository_argv(reference), env, true);
    if (listed.outcome != process_outcome::exited || listed.exit_code != 0) co_return probe;
    std::string hint = repository_hint(reference, listed.stdout_bytes);
    if (!hint.empty()) probe.message += "; " + hint;
    co_return probe;
}

asio::awaitable<container_events> events_of(const engine& e, const std::string& name,
                                            std::chrono::system_clock::time_point since,
                                            std::vector<std::string> env) {
    process_result r =
        co_await call(e, events_argv(e, name, since, std::chrono::system_clock::now()), std::move(env));
    if (r.outcome != process_outcome::exited || r.exit_code != 0) co_return container_events{};
    co_return parse_events(r.stdout_bytes);
}

asio::awaitable<owners_sweep> remove_dead_owners_containers(const engine& e, std::vector<std::string> env) {
    owners_sweep out;
    process_result listed = co_await call(e, owned_list_argv(e), env);
    if (listed.outcome != process_outcome::exited || listed.exit_code != 0) {
        out.list_error = e.name + " ps: " + describe(listed) + ": " + excerpt(listed.stderr_bytes);
        co_return out;
    }
    std::string host = exec::host_name();
    auto dead = dead_owner_containers(listed.stdout_bytes, host, exec::process_start_time);
    if (dead.empty()) co_return out;
    process_result removed = co_await call(e, remove_argv(e, dead), env);
    bool ok = removed.outcome == process_outcome::exited && removed.exit_code == 0;
    for (auto& name : dead) {
        swept_container c;
        c.engine = e.name;
        c.name = std::move(name);
        c.removed = ok;
        if (!ok) c.error = e.name + " rm: " + describe(removed) + ": " + excerpt(removed.stderr_bytes);
        out.containers.push_back(std::move(c));
    }
    co_return out;
}

}  // namespace agentctl::container
