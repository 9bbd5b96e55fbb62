// The workflow schema (docs/DESIGN.md, "Parser"): tree -> workflow model, one diagnostic per
// problem.
// Semantic checks (references between tasks and actions, templates, policy) are the plan
// compiler's.
#include "spec/engine_variables.hpp"
#include "spec/reader.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>

namespace agentctl {
namespace {

using kind_t = yaml::node::kind_t;

constexpr std::string_view api_v1alpha1 = "agentctl.dev/v1alpha1";
constexpr std::string_view api_v1 = "agentctl.dev/v1";
constexpr std::string_view extension_protocol = "agentctl.dev/process-extension/v1";
constexpr std::size_t max_env_name_bytes = 256;

// Variables that steer the container engine client; a container action may not set them
// (its values are set on the client, which passes them on by name). The client's own
// (engine_client_variables), plus whole families and names the engines, their Go runtime and
// the dynamic loader read: a value there could redirect or subvert a privileged client.
constexpr std::array<std::string_view, 12> engine_variables = {
    "STORAGE_DRIVER", "STORAGE_OPTS", "REGISTRY_AUTH_FILE", "REGISTRIES_CONFIG_PATH",
    "NOTIFY_SOCKET",  "GODEBUG",      "GOTRACEBACK",        "HTTP_PROXY",
    "HTTPS_PROXY",    "NO_PROXY",     "ALL_PROXY",          "SSL_CERT_FILE"};
constexpr std::array<std::string_view, 12> engine_variable_prefixes = {
    "DOCKER_", "CONTAINER_", "CONTAINERS_", "PODMAN_",    "BUILDAH_",    "BUILDKIT_",
    "LD_",     "XDG_",       "SSL_CERT_",   "http_proxy", "https_proxy", "no_proxy"};

bool steers_engine(std::string_view name) {
    auto listed = [&](const auto& names) {
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    if (listed(engine_client_variables) || listed(engine_variables)) return true;
    if (name == "all_proxy") return true;
    return std::any_of(engine_variable_prefixes.begin(), engine_variable_prefixes.end(),
                       [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; });
}

// The reference's features this engine does not run (docs/COMPATIBILITY.md), by where they
// are written. Model, agent, protocol, memory, tool and pack features are out of scope; the
// reference's control flow (loops, routers, sub-workflows, compensation) runs.
constexpr std::array<std::string_view, 8> agent_spec_keys = {"providers",  "agents",   "tools", "memory",
                                                             "mcpServers", "a2aPeers", "packs", "packTrust"};
constexpr std::array<std::string_view, 8> agent_action_kinds = {"builtin.memory.read",
                                                                "builtin.memory.write",
                                                                "builtin.long_term_memory.read",
                                                                "builtin.long_term_memory.write",
                                                                "builtin.long_term_memory.search",
                                                                "builtin.long_term_memory.promote",
                                                                "mcp.call",
                                                                "a2a.delegate"};

template <std::size_t N>
bool is_one_of(std::string_view s, const std::array<std::string_view, N>& list) {
    return std::find(list.begin(), list.end(), s) != list.end();
}

bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// [A-Za-z_][A-Za-z0-9_]*
bool is_identifier(std::string_view s) {
    if (s.empty() || !(is_alpha(s[0]) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return is_alpha(c) || is_digit(c) || c == '_'; });
}

// A sub-workflow's name: an identifier that may also hold `-`, as the reference's names do (it
// turns `-` into `_` where a name prefixes memory keys).
bool is_subworkflow_name(std::string_view s) {
    if (s.empty() || !(is_alpha(s[0]) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '-'; });
}

bool is_env_name(std::string_view s) {
    return s.size() <= max_env_name_bytes && is_identifier(s);
}

bool is_task_id(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
    });
}

bool is_lower_hex(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); });
}

bool is_space_or_control(char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7F;
}

// sha256:<64 lowercase hex>
bool is_digest(std::string_view s) {
    constexpr std::string_view prefix = "sha256:";
    return s.size() == prefix.size() + 64 && s.substr(0, prefix.size()) == prefix &&
           is_lower_hex(s.substr(prefix.size()));
}

// NAME@sha256:<64 lowercase hex> or sha256:<64 lowercase hex>. NAME is non-empty, has no
// whitespace, no second '@', and cannot start with '-' (it must never read as an option).
bool is_image_reference(std::string_view s) {
    if (is_digest(s)) return true;
    auto at = s.find('@');
    if (at == std::string_view::npos || at == 0) return false;
    std::string_view name = s.substr(0, at);
    if (name[0] == '-' || std::any_of(name.begin(), name.end(), is_space_or_control)) return false;
    return is_digest(s.substr(at + 1));
}

// A string that is exactly one `${{ ... }}`: it keeps the JSON type of what it names.
bool is_single_template(std::string_view s) {
    return s.size() >= 5 && s.substr(0, 3) == "${{" && s.substr(s.size() - 2) == "}}" &&
           s.find("${{", 3) == std::string_view::npos && s.find("}}") == s.size() - 2;
}

// MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] (semver.org 2.0.0): numbers without leading zeros,
// dot-separated identifiers of [0-9A-Za-z-], numeric pre-release identifiers without them.
bool is_semantic_version(std::string_view s) {
    auto numeric = [](std::string_view p) {
        return !p.empty() && std::all_of(p.begin(), p.end(), is_digit) && (p.size() == 1 || p[0] != '0');
    };
    auto identifiers = [&](std::string_view text, bool pre) {
        for (std::size_t start = 0;;) {
            std::size_t dot = text.find('.', start);
            std::string_view part = text.substr(start, dot == std::string_view::npos ? dot : dot - start);
            if (part.empty() || !std::all_of(part.begin(), part.end(),
                                             [](char c) { return is_alpha(c) || is_digit(c) || c == '-'; }))
                return false;
            if (pre && std::all_of(part.begin(), part.end(), is_digit) && !numeric(part)) return false;
            if (dot == std::string_view::npos) return true;
            start = dot + 1;
        }
    };
    std::size_t plus = s.find('+');
    if (plus != std::string_view::npos && !identifiers(s.substr(plus + 1), false)) return false;
    std::string_view core = s.substr(0, plus);
    std::size_t dash = core.find('-');
    if (dash != std::string_view::npos && !identifiers(core.substr(dash + 1), true)) return false;
    core = core.substr(0, dash);
    for (int i = 0; i < 3; ++i) {
        std::size_t dot = core.find('.');
        if ((i < 2) == (dot == std::string_view::npos)) return false;
        if (!numeric(core.substr(0, dot))) return false;
        core = dot == std::string_view::npos ? std::string_view() : core.substr(dot + 1);
    }
    return true;
}

std::string env_name_problem(std::string_view name) {
    if (name.empty()) return "an environment variable name must not be empty";
    if (name.size() > max_env_name_bytes)
        return "an environment variable name is at most " + std::to_string(max_env_name_bytes) + " bytes";
    return "\"" + std::string(name) + "\" is not a valid environment variable name";
}

constexpr std::string_view env_name_help = "names match [A-Za-z_][A-Za-z0-9_]*";

class workflow_reader {
public:
    explicit workflow_reader(tree_reader& r) : r_(r) {}

    void read(workflow& wf);

private:
    /// Records a feature this engine does not run; read() reports them all in one diagnostic.
    void unsupported(const place& p, std::string feature) {
        // The diagnostic points at the earliest of them in the document.
        if (!first_unsupported_ ||
            std::pair(p.line, p.column) < std::pair(first_unsupported_->line, first_unsupported_->column))
            first_unsupported_ = p;
        for (const auto& u : wf_->unsupported)
            if (u.feature == feature) return;
        wf_->unsupported.push_back({std::move(feature), p.path});
    }
    void report_unsupported();
    boost::json::object read_vars(const place& p);
    std::vector<std::string> read_vars_files(const place& p);
    void read_network(const place& p, network_spec& network);
    boost::json::value read_pricing(const place& p);
    void read_metadata(const place& p, workflow_metadata& md);
    void read_spec(const place& p, workflow& wf);
    void read_policy(const place& p, policy_spec& policy);
    std::vector<std::string> read_basenames(const place& p);
    void read_runtime(const place& p, runtime_spec& runtime);
    void read_action(const std::string& name, const place& p, action_spec& a);
    std::optional<std::string> read_command(const place& p);
    void read_env(const place& p, action_spec& a, std::vector<place>& where);
    std::optional<env_source> read_env_source(const place& p);
    std::optional<container_spec> read_container(const place& p);
    void read_extension(fields& f, action_spec& a);
    void read_task(const place& p, task_spec& t);
    void read_uses(const place& p, task_spec& t);
    void read_retry(const place& p, retry_spec& retry);
    std::optional<foreach_spec> read_foreach(const place& p);
    std::optional<matrix_spec> read_matrix(const place& p);
    std::optional<std::string> read_whole_template(fields& f, std::string_view key, std::string_view code,
                                                   const std::string& what, std::string help);
    std::optional<loop_spec> read_loop(const place& p);
    void check_loop_alone(const fields& f, const task_spec& t);
    std::optional<route_spec> read_route(const place& p);
    std::optional<compensate_spec> read_compensate(const place& p);
    void read_compensation(const place& p, compensation_spec& c);
    void read_subworkflow(const std::string& name, const place& p, subworkflow_spec& sw);
    void check_invocation(const fields& f);
    std::vector<std::string> read_destinations(const place& p, std::vector<std::string>& seen);
    std::optional<boost::json::value> read_items(const place& p, bool allow_empty);
    boost::json::value read_with(const place& p);
    std::optional<std::string> read_binding_name(const place& p);

    template <class T>
    std::optional<T> read_int(const std::optional<place>& p, std::int64_t min, std::int64_t max) {
        if (!p) return std::nullopt;
        auto v = r_.integer(*p, min, max);
        return v ? std::optional<T>(static_cast<T>(*v)) : std::nullopt;
    }

    tree_reader& r_;
    workflow* wf_ = nullptr;
    std::optional<place> first_unsupported_;
};

// One diagnostic for the whole document, however many such features it uses: they are one
// decision (run it elsewhere, or drop them), not a list of typos.
void workflow_reader::report_unsupported() {
    if (wf_->unsupported.empty()) return;
    std::string features;
    for (const auto& u : wf_->unsupported)
        features += (features.empty() ? "" : ", ") + ("`" + u.feature + "`");
    std::string message = "this workflow uses model, agent, protocol, memory, tool or pack features (" +
                          features + "); agentctl runs process workflows only";
    std::string help =
        "this engine runs builtin.shell.exec, extension.process, builtin.assign, builtin.assert, "
        "builtin.read and builtin.write actions; run the rest with the reference implementation";
    r_.error(*first_unsupported_, "unsupported_feature", std::move(message), std::move(help));
}

void workflow_reader::read(workflow& wf) {
    wf_ = &wf;
    if (!r_.has_root()) {
        r_.error({0, "", 1, 1}, "not_a_mapping", "the document is empty",
                 "a workflow is a mapping with apiVersion, kind, metadata and spec");
        return;
    }
    place root = r_.root();
    if (r_.node(root).kind != kind_t::mapping) {
        r_.error(root, "not_a_mapping", "a workflow must be a mapping, found " + r_.describe(root),
                 "a workflow is a mapping with apiVersion, kind, metadata and spec");
        return;
    }
    fields top(r_, root, {"apiVersion", "kind", "metadata", "spec"});
    if (auto p = top.require("apiVersion")) {
        if (auto v = r_.string(*p)) {
            if (*v == api_v1alpha1 || *v == api_v1)
                wf.api_version = *v;
            else
                r_.error(
                    *p, "unsupported_version", "unsupported apiVersion \"" + *v + "\"",
                    "use apiVersion: " + std::string(api_v1) + " (or " + std::string(api_v1alpha1) + ")");
        }
    }
    if (auto p = top.require("kind")) {
        if (auto v = r_.string(*p); v && *v != "Workflow")
            r_.error(*p, "unsupported_kind", "unsupported kind \"" + *v + "\"", "use kind: Workflow");
    }
    if (auto p = top.require("metadata")) read_metadata(*p, wf.metadata);
    if (auto p = top.require("spec")) read_spec(*p, wf);
    report_unsupported();
}

void workflow_reader::read_metadata(const place& p, workflow_metadata& md) {
    fields f(r_, p, {"name", "description", "labels"});
    if (auto v = f.require("name")) {
        if (auto s = r_.string(*v)) md.name = std::move(*s);
    }
    if (auto v = f.get("description")) {
        if (auto s = r_.string(*v, true)) md.description = std::move(*s);
    }
    if (auto v = f.get("labels")) {
        if (auto list = r_.entries(*v)) {
            for (auto& [key, value] : *list) {
                if (key.empty()) r_.error(value, "empty_value", "a label name must not be empty");
                if (auto s = r_.string(value, true)) md.labels.emplace_back(key, std::move(*s));
            }
        }
    }
}

void workflow_reader::read_spec(const place& p, workflow& wf) {
    fields f(r_, p,
             {"inputs", "policy", "runtime", "actions", "tasks", "outputs", "output", "vars", "varsFiles",
              "providers", "agents", "tools", "memory", "mcpServers", "a2aPeers", "packs", "packTrust",
              "subworkflows", "compensation"});
    if (auto v = f.get("output")) {
        fields o(r_, *v, {"verbose", "showDiff"});
        if (auto b = o.get("verbose"))
            if (auto x = r_.boolean(*b)) wf.output_verbose = *x;
        if (auto b = o.get("showDiff"))
            if (auto x = r_.boolean(*b)) wf.output_show_diff = *x;
    }
    for (auto key : agent_spec_keys)
        if (auto v = f.get(key)) unsupported(*v, "spec." + std::string(key));
    if (auto v = f.get("inputs")) wf.inputs = r_.json_object(*v);
    if (auto v = f.get("compensation")) read_compensation(*v, wf.compensation);
    if (auto v = f.get("subworkflows")) {
        if (auto list = r_.entries(*v)) {
            wf.subworkflows.reserve(list->size());
            for (auto& [name, value] : *list) read_subworkflow(name, value, wf.subworkflows.emplace_back());
        }
    }
    if (auto v = f.get("vars")) wf.vars = read_vars(*v);
    if (auto v = f.get("varsFiles")) wf.vars_files = read_vars_files(*v);
    if (auto v = f.get("policy")) read_policy(*v, wf.policy);
    if (auto v = f.get("runtime")) read_runtime(*v, wf.runtime);
    if (auto v = f.get("actions")) {
        if (auto list = r_.entries(*v)) {
            wf.actions.reserve(list->size());
            for (auto& [name, value] : *list) read_action(name, value, wf.actions.emplace_back());
        }
    }
    if (auto v = f.require("tasks")) {
        if (auto items = r_.sequence(*v)) {
            if (items->empty()) r_.error(*v, "empty_value", "tasks must list at least one task");
            wf.tasks.reserve(items->size());
            for (const auto& item : *items) read_task(item, wf.tasks.emplace_back());
        }
    }
    if (auto v = f.get("outputs")) wf.outputs = r_.json_object(*v);
}

std::vector<std::string> workflow_reader::read_basenames(const place& p) {
    return r_.string_list(p, false, [&](const place& item, const std::string& s) {
        if (s.find('/') == std::string::npos) return true;
        auto base = s.substr(s.rfind('/') + 1);
        r_.error(item, "invalid_value", "allowlists hold executable basenames, found the path \"" + s + "\"",
                 base.empty() ? "list the executable's file name" : "write \"" + base + "\"");
        return false;
    });
}

// A variables mapping: data of any JSON type under names that are not reserved.
boost::json::object workflow_reader::read_vars(const place& p) {
    boost::json::object out;
    auto list = r_.entries(p);
    if (!list) return out;
    for (auto& [name, value] : *list) {
        if (is_reserved_variable(name)) {
            r_.error(value, "reserved_variable",
                     "variable `" + name + "` is reserved: the engine binds vars." + name + " itself",
                     "rename the variable");
            continue;
        }
        out.emplace(name, r_.json(value));
    }
    return out;
}

// File names of `varsFiles`: literal paths relative to the workflow's folder, inside it.
std::vector<std::string> workflow_reader::read_vars_files(const place& p) {
    return r_.string_list(p, false, [&](const place& item, const std::string& s) {
        std::string problem;
        if (s.find("${{") != std::string::npos)
            problem = "a variables file is named literally, not by a template";
        else if (s.front() == '/')
            problem = "variables file `" + s + "` is absolute; name it relative to the workflow's folder";
        else if (s == ".." || s.rfind("../", 0) == 0 || s.find("/../") != std::string::npos ||
                 (s.size() >= 3 && s.compare(s.size() - 3, 3, "/..") == 0))
            problem = "variables file `" + s + "` has a `..` component";
        if (problem.empty()) return true;
        r_.error(item, "invalid_vars_file", problem,
                 "variables files lie beside the workflow or below its folder");
        return false;
    });
}

void workflow_reader::read_network(const place& p, network_spec& network) {
    fields f(r_, p,
             {"allowedSchemes", "allowedPorts", "connectTimeoutSeconds", "maxResponseBytes", "allowPrivate",
              "allowProxy", "customCa"});
    if (auto v = f.get("allowedSchemes")) {
        if (auto items = r_.sequence(*v))
            for (const auto& item : *items)
                if (auto i = r_.choice(item, {"http", "https"}))
                    network.allowed_schemes.emplace_back(*i == 0 ? "http" : "https");
    }
    if (auto v = f.get("allowedPorts")) {
        if (auto items = r_.sequence(*v))
            for (const auto& item : *items)
                if (auto port = read_int<std::uint32_t>(item, 1, 65535))
                    network.allowed_ports.push_back(*port);
    }
    network.connect_timeout_seconds = read_int<int>(f.get("connectTimeoutSeconds"), 1, 300);
    if (auto v = f.get("maxResponseBytes"))
        network.max_response_bytes = r_.unsigned_integer(*v, 1, std::numeric_limits<std::uint64_t>::max());
    if (auto v = f.get("allowPrivate"))
        if (auto b = r_.boolean(*v)) network.allow_private = *b;
    if (auto v = f.get("allowProxy"))
        if (auto b = r_.boolean(*v)) network.allow_proxy = *b;
    // A CA bundle is a secret reference for HTTPS clients: only providers and peers use one.
    if (auto v = f.get("customCa")) unsupported(*v, "spec.policy.network.customCa");
}

void workflow_reader::read_policy(const place& p, policy_spec& policy) {
    fields f(r_, p,
             {"workspaceRoot", "writableRoots", "processAllowlist", "environmentAllowlist", "secretFileRoots",
              "secretProcessAllowlist", "approval", "nonInteractive", "networkAllowlist", "network",
              "toolsAllow", "toolsDeny", "providers"});
    if (auto v = f.get("nonInteractive")) {
        if (auto i = r_.choice(*v, {"pause", "deny_approval", "fail"}))
            policy.non_interactive = static_cast<non_interactive_mode>(*i);
    }
    if (auto v = f.get("networkAllowlist")) {
        if (auto items = r_.sequence(*v)) {
            for (const auto& item : *items) {
                auto s = r_.string(item);
                if (!s) continue;
                std::string_view host = *s;
                if (host.substr(0, 2) == "*.") host.remove_prefix(2);
                bool good = !host.empty() && host.find("*") == std::string_view::npos &&
                            std::all_of(host.begin(), host.end(), [](char c) {
                                return is_alpha(c) || is_digit(c) || c == '.' || c == '-' || c == ':' ||
                                       c == '[' || c == ']';
                            });
                if (!good) {
                    r_.error(item, "invalid_value", "`" + *s + "` is not a host name, address or `*.domain`",
                             "list hosts, e.g. api.example.com or *.example.com");
                    continue;
                }
                policy.network_allowlist.push_back(std::move(*s));
            }
        }
    }
    if (auto v = f.get("network")) read_network(*v, policy.network.emplace());
    if (auto v = f.get("toolsAllow")) policy.tools_allow = r_.string_list(*v);
    if (auto v = f.get("toolsDeny")) policy.tools_deny = r_.string_list(*v);
    if (auto v = f.get("providers")) policy.providers = r_.string_list(*v);
    if (auto v = f.get("workspaceRoot")) {
        if (auto s = r_.string(*v)) policy.workspace_root = std::move(*s);
    }
    if (auto v = f.get("writableRoots")) policy.writable_roots = r_.string_list(*v);
    if (auto v = f.get("processAllowlist")) policy.process_allowlist = read_basenames(*v);
    if (auto v = f.get("environmentAllowlist")) {
        if (auto items = r_.sequence(*v)) {
            for (const auto& item : *items) {
                auto s = r_.string(item, true);
                if (!s) continue;
                if (!is_env_name(*s)) {
                    r_.error(item, "invalid_env_name", env_name_problem(*s), std::string(env_name_help));
                    continue;
                }
                policy.environment_allowlist.push_back(std::move(*s));
            }
        }
    }
    if (auto v = f.get("secretFileRoots")) policy.secret_file_roots = r_.string_list(*v);
    if (auto v = f.get("secretProcessAllowlist")) policy.secret_process_allowlist = read_basenames(*v);
    if (auto v = f.get("approval")) {
        if (auto i = r_.choice(*v, {"never", "mutations", "high_risk", "always"}))
            policy.approval = static_cast<approval_mode>(*i);
    }
}

void workflow_reader::read_runtime(const place& p, runtime_spec& runtime) {
    fields f(r_, p, {"maxConcurrency", "defaultTimeoutSeconds", "killGraceSeconds", "budgets", "pricing"});
    runtime.max_concurrency = read_int<int>(f.get("maxConcurrency"), 1, limits::max_concurrency);
    if (auto p = f.get("defaultTimeoutSeconds"))
        if (auto v = r_.duration_ms(*p, 1, limits::max_timeout_ms)) runtime.default_timeout_ms = *v;
    if (auto v = read_int<int>(f.get("killGraceSeconds"), 0, limits::max_kill_grace_seconds))
        runtime.kill_grace_seconds = *v;
    if (auto v = f.get("budgets")) {
        constexpr std::array<std::string_view, 7> model_keys = {
            "maxProviderRequests", "maxTurns",       "maxToolCalls",   "maxInputTokens",
            "maxOutputTokens",     "maxTotalTokens", "maxCostMicrousd"};
        fields b(r_, *v,
                 {"maxProcessOutputBytes", "maxWallTimeSeconds", "maxTasks", "maxExpansionItems",
                  "maxArtifactBytes", "maxLoopIterations", "maxProviderRequests", "maxTurns", "maxToolCalls",
                  "maxInputTokens", "maxOutputTokens", "maxTotalTokens", "maxCostMicrousd"});
        auto positive = [&](const place& x) {
            return r_.unsigned_integer(x, 1, std::numeric_limits<std::uint64_t>::max());
        };
        budgets_spec& budgets = runtime.budgets;
        auto limit = [&](std::string_view key, std::optional<std::uint64_t>& out) {
            if (auto x = b.get(key)) out = positive(*x);
        };
        limit("maxProcessOutputBytes", budgets.max_process_output_bytes);
        limit("maxWallTimeSeconds", budgets.max_wall_time_seconds);
        limit("maxTasks", budgets.max_tasks);
        limit("maxExpansionItems", budgets.max_expansion_items);
        limit("maxArtifactBytes", budgets.max_artifact_bytes);
        limit("maxLoopIterations", budgets.max_loop_iterations);
        if (auto list = r_.entries(*v)) {
            for (auto& [key, x] : *list)
                if (is_one_of(key, model_keys))
                    if (auto n = positive(x)) budgets.model_usage.emplace_back(key, *n);
        }
    }
    if (auto v = f.get("pricing")) runtime.pricing = read_pricing(*v);
}

// `runtime.pricing`: versioned model rates in micro-US-dollars per million tokens. Checked
// for shape only: no model runs here, so no rate is ever applied.
boost::json::value workflow_reader::read_pricing(const place& p) {
    fields f(r_, p, {"version", "models"});
    if (!f.ok()) return nullptr;
    boost::json::object out;
    if (auto v = f.require("version"))
        if (auto s = r_.string(*v)) out["version"] = *s;
    boost::json::object models;
    if (auto v = f.require("models")) {
        if (auto list = r_.entries(*v)) {
            for (auto& [name, value] : *list) {
                if (name.find('/') == std::string::npos || name.front() == '/' || name.back() == '/')
                    r_.error(value, "invalid_value", "pricing model `" + name + "` is not `provider/model`",
                             "e.g. openai/gpt-5-mini");
                fields rates(r_, value,
                             {"inputMicrousdPerMillionTokens", "outputMicrousdPerMillionTokens",
                              "reasoningMicrousdPerMillionTokens", "cacheReadMicrousdPerMillionTokens",
                              "cacheWriteMicrousdPerMillionTokens"});
                if (!rates.ok()) continue;
                boost::json::object model;
                auto rate = [&](std::string_view key, bool required) {
                    auto x = required ? rates.require(key) : rates.get(key);
                    if (!x) return;
                    if (auto n = r_.unsigned_integer(*x, 0, std::numeric_limits<std::int64_t>::max()))
                        model[key] = *n;
                };
                rate("inputMicrousdPerMillionTokens", true);
                rate("outputMicrousdPerMillionTokens", true);
                rate("reasoningMicrousdPerMillionTokens", false);
                rate("cacheReadMicrousdPerMillionTokens", false);
                rate("cacheWriteMicrousdPerMillionTokens", false);
                models[name] = std::move(model);
            }
        }
    }
    out["models"] = std::move(models);
    return out;
}

std::optional<std::string> workflow_reader::read_command(const place& p) {
    auto s = r_.string(p);
    if (!s) return std::nullopt;
    const std::string& c = *s;
    std::string problem, help = "use an absolute path, or a bare name looked up on agentctl's PATH";
    if (c.find("${{") != std::string::npos) {
        problem = "command cannot hold templates";
        help = "the executable is fixed so the policy can check it; put variable parts in args";
    } else if (c.back() == '/') {
        problem = "command \"" + c + "\" names a directory";
    } else if (c[0] != '/' && c.find('/') != std::string::npos) {
        problem = "command \"" + c + "\" is a relative path";
    } else if (c == "." || c == "..") {
        problem = "command \"" + c + "\" is not an executable name";
    } else if (c[0] != '/' && std::any_of(c.begin(), c.end(), is_space_or_control)) {
        problem = "command \"" + c + "\" contains whitespace";
        help = "command is one executable, never run by a shell; put its arguments in args";
    }
    if (!problem.empty()) {
        r_.error(p, "invalid_command", problem, help);
        return std::nullopt;
    }
    return s;
}

std::optional<env_source> workflow_reader::read_env_source(const place& p) {
    const auto& n = r_.node(p);
    if (n.kind != kind_t::mapping) {
        r_.error(p, "invalid_type", "an env value is a source mapping, found " + r_.describe(p),
                 n.kind == kind_t::scalar
                     ? "for a literal write {value: \"" + n.text +
                           "\"}; "
                           "for agentctl's own variable write {env: NAME}"
                     : "use {env: NAME}, {file: PATH}, {process: {...}} or {value: TEXT}");
        return std::nullopt;
    }
    fields f(r_, p, {"env", "file", "process", "value", "secret"});
    if (!f.ok()) return std::nullopt;
    int count = f.has("env") + f.has("file") + f.has("process") + f.has("value");
    if (count != 1) {
        r_.error(
            p, "invalid_value",
            "an env source has exactly one of env, file, process or value; found " + std::to_string(count),
            "e.g. {env: NAME} or {value: \"text\"}");
        return std::nullopt;
    }
    if (auto secret = f.get("secret"); secret && !f.has("env")) {
        r_.error(*secret, "invalid_value",
                 std::string("secret applies to {env: NAME} only: ") +
                     (f.has("value") ? "a {value} literal is never redacted"
                                     : "file and process values are always secrets"),
                 "remove `secret`");
        return std::nullopt;
    }
    env_source src;
    if (auto v = f.get("env")) {
        src.kind = env_source::kind_t::env;
        auto s = r_.string(*v, true);
        if (!s) return std::nullopt;
        if (!is_env_name(*s)) {
            r_.error(*v, "invalid_env_name", env_name_problem(*s), std::string(env_name_help));
            return std::nullopt;
        }
        src.text = std::move(*s);
        if (auto secret = f.get("secret")) {
            auto b = r_.boolean(*secret);
            if (!b) return std::nullopt;
            src.secret = *b;
        }
    } else if (auto v = f.get("file")) {
        src.kind = env_source::kind_t::file;
        auto s = r_.string(*v);
        if (!s) return std::nullopt;
        src.text = std::move(*s);
    } else if (auto v = f.get("value")) {
        src.kind = env_source::kind_t::value;
        auto s = r_.string(*v, true);
        if (!s) return std::nullopt;
        src.text = std::move(*s);
    } else if (auto v = f.get("process")) {
        src.kind = env_source::kind_t::process;
        fields pf(r_, *v, {"command", "args", "timeoutSeconds", "outputLimitBytes"});
        if (!pf.ok()) return std::nullopt;
        bool good = true;
        if (auto c = pf.require("command")) {
            auto command = read_command(*c);
            good = good && command;
            if (command) src.process.command = std::move(*command);
        } else {
            good = false;
        }
        if (auto a = pf.get("args")) {
            auto items = r_.sequence(*a);
            good = good && items;
            if (items && items->size() > limits::max_secret_process_args) {
                r_.error(*a, "out_of_range",
                         "a secret process takes at most " + std::to_string(limits::max_secret_process_args) +
                             " args, found " + std::to_string(items->size()));
                good = false;
            } else if (items) {
                for (const auto& item : *items) {
                    auto s = r_.string(item, true);
                    if (s && s->size() > limits::max_secret_process_arg_bytes) {
                        r_.error(item, "out_of_range",
                                 "a secret process arg is at most " +
                                     std::to_string(limits::max_secret_process_arg_bytes) + " bytes, found " +
                                     std::to_string(s->size()));
                        s.reset();
                    }
                    good = good && s;
                    if (s) src.process.args.push_back(std::move(*s));
                }
            }
        }
        if (auto t = pf.get("timeoutSeconds")) {
            auto x = r_.integer(*t, 1, limits::max_secret_process_timeout_seconds);
            good = good && x;
            if (x) src.process.timeout_seconds = static_cast<int>(*x);
        }
        if (auto o = pf.get("outputLimitBytes")) {
            auto x = r_.unsigned_integer(*o, 1, limits::max_secret_process_output_bytes);
            good = good && x;
            if (x) src.process.output_limit_bytes = *x;
        }
        if (!good) return std::nullopt;
    }
    return src;
}

void workflow_reader::read_env(const place& p, action_spec& a, std::vector<place>& where) {
    auto list = r_.entries(p, "duplicate_env_name");
    if (!list) return;
    for (auto& [name, value] : *list) {
        if (!is_env_name(name)) {
            r_.error(value, "invalid_env_name", env_name_problem(name), std::string(env_name_help));
            continue;
        }
        if (auto src = read_env_source(value)) {
            a.env.push_back({name, std::move(*src)});
            where.push_back(value);
        }
    }
}

std::optional<container_spec> workflow_reader::read_container(const place& p) {
    fields f(r_, p, {"image", "runtime", "memoryLimitBytes", "cpuLimitMillis", "pidsLimit"});
    if (!f.ok()) return std::nullopt;
    container_spec c;
    bool good = true;
    if (auto v = f.require("image")) {
        auto s = r_.string(*v);
        if (s && !is_image_reference(*s)) {
            r_.error(
                *v, "invalid_image_reference", "image \"" + *s + "\" is not pinned by digest",
                "write NAME@sha256:<64 lowercase hex> or sha256:<64 lowercase hex>; tags are not accepted");
            s.reset();
        }
        good = good && s;
        if (s) c.image = std::move(*s);
    } else {
        good = false;
    }
    if (auto v = f.get("runtime")) {
        auto i = r_.choice(*v, {"auto", "docker", "podman"});
        good = good && i;
        if (i) c.runtime = static_cast<engine_choice>(*i);
    }
    if (auto v = f.get("memoryLimitBytes")) {
        auto x = r_.unsigned_integer(*v, limits::min_memory_bytes, limits::max_memory_bytes);
        good = good && x;
        if (x) c.memory_limit_bytes = *x;
    }
    if (auto v = read_int<std::uint32_t>(f.get("cpuLimitMillis"), 1, limits::max_cpu_millis))
        c.cpu_limit_millis = *v;
    else
        good = good && !f.has("cpuLimitMillis");
    if (auto v = read_int<std::uint32_t>(f.get("pidsLimit"), 1, limits::max_pids))
        c.pids_limit = *v;
    else
        good = good && !f.has("pidsLimit");
    return good ? std::optional(c) : std::nullopt;
}

void workflow_reader::read_extension(fields& f, action_spec& a) {
    extension_spec ext;
    if (auto v = f.require("protocolVersion")) {
        if (auto s = r_.string(*v)) {
            if (*s != extension_protocol)
                r_.error(*v, "invalid_protocol_version", "unsupported protocolVersion \"" + *s + "\"",
                         "use protocolVersion: " + std::string(extension_protocol));
            ext.protocol_version = std::move(*s);
        }
    }
    if (auto v = f.require("idempotency")) {
        if (auto i = r_.choice(*v, {"pure", "idempotent", "keyed", "at_most_once", "unknown"}))
            ext.idempotency_class = static_cast<idempotency>(*i);
    }
    if (auto v = f.require("inputSchema")) ext.input_schema = r_.json(*v);
    if (auto v = f.require("outputSchema")) ext.output_schema = r_.json(*v);
    if (auto v = f.get("capabilities")) {
        if (auto items = r_.sequence(*v)) {
            for (const auto& item : *items) {
                auto s = r_.string(item);
                if (!s) continue;
                if (std::find(ext.capabilities.begin(), ext.capabilities.end(), *s) !=
                    ext.capabilities.end()) {
                    r_.error(item, "duplicate_capability", "capability \"" + *s + "\" is listed twice");
                    continue;
                }
                ext.capabilities.push_back(std::move(*s));
            }
        }
    }
    a.extension = std::move(ext);
}

boost::json::value workflow_reader::read_with(const place& p) {
    const auto& n = r_.node(p);
    if (n.kind == kind_t::null) return nullptr;
    if (n.kind != kind_t::mapping) {
        r_.error(p, "invalid_type", "with must be a mapping, found " + r_.describe(p));
        return nullptr;
    }
    return r_.json_object(p);
}

void workflow_reader::read_action(const std::string& name, const place& p, action_spec& a) {
    a.name = name;
    if (name.empty()) r_.error(p, "empty_value", "an action name must not be empty");
    // Memory and protocol actions have fields of their own: none of them is read here.
    if (auto kind = r_.peek(p, "kind"); kind && is_one_of(*kind, agent_action_kinds)) {
        unsupported(p, *kind);
        a.kind = action_kind::assign;  // a stand-in that runs nothing; the document is refused
        return;
    }
    fields f(r_, p,
             {"kind", "description", "command", "args", "cwd", "env", "timeoutSeconds", "stdoutLimitBytes",
              "stderrLimitBytes", "combinedOutputLimitBytes", "isolation", "container", "with",
              "protocolVersion", "idempotency", "inputSchema", "outputSchema", "capabilities"});
    if (!f.ok()) return;

    std::optional<action_kind> kind;
    if (auto v = f.require("kind")) {
        if (auto i = r_.choice(*v, {"builtin.shell.exec", "extension.process", "builtin.assign",
                                    "builtin.assert", "builtin.read", "builtin.write"})) {
            kind = static_cast<action_kind>(*i);
            a.kind = *kind;
        }
    }
    if (auto v = f.get("description")) {
        if (auto s = r_.string(*v, true)) a.description = std::move(*s);
    }
    if (auto v = f.get("with")) a.with = read_with(*v);

    constexpr std::array<std::string_view, 5> extension_fields = {
        "protocolVersion", "idempotency", "inputSchema", "outputSchema", "capabilities"};
    if (kind == action_kind::extension_process) {
        read_extension(f, a);
    } else if (kind) {
        for (auto key : extension_fields)
            if (auto v = f.get(key))
                r_.error(*v, "extension_field_not_allowed",
                         std::string(key) + " is only valid on extension.process actions",
                         "remove it, or use kind: extension.process");
    }

    if (kind && !a.is_process()) {
        const std::string kind_name(to_string(*kind));
        for (auto key : {"command", "args", "cwd", "env"})
            if (auto v = f.get(key))
                r_.error(
                    *v, "unknown_key",
                    std::string(key) + " does not apply to " + kind_name + " actions, which run no process",
                    "remove it, or use kind: builtin.shell.exec");
        for (auto key :
             {"timeoutSeconds", "stdoutLimitBytes", "stderrLimitBytes", "combinedOutputLimitBytes"})
            if (auto v = f.get(key))
                r_.error(
                    *v, "limits_not_allowed",
                    std::string(key) + " applies to process actions only; " + kind_name + " runs no process",
                    "remove it");
        for (auto key : {"isolation", "container"})
            if (auto v = f.get(key))
                r_.error(
                    *v, "isolation_not_allowed",
                    "process isolation is only valid for builtin.shell.exec or extension.process actions",
                    "remove it");
        return;
    }

    // Process kinds (and an unknown kind, so its fields are still checked).
    if (auto v = kind ? f.require("command") : f.get("command")) {
        if (auto s = read_command(*v)) a.command = std::move(*s);
    }
    if (auto v = f.get("args")) a.args = r_.string_list(*v, true);
    if (auto v = f.get("cwd")) a.cwd = r_.string(*v);
    std::vector<place> env_places;
    if (auto v = f.get("env")) read_env(*v, a, env_places);
    if (auto p = f.get("timeoutSeconds")) a.timeout_ms = r_.duration_ms(*p, 1, limits::max_timeout_ms);
    auto stream_limit = [&](std::string_view key, std::uint64_t& out) {
        if (auto v = f.get(key))
            if (auto x = r_.unsigned_integer(*v, 1, limits::max_stream_limit_bytes)) out = *x;
    };
    stream_limit("stdoutLimitBytes", a.stdout_limit_bytes);
    stream_limit("stderrLimitBytes", a.stderr_limit_bytes);
    stream_limit("combinedOutputLimitBytes", a.combined_output_limit_bytes);

    auto isolation_place = f.get("isolation");
    bool isolation_bad = false;
    if (isolation_place) {
        if (auto i = r_.choice(*isolation_place, {"process", "container"}))
            a.isolation = static_cast<isolation_mode>(*i);
        else
            isolation_bad = true;
    }
    auto container_place = f.get("container");
    if (container_place) a.container = read_container(*container_place);
    bool container_declared = a.isolation == isolation_mode::container;
    if (container_place && !container_declared && !isolation_bad) {
        r_.error(*container_place, "container_requires_isolation",
                 "container configuration requires isolation: container", "add isolation: container");
    }
    if (container_declared && !container_place) {
        r_.error(*isolation_place, "isolation_requires_container",
                 "isolation: container requires container configuration",
                 "add container: {image: NAME@sha256:<digest>}");
    }
    if (container_declared) {
        for (std::size_t i = 0; i < a.env.size(); ++i) {
            const auto& name = a.env[i].name;
            if (steers_engine(name))
                r_.error(
                    env_places[i], "engine_variable_not_allowed",
                    name + " controls the container engine and cannot be set by a container action",
                    "rename the variable (DOCKER_*, CONTAINER_*, CONTAINERS_*, PODMAN_*, BUILDAH_*, "
                    "BUILDKIT_*, LD_*, XDG_*, proxies, HOME, PATH, TMPDIR and a few others steer the engine "
                    "client)");
        }
    }
}

void workflow_reader::read_uses(const place& p, task_spec& t) {
    auto s = r_.string(p);
    if (!s) return;
    t.uses = *s;
    constexpr std::string_view action_prefix = "action:";
    if (s->rfind(action_prefix, 0) == 0) {
        std::string name = s->substr(action_prefix.size());
        if (name.empty() || std::any_of(name.begin(), name.end(), is_space_or_control)) {
            r_.error(p, "invalid_uses", "uses \"" + *s + "\" does not name an action",
                     "write uses: action:<name>, naming a key of spec.actions");
            return;
        }
        t.action = std::move(name);
        return;
    }
    if (s->rfind("agent:", 0) == 0) {
        unsupported(p, "uses: agent:");
        return;
    }
    // `workflow:PACK.NAME` is a workflow a pack brings: a pack feature, not a sub-workflow.
    if (s->rfind("workflow:", 0) == 0 && s->find('.') != std::string::npos) {
        unsupported(p, "uses: workflow:PACK.NAME");
        return;
    }
    if (*s == "router") return;  // a pure node: its `route` is read with the task
    if (s->rfind("workflow:", 0) == 0) return;  // a sub-workflow: read with the task, run by the plan
    r_.error(p, "invalid_uses", "uses \"" + *s + "\" is not of the form action:<name>",
             "write uses: action:<name>, naming a key of spec.actions");
}

void workflow_reader::read_retry(const place& p, retry_spec& retry) {
    fields f(r_, p, {"maxAttempts", "backoffMs", "on"});
    if (auto v = read_int<int>(f.get("maxAttempts"), 1, limits::max_retry_attempts)) retry.max_attempts = *v;
    if (auto v = read_int<int>(f.get("backoffMs"), 0, limits::max_backoff_ms)) retry.backoff_ms = *v;
    if (auto v = f.get("on")) {
        if (auto items = r_.sequence(*v)) {
            retry.on.clear();
            for (const auto& item : *items) {
                auto i = r_.choice(item, {"spawn_error", "exit_nonzero", "timeout"});
                if (!i) continue;
                auto reason = static_cast<retry_reason>(*i);
                if (std::find(retry.on.begin(), retry.on.end(), reason) != retry.on.end()) {
                    r_.error(item, "invalid_value", std::string(to_string(reason)) + " is listed twice");
                    continue;
                }
                retry.on.push_back(reason);
            }
        }
    }
}

std::optional<std::string> workflow_reader::read_binding_name(const place& p) {
    auto s = r_.string(p);
    if (!s) return std::nullopt;
    if (!is_identifier(*s)) {
        r_.error(p, "invalid_value", "\"" + *s + "\" is not an identifier",
                 "names match [A-Za-z_][A-Za-z0-9_]*");
        return std::nullopt;
    }
    if (is_reserved_variable(*s)) {
        r_.error(p, "invalid_value", "\"" + *s + "\" is reserved: agentctl binds vars." + *s + " itself",
                 "choose another name");
        return std::nullopt;
    }
    return s;
}

// foreach items and matrix axes: an array, or a string that is exactly one template.
std::optional<boost::json::value> workflow_reader::read_items(const place& p, bool allow_empty) {
    const auto& n = r_.node(p);
    if (n.kind == kind_t::sequence) {
        if (!allow_empty && n.items.empty()) {
            r_.error(p, "empty_value", "a matrix axis needs at least one value");
            return std::nullopt;
        }
        return r_.json(p);
    }
    if (n.kind == kind_t::scalar && !(n.plain && resolve_plain(n.text) != scalar_type::string)) {
        auto s = r_.string(p);
        if (!s) return std::nullopt;
        if (is_single_template(*s)) return boost::json::value(*s);
    }
    r_.error(p, "invalid_type",
             "expected an array or a string that is exactly one template, found " + r_.describe(p),
             "e.g. [a, b] or \"${{ inputs.files }}\"");
    return std::nullopt;
}

std::optional<foreach_spec> workflow_reader::read_foreach(const place& p) {
    fields f(r_, p, {"items", "as", "maxItems"});
    if (!f.ok()) return std::nullopt;
    foreach_spec fe;
    bool good = true;
    if (auto v = f.require("items")) {
        auto items = read_items(*v, true);
        good = good && items;
        if (items) fe.items = std::move(*items);
    } else {
        good = false;
    }
    if (auto v = f.get("as")) {
        auto s = read_binding_name(*v);
        good = good && s;
        if (s) fe.as = std::move(*s);
    }
    if (auto v = f.get("maxItems")) {
        auto x = r_.integer(*v, 1, limits::max_max_items);
        good = good && x;
        if (x) fe.max_items = static_cast<std::uint32_t>(*x);
    }
    return good ? std::optional(std::move(fe)) : std::nullopt;
}

std::optional<matrix_spec> workflow_reader::read_matrix(const place& p) {
    fields f(r_, p, {"axes", "maxItems"});
    if (!f.ok()) return std::nullopt;
    matrix_spec m;
    bool good = true;
    if (auto v = f.require("axes")) {
        auto list = r_.entries(*v);
        good = good && list;
        if (list && list->empty()) {
            r_.error(*v, "empty_value", "a matrix needs at least one axis");
            good = false;
        }
        if (list) {
            for (auto& [name, value] : *list) {
                bool name_ok = is_identifier(name);
                if (!name_ok)
                    r_.error(value, "invalid_value", "axis name \"" + name + "\" is not an identifier",
                             "names match [A-Za-z_][A-Za-z0-9_]*");
                auto items = read_items(value, false);
                good = good && name_ok && items;
                if (name_ok && items) m.axes.emplace_back(name, std::move(*items));
            }
        }
    } else {
        good = false;
    }
    if (auto v = f.get("maxItems")) {
        auto x = r_.integer(*v, 1, limits::max_max_items);
        good = good && x;
        if (x) m.max_items = static_cast<std::uint32_t>(*x);
    }
    return good ? std::optional(std::move(m)) : std::nullopt;
}

// A required string that is exactly one `${{ ... }}` (a loop's `while`, a router's `select`):
// what it names keeps its JSON type, so nothing may stand around it.
std::optional<std::string> workflow_reader::read_whole_template(fields& f, std::string_view key,
                                                                std::string_view code,
                                                                const std::string& what, std::string help) {
    auto v = f.require(key);
    if (!v) return std::nullopt;
    auto s = r_.string(*v);
    if (s && !is_single_template(*s)) {
        r_.error(*v, std::string(code),
                 what + " \"" + *s + "\" must be exactly one `${{ ... }}`, nothing around it",
                 std::move(help));
        return std::nullopt;
    }
    return s;
}

// `loop: {maxIterations, while, initial}`. The bound is what makes the compiled graph finite,
// so it is required; `while` keeps the reference's name for the condition.
std::optional<loop_spec> workflow_reader::read_loop(const place& p) {
    fields f(r_, p, {"maxIterations", "while", "initial"});
    if (!f.ok()) return std::nullopt;
    loop_spec loop;
    bool good = true;
    if (auto v = f.require("maxIterations")) {
        auto n = read_int<std::uint32_t>(v, 1, limits::max_loop_iterations);
        good = good && n;
        if (n) loop.max_iterations = *n;
    } else {
        good = false;
    }
    auto condition = read_whole_template(f, "while", "invalid_condition", "loop `while`",
                                         "write e.g. \"${{ vars.loopIndex < 2 }}\" or "
                                         "\"${{ vars.loopPrevious.done == false }}\"");
    good = good && condition;
    if (condition) loop.condition = std::move(*condition);
    if (auto v = f.get("initial")) loop.initial = r_.json(*v);
    return good ? std::optional(std::move(loop)) : std::nullopt;
}

// A loop's iterations are the task's only expansion and `while` is their only guard: the
// reference refuses every other combination, each at the field that clashes.
void workflow_reader::check_loop_alone(const fields& f, const task_spec& t) {
    if (t.uses == "router") {
        if (auto v = f.get("uses"))
            r_.error(*v, "loop_conflict", "a router cannot be a loop body",
                     "loop a task that the router routes to instead");
        return;
    }
    for (std::string_view key : {"foreach", "matrix", "route", "when"})
        if (auto v = f.get(key))
            r_.error(*v, "loop_conflict",
                     "task \"" + t.id + "\" has a loop, so it cannot also have `" + std::string(key) + "`",
                     key == "when" ? "put the condition in loop.while: it guards every iteration"
                                   : "split it into two tasks");
}

// `route: {select, cases: [{equals, tasks}], default}`. What can be told from the router alone
// is checked here; destinations against the other tasks are checked by the plan compiler.
std::optional<route_spec> workflow_reader::read_route(const place& p) {
    fields f(r_, p, {"select", "cases", "default"});
    if (!f.ok()) return std::nullopt;
    route_spec route;
    bool good = true;
    auto select = read_whole_template(
        f, "select", "invalid_value", "route `select`",
        "write e.g. \"${{ tasks.classify.output.route }}\": its value keeps its JSON type");
    good = good && select;
    if (select) route.select = std::move(*select);
    std::vector<std::string> seen;  // every destination so far: each is routed to once
    if (auto v = f.require("cases")) {
        auto items = r_.sequence(*v);
        good = good && items;
        if (items && items->empty()) {
            r_.error(*v, "empty_value", "a router needs at least one case");
            good = false;
        }
        for (const place& item : items ? *items : std::vector<place>{}) {
            fields c(r_, item, {"equals", "tasks"});
            auto equals = c.require("equals");
            auto tasks = c.require("tasks");
            if (!c.ok() || !equals || !tasks) {
                good = false;
                continue;
            }
            route_case rc{r_.json(*equals), read_destinations(*tasks, seen)};
            if (rc.tasks.empty()) {
                r_.error(*tasks, "empty_value", "a route case needs at least one destination task");
                good = false;
            }
            for (const auto& earlier : route.cases)
                if (earlier.equals == rc.equals) {
                    r_.error(
                        *equals, "duplicate_route_case",
                        "two cases of this router match the same value " + boost::json::serialize(rc.equals),
                        "merge their tasks into one case");
                    good = false;
                    break;
                }
            route.cases.push_back(std::move(rc));
        }
    } else {
        good = false;
    }
    if (auto v = f.get("default")) route.otherwise = read_destinations(*v, seen);
    return good ? std::optional(std::move(route)) : std::nullopt;
}

// A list of destination task ids; one routed to twice (in two cases, or a case and the
// default) is an error at its second mention.
std::vector<std::string> workflow_reader::read_destinations(const place& p, std::vector<std::string>& seen) {
    std::vector<std::string> out;
    auto items = r_.sequence(p);
    for (const place& item : items ? *items : std::vector<place>{}) {
        auto id = r_.string(item);
        if (!id) continue;
        if (std::find(seen.begin(), seen.end(), *id) != seen.end()) {
            r_.error(item, "duplicate_route_destination",
                     "task \"" + *id + "\" is already a destination of this router",
                     "a task is routed to by one case or by the default, once");
            continue;
        }
        seen.push_back(*id);
        out.push_back(std::move(*id));
    }
    return out;
}

// `compensate: {uses, with, retry, timeoutSeconds}`. Whether the action exists and has an
// effect to undo is the plan compiler's to say.
std::optional<compensate_spec> workflow_reader::read_compensate(const place& p) {
    fields f(r_, p, {"uses", "with", "retry", "timeoutSeconds"});
    if (!f.ok()) return std::nullopt;
    compensate_spec c;
    bool good = true;
    if (auto v = f.require("uses")) {
        auto s = r_.string(*v);
        constexpr std::string_view prefix = "action:";
        if (s && (s->rfind(prefix, 0) != 0 || s->size() == prefix.size() ||
                  std::any_of(s->begin() + prefix.size(), s->end(), is_space_or_control))) {
            r_.error(*v, "invalid_uses", "compensate uses \"" + *s + "\" does not name an action",
                     "write uses: action:<name>, naming an action with an effect to undo");
            s.reset();
        }
        good = good && s;
        if (s) c.action = s->substr(prefix.size());
    } else {
        good = false;
    }
    if (auto v = f.get("with")) c.with = read_with(*v);
    if (auto v = f.get("retry")) read_retry(*v, c.retry);
    if (auto v = f.get("timeoutSeconds")) c.timeout_ms = r_.duration_ms(*v, 1, limits::max_timeout_ms);
    return good ? std::optional(std::move(c)) : std::nullopt;
}

void workflow_reader::read_compensation(const place& p, compensation_spec& c) {
    fields f(r_, p, {"onFailure", "approval"});
    if (!f.ok()) return;
    if (auto v = f.get("onFailure"))
        if (auto i = r_.choice(*v, {"manual", "automatic"}))
            c.on_failure = static_cast<compensation_spec::trigger>(*i);
    if (auto v = f.get("approval"))
        if (auto i = r_.choice(*v, {"policy", "always", "never"}))
            c.approval_mode = static_cast<compensation_spec::approval>(*i);
}

// One definition of `spec.subworkflows`. Its tasks are read as any task; their references to
// one another, cycles between definitions and the schemas' validity are the plan compiler's.
void workflow_reader::read_subworkflow(const std::string& name, const place& p, subworkflow_spec& sw) {
    sw.name = name;
    if (!is_subworkflow_name(name))
        r_.error(p, "invalid_value", "sub-workflow name \"" + name + "\" is not an identifier",
                 "names match [A-Za-z_][A-Za-z0-9_-]*");
    fields f(r_, p, {"version", "inputs", "inputSchema", "outputSchema", "outputs", "tasks"});
    if (!f.ok()) return;
    if (auto v = f.require("version")) {
        if (auto s = r_.string(*v)) {
            if (is_semantic_version(*s))
                sw.version = std::move(*s);
            else
                r_.error(*v, "invalid_value", "sub-workflow version \"" + *s + "\" is not a semantic version",
                         "write MAJOR.MINOR.PATCH, e.g. 1.0.0");
        }
    }
    if (auto v = f.get("inputs")) sw.inputs = r_.json_object(*v);
    for (auto [key, schema] :
         {std::pair{"inputSchema", &sw.input_schema}, {"outputSchema", &sw.output_schema}}) {
        auto v = f.require(key);
        if (!v) continue;
        if (r_.node(*v).kind != kind_t::mapping)
            r_.error(*v, "invalid_type",
                     std::string(key) + " must be a mapping (a JSON Schema), found " + r_.describe(*v));
        else
            *schema = r_.json(*v);
    }
    if (auto v = f.get("outputs")) sw.outputs = r_.json_object(*v);
    if (auto v = f.require("tasks")) {
        if (auto items = r_.sequence(*v)) {
            if (items->empty()) r_.error(*v, "empty_value", "a sub-workflow needs at least one task");
            sw.tasks.reserve(items->size());
            for (const place& item : *items) read_task(item, sw.tasks.emplace_back());
        }
    }
}

// A task that invokes a sub-workflow passes it `with`, waits on `needs` and says what its
// failure does; everything else belongs to the sub-workflow's own tasks.
void workflow_reader::check_invocation(const fields& f) {
    for (std::string_view key : {"when", "foreach", "matrix", "loop", "route", "vars", "varsFiles", "retry",
                                 "timeoutSeconds", "outputSchema", "memoryWrites", "compensate"})
        if (auto v = f.get(key))
            r_.error(*v, "invalid_invocation",
                     "a task that invokes a sub-workflow cannot have `" + std::string(key) + "`",
                     "it takes needs, with and failure; put the rest on the sub-workflow's tasks");
}

void workflow_reader::read_task(const place& p, task_spec& t) {
    fields f(r_, p,
             {"id", "uses", "needs", "with", "timeoutSeconds", "retry", "failure", "when", "foreach",
              "matrix", "vars", "varsFiles", "outputSchema", "memoryWrites", "loop", "route", "compensate"});
    if (!f.ok()) return;
    if (auto v = f.get("memoryWrites")) unsupported(*v, "memoryWrites");
    if (auto v = f.get("vars")) t.vars = read_vars(*v);
    if (auto v = f.get("varsFiles")) t.vars_files = read_vars_files(*v);
    if (auto v = f.get("outputSchema")) {
        if (r_.node(*v).kind != kind_t::mapping)
            r_.error(*v, "invalid_type",
                     "outputSchema must be a mapping (a JSON Schema), found " + r_.describe(*v));
        else
            t.output_schema = r_.json(*v);
    }
    if (auto v = f.require("id")) {
        if (auto s = r_.string(*v)) {
            if (!is_task_id(*s))
                r_.error(*v, "invalid_task_id", "task id \"" + *s + "\" must match [a-z0-9_-]+",
                         "use lowercase letters, digits, '_' and '-'");
            // Kept as written even when invalid: the partial model's needs can still find it.
            t.id = std::move(*s);
        }
    }
    if (auto v = f.require("uses")) read_uses(*v, t);
    if (auto v = f.get("needs")) t.needs = r_.string_list(*v);
    if (auto v = f.get("with")) t.with = read_with(*v);
    if (auto p = f.get("timeoutSeconds")) t.timeout_ms = r_.duration_ms(*p, 1, limits::max_timeout_ms);
    if (auto v = f.get("retry")) read_retry(*v, t.retry);
    if (auto v = f.get("failure")) {
        if (auto i = r_.choice(*v, {"stop", "continue"})) t.failure = static_cast<failure_mode>(*i);
    }
    if (auto v = f.get("when")) t.when = r_.string(*v);
    auto foreach_place = f.get("foreach");
    auto matrix_place = f.get("matrix");
    if (foreach_place) t.foreach = read_foreach(*foreach_place);
    if (matrix_place) t.matrix = read_matrix(*matrix_place);
    if (foreach_place && matrix_place)
        r_.error(*matrix_place, "foreach_and_matrix", "a task has foreach or matrix, not both",
                 "split it into two tasks");
    if (auto v = f.get("loop")) {
        t.loop = read_loop(*v);
        check_loop_alone(f, t);
    }
    if (auto v = f.get("compensate")) t.compensate = read_compensate(*v);
    if (t.uses.rfind("workflow:", 0) == 0 && t.uses.find('.') == std::string::npos) {
        t.subworkflow = t.uses.substr(9);
        if (!is_subworkflow_name(t.subworkflow))
            if (auto v = f.get("uses"))
                r_.error(*v, "invalid_uses", "uses \"" + t.uses + "\" does not name a sub-workflow",
                         "write uses: workflow:<name>, naming a key of spec.subworkflows");
        check_invocation(f);
    }
    if (t.uses == "router") {
        if (auto v = f.require("route")) t.route = read_route(*v);
        for (std::string_view key : {"foreach", "matrix"})
            if (auto v = f.get(key))
                r_.error(*v, "router_expanded", "a router cannot have `" + std::string(key) + "`",
                         "expand the tasks it routes to instead");
    } else if (auto v = f.get("route")) {
        r_.error(*v, "route_without_router", "only a `uses: router` task has `route`",
                 "write `uses: router` on this task, or remove `route`");
    }
}

}  // namespace

void read_workflow(tree_reader& r, workflow& wf) {
    workflow_reader(r).read(wf);
}

}  // namespace agentctl
