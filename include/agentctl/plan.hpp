// The compiled plan: immutable, deterministic, everything the engine needs to run.
//
// compile() is a pure function of the workflow and the input overrides: same input,
// byte-identical plan JSON. The plan owns copies of the actions and the policy, so it can
// outlive the workflow it came from.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/spec.hpp>
#include <agentctl/template.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace agentctl {

inline constexpr int plan_format_version = 1;

/// Output caps of one process task.
struct output_limits {
    std::uint64_t stdout_bytes = limits::default_stdout_limit_bytes;
    std::uint64_t stderr_bytes = limits::default_stderr_limit_bytes;
    std::uint64_t combined_bytes = limits::default_combined_limit_bytes;
};

/// One node of the plan. Plan tasks are stored in topological order.
struct plan_task {
    enum class kind_t {
        single,     ///< a declared task without expansion
        child,      ///< one foreach item or matrix cell
        aggregate,  ///< the declared id of an expanded task; finishes when its children do
    };
    std::string id;
    kind_t kind = kind_t::single;
    std::uint32_t declared_index = 0;  ///< index of the declaring task in spec.tasks
    std::string parent;                ///< child: the aggregate's id
    enum class expansion_t { none, foreach, matrix };
    expansion_t expansion = expansion_t::none;  ///< child and aggregate: how the declared task expands
    std::uint32_t expansion_index = 0;          ///< child: 0-based item/cell index
    std::uint32_t action_index = 0;             ///< into plan::actions; unused for aggregates
    std::vector<std::uint32_t> needs;           ///< indices into plan::tasks, all smaller than this one's
    boost::json::object vars;                   ///< child: foreach/matrix bindings
    boost::json::value with;                    ///< rendered input when !with_deferred, else the template
    bool with_deferred = false;                 ///< `with` refers to task outputs: rendered at run time
    /// Process tasks whose action args/cwd hold templates: rendered here when static.
    std::optional<std::vector<std::string>> args;
    std::optional<std::string> cwd;
    bool argv_deferred = false;        ///< args/cwd refer to task outputs: rendered at run time
    std::int64_t timeout_ms = 120000;  ///< resolved: action, task, runtime default
    retry_spec retry;
    failure_mode failure = failure_mode::stop;
    std::optional<condition> when;
    output_limits limits;
    bool requires_approval = false;       ///< a process task under approval != never
    std::vector<std::uint32_t> children;  ///< aggregate: plan indices of its children, in item order
    /// Something reads this task's output later in the run: a template of another task (with,
    /// args, cwd, when; deferred or not) or spec.outputs, directly or through an aggregate (an
    /// aggregate's output holds every child's). Internal: not in the plan JSON or text.
    bool output_referenced = false;
};

/// The isolation contract of one process action (`processes[]` of the plan).
struct plan_process {
    std::uint32_t action_index = 0;
    std::vector<std::string> tasks;  ///< declared task ids using the action
    /// Engines tried in order: auto -> {docker, podman}; otherwise the one named.
    std::vector<std::string> engines;
};

/// Fixed container controls, listed in the plan exactly as enforced.
std::vector<std::string> fixed_container_controls();

struct plan {
    int format_version = plan_format_version;
    std::string workflow_name;
    std::string workflow_digest;  ///< sha256 of the source bytes: "sha256:<hex>"
    std::string plan_digest;      ///< sha256 of the canonical plan JSON without this member
    int max_concurrency = 1;      ///< runtime.maxConcurrency or 1; --jobs overrides at run time
    int kill_grace_seconds = 0;
    budgets_spec budgets;
    policy_spec policy;
    boost::json::object inputs;   ///< merged: defaults, --inputs-file, --input
    boost::json::object outputs;  ///< templates, rendered at the end of a run
    std::vector<action_spec> actions;
    std::vector<plan_task> tasks;  ///< topological order; declaration order breaks ties
    std::vector<plan_process> processes;
    std::vector<std::string> warnings;

    /// Index of a task by id, or nullopt.
    std::optional<std::uint32_t> find(std::string_view id) const;
    const action_spec& action_of(const plan_task& t) const { return actions[t.action_index]; }

    std::unordered_map<std::string, std::uint32_t> index;  ///< id -> position in tasks
};

/// Inputs given on the command line, applied in order over spec.inputs.
struct compile_options {
    std::vector<std::pair<std::string, boost::json::value>> input_overrides;
};

struct compile_result {
    std::optional<plan> compiled;  ///< absent when diags has errors
    diagnostics diags;
};

/// Validates policy and semantics, expands foreach/matrix, orders, resolves limits and
/// computes both digests. Pure: no I/O, no clock, no environment.
compile_result compile(const workflow& wf, const compile_options& options = {});

/// Parse and semantic diagnostics of one document, together: every problem at once. A valid
/// document is compiled as usual. A document with parse errors is compiled from its partial
/// model only to find more problems, and no plan is returned: a semantic finding is dropped
/// when a parse error could have caused it (at or around its place, in a field it depends on,
/// or in a section its kind of finding reads; docs/DESIGN.md, "Plan").
compile_result check_document(const parse_result& parsed, const compile_options& options = {});

/// Writes the canonical plan JSON (including planDigest) to `out`.
void write_plan_json(const plan& p, json_sink& out);
std::string plan_json(const plan& p);

/// Human-readable plan: readable at a glance, large expansions summarised. `workspace`: the
/// absolute workspace root a front end resolved for it, shown instead of
/// policy.workspaceRoot as written (empty: as written).
std::string plan_text(const plan& p, std::string_view workspace = {});

}  // namespace agentctl
