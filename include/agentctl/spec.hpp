// The workflow document model, exactly as written by the author.
//
// Values here are what the document says, after type checking; defaults that depend on
// other fields (timeouts, concurrency) are resolved later by the plan compiler. JSON-typed
// data (inputs, `with`, outputs, schemas) is kept as boost::json values; strings in them
// may hold `${{ ... }}` templates.
#pragma once

#include <agentctl/diagnostic.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentctl {

/// Limits shared by the parser and the plan compiler.
namespace limits {
inline constexpr std::uint64_t max_document_bytes = 1024 * 1024;  ///< larger files are refused unread
/// `--inputs-file` is data, not the workflow: JSON up to this size (a guard against naming
/// the wrong file, not a budget), YAML up to the smaller one (its parser is ~50x slower).
inline constexpr std::uint64_t max_inputs_file_bytes = 256ull * 1024 * 1024;
inline constexpr std::uint64_t max_yaml_inputs_file_bytes = 16ull * 1024 * 1024;
/// Variables files (`varsFiles`, `--vars-file`), as the reference bounds them: each, all of
/// a run's together, and how many.
inline constexpr std::uint64_t max_vars_file_bytes = 1024 * 1024;
inline constexpr std::uint64_t max_vars_total_bytes = 16ull * 1024 * 1024;
inline constexpr std::size_t max_vars_files = 256;
/// The longest item (a line of an items file, a string of an inputs file): the longest single
/// argument Linux passes to a program (MAX_ARG_STRLEN, 128 KiB with its terminating NUL). A
/// longer one could never reach a process whole, so it is refused where it is read, before it
/// costs memory or a journal row.
inline constexpr std::size_t max_item_bytes = 128 * 1024 - 1;
/// A secret value shorter than this is still redacted, but as such a short string it is
/// likely to occur in ordinary output, which then becomes unreadable: it earns a warning.
inline constexpr std::size_t min_redactable_secret_bytes = 4;
inline constexpr int max_timeout_seconds = 86400;
inline constexpr std::int64_t max_timeout_ms = 86400ll * 1000;
inline constexpr int max_kill_grace_seconds = 3600;
inline constexpr int max_concurrency = 4096;
inline constexpr std::uint64_t max_stream_limit_bytes = 16 * 1024 * 1024;
inline constexpr std::uint64_t default_stdout_limit_bytes = 1024 * 1024;
inline constexpr std::uint64_t default_stderr_limit_bytes = 1024 * 1024;
inline constexpr std::uint64_t default_combined_limit_bytes = 2 * 1024 * 1024;
inline constexpr std::uint64_t min_memory_bytes = 16ull * 1024 * 1024;
inline constexpr std::uint64_t max_memory_bytes = 16ull * 1024 * 1024 * 1024;
inline constexpr std::uint64_t default_memory_bytes = 256ull * 1024 * 1024;
inline constexpr std::uint32_t max_cpu_millis = 64000;
inline constexpr std::uint32_t default_cpu_millis = 1000;
inline constexpr std::uint32_t max_pids = 4096;
inline constexpr std::uint32_t default_pids = 64;
inline constexpr int max_retry_attempts = 20;
inline constexpr int max_backoff_ms = 60000;
inline constexpr std::uint32_t default_max_items = 10000;     ///< foreach/matrix maxItems default
inline constexpr std::uint32_t max_max_items = 1000000;       ///< largest maxItems accepted
inline constexpr std::uint32_t max_loop_iterations = 64;      ///< a loop's maxIterations, at most
inline constexpr int default_secret_process_timeout_seconds = 5;
inline constexpr int max_secret_process_timeout_seconds = 60;
inline constexpr std::uint64_t default_secret_process_output_bytes = 16 * 1024;
inline constexpr std::uint64_t max_secret_process_output_bytes = 64 * 1024;
inline constexpr std::uint64_t max_secret_file_bytes = 64 * 1024;
inline constexpr std::size_t max_secret_process_args = 64;
inline constexpr std::size_t max_secret_process_arg_bytes = 4096;
}  // namespace limits

/// Where each part of the document was written: dotted path -> location of its key
/// (for mapping entries) or of the item (for sequence items). Paths use `.key` for
/// mapping keys and `[i]` for sequence items: `spec.tasks[2].needs[0]`.
class source_map {
public:
    /// Records where `path` is; a later record of the same path wins.
    void set(std::string_view path, int line, int column);
    /// Room for `paths` entries of about `bytes` path bytes in all.
    void reserve(std::size_t paths, std::size_t bytes) {
        entries_.reserve(paths);
        paths_.reserve(bytes);
    }
    /// The location of `path`, or of its nearest recorded ancestor; {file,0,0} if none.
    /// A scan: recording is on every parse, looking up only for diagnostics.
    source_location find(std::string_view path) const;
    /// Whether `path` itself was recorded (written in the document).
    bool contains(std::string_view path) const;
    const std::string& file() const { return file_; }
    void set_file(std::string file) { file_ = std::move(file); }

private:
    struct entry {
        std::uint32_t offset;  ///< of the path in paths_
        std::uint32_t size;
        int line;
        int column;
    };
    std::string file_;
    std::string paths_;  ///< every recorded path, back to back: one allocation, not one each
    std::vector<entry> entries_;
};

struct workflow_metadata {
    std::string name;  ///< non-empty
    std::string description;
    std::vector<std::pair<std::string, std::string>> labels;  ///< declaration order
};

enum class approval_mode { never, mutations, high_risk, always };
/// What a run without an approver does when a task needs approval. The reference pauses the
/// run durably for `pause`; this engine has no durable approvals, so every mode stops the run
/// before any effect (exit 3), as `deny_approval` and `fail` do there.
enum class non_interactive_mode { pause, deny_approval, fail };

/// `policy.network`: how outbound HTTP of providers and protocol peers would be bounded. No
/// task of this engine opens a connection itself (docs/DESIGN.md, "Network policy").
struct network_spec {
    std::vector<std::string> allowed_schemes;  ///< http, https
    std::vector<std::uint32_t> allowed_ports;  ///< 1..65535
    std::optional<int> connect_timeout_seconds;
    std::optional<std::uint64_t> max_response_bytes;
    bool allow_private = false;
    bool allow_proxy = false;
};

struct policy_spec {
    std::string workspace_root = ".";  ///< relative to --workspace, else the workflow's folder
    std::vector<std::string> writable_roots;
    std::vector<std::string> process_allowlist;      ///< executable basenames
    std::vector<std::string> environment_allowlist;  ///< variable names
    std::vector<std::string> secret_file_roots;
    std::vector<std::string> secret_process_allowlist;  ///< helper basenames
    approval_mode approval = approval_mode::mutations;
    non_interactive_mode non_interactive = non_interactive_mode::pause;
    /// Hosts (`api.example.com`, `*.example.com`) outbound HTTP may reach. Nothing here makes
    /// such calls; container actions have no network at all.
    std::vector<std::string> network_allowlist;
    std::optional<network_spec> network;
    /// Capabilities (`filesystem.write`, `process.exec`, ...) a task may or may not use; an
    /// empty allow list allows every capability not denied.
    std::vector<std::string> tools_allow;
    std::vector<std::string> tools_deny;
    std::vector<std::string> providers;  ///< provider names; nothing here calls a provider
};

/// Run-wide limits; each is > 0 when present.
struct budgets_spec {
    std::optional<std::uint64_t> max_process_output_bytes;
    std::optional<std::uint64_t> max_wall_time_seconds;
    std::optional<std::uint64_t> max_tasks;  ///< counted after foreach/matrix expansion
    std::optional<std::uint64_t> max_expansion_items;
    std::optional<std::uint64_t> max_artifact_bytes;  ///< bytes written by builtin.write
    std::optional<std::uint64_t> max_loop_iterations;
    /// Limits on model usage (maxProviderRequests, maxTurns, maxToolCalls, maxInputTokens,
    /// maxOutputTokens, maxTotalTokens, maxCostMicrousd), in document order: accepted and
    /// shown, never reached, since this engine makes no model call.
    std::vector<std::pair<std::string, std::uint64_t>> model_usage;
};

struct runtime_spec {
    std::optional<int> max_concurrency;  ///< 1..4096; absent = 1 (reference default)
    std::int64_t default_timeout_ms = 120000;  ///< 1 ms..86400 s (`defaultTimeoutSeconds`, decimals allowed)
    int kill_grace_seconds = 0;          ///< 0..3600; 0 = SIGKILL at once
    budgets_spec budgets;
    /// `pricing` (model cost rates), validated and kept as written; null when absent.
    boost::json::value pricing;
};

/// `{process: {...}}` secret source: a bounded helper whose stdout is the value.
struct secret_process_spec {
    std::string command;
    std::vector<std::string> args;
    int timeout_seconds = limits::default_secret_process_timeout_seconds;
    std::uint64_t output_limit_bytes = limits::default_secret_process_output_bytes;
};

/// Where one environment value of an action comes from.
struct env_source {
    enum class kind_t { env, file, process, value };
    kind_t kind = kind_t::env;
    std::string text;  ///< env: source variable name; file: path; value: the literal
    secret_process_spec process;  ///< kind == process only
    /// env only: false for `{env: NAME, secret: false}`, a host variable passed through as is.
    bool secret = true;
    /// file and process values are secrets and are redacted, env values unless `secret: false`;
    /// value literals never are.
    bool is_secret() const { return kind != kind_t::value && secret; }
};

struct env_entry {
    std::string name;  ///< [A-Za-z_][A-Za-z0-9_]*
    env_source source;
};

enum class engine_choice { auto_select, docker, podman };

struct container_spec {
    std::string image;  ///< NAME@sha256:<64 hex> or sha256:<64 hex>
    engine_choice runtime = engine_choice::auto_select;
    std::uint64_t memory_limit_bytes = limits::default_memory_bytes;
    std::uint32_t cpu_limit_millis = limits::default_cpu_millis;
    std::uint32_t pids_limit = limits::default_pids;
};

/// Action kinds. The built-in ones but shell_exec run no process: assign and assert are pure,
/// read and write touch one file beneath the workspace.
enum class action_kind { shell_exec, extension_process, assign, assert_that, read, write };
enum class isolation_mode { process, container };
enum class idempotency { pure, idempotent, keyed, at_most_once, unknown };

/// Fields only `extension.process` actions may carry.
struct extension_spec {
    std::string protocol_version;  ///< must be agentctl.dev/process-extension/v1
    idempotency idempotency_class = idempotency::unknown;
    boost::json::value input_schema;
    boost::json::value output_schema;
    std::vector<std::string> capabilities;
};

struct action_spec {
    std::string name;  ///< the key under spec.actions
    action_kind kind = action_kind::shell_exec;
    std::string description;
    std::string command;                 ///< process kinds: absolute path or bare name
    std::vector<std::string> args;       ///< may hold templates (beyond the reference)
    std::optional<std::string> cwd;      ///< relative to workspaceRoot; may hold templates
    std::vector<env_entry> env;          ///< declaration order, names unique
    std::optional<std::int64_t> timeout_ms;  ///< `timeoutSeconds` in ms: 0.001..86400 s
    std::uint64_t stdout_limit_bytes = limits::default_stdout_limit_bytes;
    std::uint64_t stderr_limit_bytes = limits::default_stderr_limit_bytes;
    std::uint64_t combined_output_limit_bytes = limits::default_combined_limit_bytes;
    isolation_mode isolation = isolation_mode::process;
    std::optional<container_spec> container;  ///< present iff isolation == container
    std::optional<extension_spec> extension;  ///< present iff kind == extension_process
    boost::json::value with;  ///< action-level default input (object or null)

    bool is_process() const {
        return kind == action_kind::shell_exec || kind == action_kind::extension_process;
    }
    /// Whether a task of this action needs approval under `mode`: the reference's rule by
    /// effect class and risk (docs/DESIGN.md, "Plan"). Pure actions never do.
    bool needs_approval(approval_mode mode) const;
};

/// Which failures a retry may repeat.
enum class retry_reason { spawn_error, exit_nonzero, timeout };

struct retry_spec {
    int max_attempts = 1;  ///< 1..20
    int backoff_ms = 0;    ///< 0..60000
    std::vector<retry_reason> on = {retry_reason::spawn_error};
};

enum class failure_mode { stop, continue_run };

struct foreach_spec {
    boost::json::value items;  ///< an array, or a string that is exactly one template
    std::string as = "item";
    std::uint32_t max_items = limits::default_max_items;
};

struct matrix_spec {
    std::vector<std::pair<std::string, boost::json::value>> axes;  ///< declaration order
    std::uint32_t max_items = limits::default_max_items;
};

/// `loop:` on a task (docs/CONTROL_FLOW.md, "Bounded loops"): compiled into `max_iterations`
/// sequential iterations, each guarded by `condition`, and one aggregate.
struct loop_spec {
    std::uint32_t max_iterations = 1;  ///< 1..limits::max_loop_iterations
    std::string condition;             ///< `while`: exactly one `${{ condition }}`
    boost::json::value initial;        ///< `vars.loopPrevious` of iteration 0 (null when absent)
};

/// One case of a router: the destinations taken when `select` renders to `equals` (the same
/// JSON value: 1 and "1" differ).
struct route_case {
    boost::json::value equals;
    std::vector<std::string> tasks;
};

/// `route:` on a `uses: router` task (docs/CONTROL_FLOW.md, "Routers").
struct route_spec {
    std::string select;                  ///< exactly one `${{ path }}`
    std::vector<route_case> cases;       ///< at least one
    std::vector<std::string> otherwise;  ///< `default`: taken when no case matches (may be empty)
};

/// A task's `compensate` (docs/CONTROL_FLOW.md, "Compensation"): the action that undoes its
/// effect, run in a compensation run after the task's run has ended.
struct compensate_spec {
    std::string action;                      ///< from `uses: action:NAME`
    boost::json::value with;                 ///< object or null; may hold templates
    retry_spec retry;                        ///< its own bounded retry
    std::optional<std::int64_t> timeout_ms;  ///< `timeoutSeconds` in ms
};

/// `spec.compensation`: whether a failed run is compensated by itself, and its approval.
struct compensation_spec {
    enum class trigger { manual, automatic };
    enum class approval { policy, always, never };
    trigger on_failure = trigger::manual;
    approval approval_mode = approval::policy;
};

/// What makes a workflow a compensation run's (docs/CONTROL_FLOW.md, "Compensation"): the
/// run it undoes and, for each of its tasks (in order), the source task it undoes. Set by
/// compensation_workflow(), never read from a document.
struct compensation_origin {
    std::string source_run_id;
    std::vector<std::string> source_task_ids;  ///< parallel to workflow::tasks
};

struct task_spec {
    std::string id;   ///< [a-z0-9_-]+, unique
    std::string uses; ///< as written, e.g. "action:status"
    std::string action;  ///< the action name from `uses`
    std::vector<std::string> needs;
    boost::json::value with;  ///< object or null; may hold templates
    std::optional<std::int64_t> timeout_ms;  ///< `timeoutSeconds` in ms
    retry_spec retry;
    failure_mode failure = failure_mode::stop;
    std::optional<std::string> when;
    std::optional<foreach_spec> foreach;
    std::optional<matrix_spec> matrix;
    std::optional<loop_spec> loop;
    std::optional<compensate_spec> compensate;
    std::string subworkflow;                          ///< from `uses: workflow:NAME`; empty otherwise
    std::optional<route_spec> route;                  ///< set only on `uses: router`
    boost::json::object vars;                         ///< task-level variables (may read `inputs.`)
    std::vector<std::string> vars_files;              ///< relative to the workflow's folder, in order
    std::optional<boost::json::value> output_schema;  ///< a JSON Schema for the task's output
};

/// An entry of `spec.subworkflows` (docs/CONTROL_FLOW.md, "Sub-workflows"): a graph of
/// local tasks behind a typed input and output, expanded into each task that invokes it.
struct subworkflow_spec {
    std::string name;
    std::string version;               ///< semantic version
    boost::json::object inputs;        ///< defaults under the invocation's `with`
    boost::json::value input_schema;   ///< a JSON Schema (mapping)
    boost::json::value output_schema;  ///< a JSON Schema (mapping)
    boost::json::object outputs;       ///< name -> template over the local tasks
    std::vector<task_spec> tasks;      ///< local ids
};

/// A variables file (`varsFiles`, `--vars-file`): a mapping of data, read when the workflow is
/// loaded (docs/DESIGN.md, "Variables").
struct vars_file {
    std::string path;                           ///< as written (or given)
    std::string where;                          ///< the dotted path that names it, for diagnostics
    std::optional<boost::json::object> values;  ///< absent when it could not be read (reported)
};

/// A feature of the reference's workflow language this engine does not run (models, agents,
/// remote protocols, memory, tools, packs): found while reading, reported once per document
/// (`unsupported_feature`).
struct unsupported_use {
    std::string feature;  ///< e.g. "spec.agents", "uses: agent:", "builtin.memory.write"
    std::string path;     ///< where it was first seen
};

/// A whole document. `source_digest` is the sha256 of the file's bytes.
struct workflow {
    std::string api_version;
    workflow_metadata metadata;
    boost::json::object inputs;  ///< defaults
    policy_spec policy;
    runtime_spec runtime;
    std::vector<action_spec> actions;  ///< declaration order
    std::vector<task_spec> tasks;      ///< declaration order
    boost::json::object outputs;       ///< name -> value (templates allowed)
    boost::json::object vars;          ///< spec.vars (may read `inputs.`)
    compensation_spec compensation;    ///< spec.compensation
    std::optional<compensation_origin> compensation_of;  ///< a compensation run's workflow
    std::vector<subworkflow_spec> subworkflows;  ///< spec.subworkflows, in document order
    std::vector<std::string> vars_files;  ///< spec.varsFiles, relative to the workflow's folder
    /// The variables files of spec.varsFiles, then of each task's varsFiles, as read by
    /// load_workflow() (parse_workflow() reads no file: it leaves this empty and the compiler
    /// reports every file as unread).
    std::vector<vars_file> loaded_vars_files;
    std::vector<unsupported_use> unsupported;  ///< features found that this engine does not run
    /// `spec.output`: the reference's presentation hints, kept as written. agentctl's output
    /// is chosen on its command line (--output, --verbose).
    bool output_verbose = false;
    bool output_show_diff = true;
    source_map locations;
    std::string source_digest;  ///< "sha256:<hex>"

    const action_spec* find_action(std::string_view name) const;
    /// Location of a dotted path, for diagnostics raised after parsing.
    source_location where(std::string_view path) const { return locations.find(path); }
};

/// The capability an action's effect uses, as policy.toolsAllow and toolsDeny name it:
/// `process.exec` (builtin.shell.exec, extension.process), `filesystem.read`,
/// `filesystem.write`; "" for the pure builtin.assign and builtin.assert.
std::string_view capability_of(action_kind kind);
/// Whether `policy` lets an action use `capability` (toolsDeny wins; a non-empty toolsAllow
/// must list it). "" (no effect) is always allowed.
bool capability_allowed(const policy_spec& policy, std::string_view capability);

/// Names the engine binds under `vars.` itself (foreachIndex, matrix, matrixIndex, loopIndex,
/// loopPrevious, and jobSlot at dispatch): no variable may take them.
bool is_reserved_variable(std::string_view name);

std::string_view to_string(approval_mode);
std::string_view to_string(non_interactive_mode);
std::string_view to_string(action_kind);
std::string_view to_string(isolation_mode);
std::string_view to_string(engine_choice);
std::string_view to_string(idempotency);
std::string_view to_string(retry_reason);
std::string_view to_string(failure_mode);

}  // namespace agentctl
