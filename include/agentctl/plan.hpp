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

#include <boost/json/array.hpp>
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

/// What a sub-workflow's synthetic node is (docs/CONTROL_FLOW.md, "Sub-workflows"). Both run
/// no process: their output is their rendered `with`, checked against their `output_schema`
/// (the definition's inputSchema or outputSchema).
struct plan_subworkflow {
    enum class role_t {
        input,      ///< `INVOCATION--inputs-H`: the definition's inputs under the invocation's `with`
        aggregate,  ///< keeps the invocation's id: the definition's outputs over its tasks
    };
    role_t role = role_t::input;
    std::string name;        ///< the definition (a key of spec.subworkflows)
    std::string version;     ///< its semantic version
    std::string invocation;  ///< the invoking task's namespaced id (the aggregate's)
    /// Aggregate: the namespaced ids of the invocation's own tasks, in declaration order (a
    /// nested invocation by its aggregate's id).
    std::vector<std::string> children;
};

/// One node of the plan: a task, or what every child of a foreach/matrix/loop shares.
///
/// The plan stores singles, aggregates and one *child template* per expanded task, never the
/// children themselves: a child is rendered from its template and its item when asked for
/// (plan::task()), so a plan of 100 000 children costs its items, not 100 000 nodes
/// (docs/DESIGN.md, "Plan").
struct plan_task {
    enum class kind_t {
        single,     ///< a declared task without expansion
        child,      ///< one foreach item or matrix cell (stored: the template of all of them)
        aggregate,  ///< the declared id of an expanded task; finishes when its children do
    };
    std::string id;  ///< a child template's is empty: plan::task_id() names each child
    kind_t kind = kind_t::single;
    std::uint32_t declared_index = 0;  ///< index of the declaring task in spec.tasks
    std::string parent;                ///< child (and its template): the aggregate's id
    /// `loop`: a bounded loop (docs/CONTROL_FLOW.md): its children are its iterations, child k
    /// needs child k-1, `when` holds the loop's `while`, and the aggregate checks the bound.
    enum class expansion_t { none, foreach, matrix, loop };
    expansion_t expansion = expansion_t::none;  ///< child and aggregate: how the declared task expands
    std::uint32_t expansion_index = 0;          ///< child: 0-based item/cell index
    std::uint32_t action_index = 0;             ///< into plan::actions; unused for aggregates and routers
    /// Plan indices of the declared tasks (singles or aggregates) this one needs, all smaller
    /// than its own. An aggregate lists none: it needs its children, [first_child,
    /// first_child + child_count).
    std::vector<std::uint32_t> needs;
    /// The task's variables (docs/DESIGN.md, "Variables"): every layer merged, rendered where
    /// they read only inputs; a child's also hold its foreach/matrix bindings (a template's do
    /// not).
    boost::json::object vars;
    /// Task-level variables that read task outputs: name -> template, rendered at run time
    /// over `vars` (no command-line override names them).
    boost::json::object vars_deferred;
    /// Rendered input when !with_deferred, else the template. A child template holds the
    /// template; plan::task() renders it for each child.
    boost::json::value with;
    bool with_deferred = false;  ///< `with` refers to task outputs: rendered at run time
    /// Process tasks whose action args/cwd hold templates: rendered here when static (a child
    /// template leaves them to plan::task()).
    std::optional<std::vector<std::string>> args;
    std::optional<std::string> cwd;
    bool argv_deferred = false;        ///< args/cwd refer to task outputs: rendered at run time
    std::int64_t timeout_ms = 120000;  ///< resolved: action, task, runtime default
    retry_spec retry;
    failure_mode failure = failure_mode::stop;
    std::optional<condition> when;
    output_limits limits;
    bool requires_approval = false;  ///< a process task under approval != never
    /// The task's `outputSchema` (a child's: its declared task's): a run validates each
    /// succeeded output against it (`output_invalid`). Aggregates have none.
    std::optional<boost::json::value> output_schema;
    /// A router (`uses: router`; docs/CONTROL_FLOW.md, "Routers"): no action, no `with`; when
    /// admitted it records its decision `{selected, matched, destinations}` as its output.
    std::optional<route_spec> route;
    /// Ids of the routers this task is a destination of: it runs only if each one's decision
    /// names its declared id (a child template's guards hold for all its children).
    std::vector<std::string> route_guards;
    /// A sub-workflow's input boundary or aggregate (a single node without an action).
    std::optional<plan_subworkflow> subworkflow;
    /// Aggregate and child template: the plan indices of the children, [first_child,
    /// first_child + child_count), in item order.
    std::uint32_t first_child = 0;
    std::uint32_t child_count = 0;
    std::uint32_t expansion_slot = 0;  ///< aggregate and child template: into plan::expansions
    /// Something reads this task's output later in the run: a template of another task (with,
    /// args, cwd, when; deferred or not) or spec.outputs, directly or through an aggregate (an
    /// aggregate's output holds every child's). A child template's flag holds for all its
    /// children; plan::output_referenced() also knows children spec.outputs names one by one.
    /// Internal: not in the plan JSON or text.
    bool output_referenced = false;
    /// The task's `compensate` as written (a child template's holds for all its children; an
    /// aggregate has none): its `with` keeps its templates, rendered by prepare_compensation()
    /// over the source run's results (docs/CONTROL_FLOW.md, "Compensation").
    std::optional<compensate_spec> compensate;
    /// A compensation run's task: the id of the source run's task it undoes; else empty.
    std::string source_task_id;
};

/// What one foreach or matrix expands over; its children are rendered from this and their
/// template (plan::task()).
struct plan_expansion {
    std::uint32_t node = 0;       ///< the child template in plan::nodes
    std::uint32_t aggregate = 0;  ///< the aggregate's plan index
    std::uint32_t first_child = 0;
    std::uint32_t count = 0;
    std::uint32_t id_width = 4;  ///< digits of the zero-padded index in child ids
    std::string as;              ///< foreach: the item's name under `vars.`
    /// foreach: the items, in order. loop: each iteration's `vars.loopPrevious`: the loop's
    /// `initial`, then the template `${{ tasks.<iteration k-1>.output }}`.
    boost::json::array items;
    bool loop = false;  ///< a bounded loop: bindings {loopIndex, loopPrevious}
    /// matrix: the axes by name; children are their product, the last axis fastest.
    std::vector<std::pair<std::string, boost::json::array>> axes;
    /// Items whose child's output spec.outputs names by the child's id (sorted).
    std::vector<std::uint32_t> referenced;
    /// The digest part of each child's id (`PARENT--NNNN-DIGEST`): 6 bytes per child, the first
    /// 12 hex digits of the sha256 of its bindings. Computed once when compiling; empty in a
    /// plan assembled by hand (then computed when asked for).
    std::string id_digests;
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

/// Tasks are numbered in plan order (topological; declaration order breaks ties; each
/// expanded task's children are consecutive, in item order): the *plan index*, which
/// results, events and the journal use.
struct plan {
    int format_version = plan_format_version;
    std::string workflow_name;
    std::string workflow_digest;  ///< sha256 of the source bytes: "sha256:<hex>"
    std::string plan_digest;      ///< sha256 of the canonical plan JSON without this member
    int max_concurrency = 1;      ///< runtime.maxConcurrency or 1; --jobs overrides at run time
    int kill_grace_seconds = 0;
    budgets_spec budgets;
    policy_spec policy;
    boost::json::value inputs =
        boost::json::object();    ///< merged: defaults, --inputs-file, --input (an object)
    boost::json::object outputs;  ///< templates, rendered at the end of a run
    compensation_spec compensation;  ///< spec.compensation
    /// A compensation run's plan (`mode: compensation`): the run it undoes; else empty.
    std::string source_run_id;
    std::vector<action_spec> actions;
    /// Singles, aggregates and child templates, in plan order: a child template stands for
    /// its children's consecutive plan indices.
    std::vector<plan_task> nodes;
    std::vector<plan_expansion> expansions;  ///< in plan order of their children
    /// Plan index of each node's first task (a child template: its first child's; one with
    /// no children: where it would be), ascending; parallel to `nodes`.
    std::vector<std::uint32_t> node_starts;
    std::uint32_t task_count = 0;  ///< tasks, children included
    std::vector<plan_process> processes;
    std::vector<std::string> warnings;
    std::unordered_map<std::string, std::uint32_t> index;  ///< declared id -> plan index (no children)

    /// Number of tasks, children included.
    std::uint32_t size() const { return task_count; }
    /// The node behind task `i`: the task itself, or for a child its template (the fields all
    /// children share: kind, needs, action, limits, retry, failure, when, approval).
    const plan_task& node(std::uint32_t i) const { return nodes[node_of(i)]; }
    /// Position in `nodes` of task `i`'s node.
    std::uint32_t node_of(std::uint32_t i) const;
    /// Task `i` whole: a child with its id, vars and rendered with/args/cwd.
    plan_task task(std::uint32_t i) const;
    std::string task_id(std::uint32_t i) const;
    /// Task `i`'s foreach/matrix bindings (empty for others); plan::task(i).vars has them with
    /// the task's variables.
    boost::json::object vars_of(std::uint32_t i) const;
    /// Whether something later in a run reads task `i`'s output.
    bool output_referenced(std::uint32_t i) const;
    /// A loop iteration after the first: the plan index of the iteration before it, which it
    /// needs besides its template's needs; nullopt for every other task.
    std::optional<std::uint32_t> previous_iteration(std::uint32_t i) const;
    /// The expansion a child or an aggregate belongs to, or nullptr.
    const plan_expansion* expansion_of(std::uint32_t i) const;
    /// Index of a task by id (children too: `PARENT--NNNN`), or nullopt.
    std::optional<std::uint32_t> find(std::string_view id) const;
    const action_spec& action_of(const plan_task& t) const { return actions[t.action_index]; }
};

/// Inputs given on the command line, applied in order over spec.inputs; variables given on
/// the command line (`--vars-file` mappings, then `--var`), applied in order over every task's
/// own (docs/DESIGN.md, "Variables").
struct compile_options {
    std::vector<std::pair<std::string, boost::json::value>> input_overrides;
    std::vector<std::pair<std::string, boost::json::value>> var_overrides;
    /// Every task's timeout instead of the workflow's (`--timeout`): 1..limits::max_timeout_ms.
    std::optional<std::int64_t> task_timeout_ms;
    /// Every task's attempts in all instead of the workflow's retry (`--retries`):
    /// 1..limits::max_retry_attempts, on spawn_error, exit_nonzero and timeout.
    std::optional<int> task_attempts;
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
