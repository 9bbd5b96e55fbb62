// Canonical plan JSON (docs/DESIGN.md, "Plan"). Members always come in this order:
//
//   formatVersion, workflowName, workflowDigest, planDigest, maxConcurrency,
//   killGraceSeconds, approval, workspaceRoot, budgets{present ones; those on model usage
//   last, in document order}, inputs, order,
//   tasks{id -> task}, processes[], outputs
//
//   task:    id, uses{kind,name}, needs, with, vars? (children, and tasks with variables),
//            timeoutSeconds,
//            retry{maxAttempts,backoffMs,on}, failure, when?, limits{stdoutBytes,stderrBytes,
//            combinedBytes}, requiresApproval, outputSchema?, expansion?, args?, cwd?, deferred?
//   aggregate: id, uses, needs (its children), expansion{kind,count,maxIterations?}
//            (a loop's: uses{kind: loop_aggregate, name{children,condition,action}})
//   sub-workflow boundary and aggregate: as a task, uses{kind: subworkflow_input |
//            subworkflow_aggregate, name{name,version,children (aggregate)}}, without argv
//   process: action, kind, tasks, isolation, command, args, cwd?, env[{name,source,secret?}],
//            timeoutSeconds?, limits, container?{image,runtime,engines,memoryLimitBytes,
//            cpuLimitMillis,pidsLimit,controls}, extension?{protocolVersion,idempotency,
//            capabilities,inputSchema,outputSchema}
//
// planDigest is the sha256 of exactly these bytes with the planDigest member left out; it is
// computed by streaming the same writer into the hash.
#include "json/sha256.hpp"
#include "plan/plan_detail.hpp"

#include <agentctl/json.hpp>
#include <agentctl/plan.hpp>

#include <boost/json/object.hpp>

#include <algorithm>
#include <functional>
#include <optional>

namespace agentctl {
namespace {

class hash_sink final : public json_sink {
public:
    void write(std::string_view bytes) override { hash.update(bytes); }
    sha256 hash;
};

void write_object(json_writer& w, const boost::json::object& o) {
    w.begin_object();
    for (const auto& m : o) {
        w.key(std::string_view(m.key().data(), m.key().size()));
        w.value(m.value());
    }
    w.end_object();
}

// `key` and a list of strings.
void strings_member(json_writer& w, std::string_view key, const std::vector<std::string>& items) {
    w.key(key);
    w.begin_array();
    for (const auto& s : items) w.string(s);
    w.end_array();
}

void write_limits(json_writer& w, std::uint64_t out, std::uint64_t err, std::uint64_t combined) {
    w.begin_object();
    w.member("stdoutBytes", out);
    w.member("stderrBytes", err);
    w.member("combinedBytes", combined);
    w.end_object();
}

std::string_view expansion_name(plan_task::expansion_t e) {
    switch (e) {
        case plan_task::expansion_t::matrix:
            return "matrix";
        case plan_task::expansion_t::loop:
            return "loop";
        default:
            return "foreach";
    }
}

// Task ids as the writers name them: a child's is formatted into one reused string, not a new
// one per id (a 100 000-child plan names each child three times per pass).
class task_ids {
public:
    explicit task_ids(const plan& p) : p_(p) {}
    std::string_view operator()(std::uint32_t i) {
        const plan_task& n = p_.node(i);
        if (n.kind != plan_task::kind_t::child) return n.id;
        const plan_expansion& e = p_.expansions[n.expansion_slot];
        return child(e, n.parent, i - e.first_child);
    }
    std::string_view child(const plan_expansion& e, std::string_view parent, std::uint32_t k) {
        text_.clear();
        detail::append_child_id(text_, e, parent, k);
        return text_;
    }
    // The children of aggregate `t`, one string each.
    void write_children(json_writer& w, const plan_task& t) {
        const plan_expansion& e = p_.expansions[t.expansion_slot];
        const std::string& parent = p_.nodes[e.node].parent;
        for (std::uint32_t c = 0; c < t.child_count; ++c) w.string(child(e, parent, c));
    }

private:
    const plan& p_;
    std::string text_;
};

// The members of task `t` from `uses` to `needs`.
void write_uses_and_needs(json_writer& w, const plan& p, const plan_task& t, task_ids& ids) {
    w.key("uses");
    w.begin_object();
    const bool loop_aggregate =
        t.kind == plan_task::kind_t::aggregate && t.expansion == plan_task::expansion_t::loop;
    if (loop_aggregate) {
        // As the reference writes it: uses.name holds the iterations and the loop's condition,
        // checked once more after the last iteration (the bound is their count).
        const plan_task& iteration = p.nodes[p.expansions[t.expansion_slot].node];
        w.member("kind", "loop_aggregate");
        w.key("name");
        w.begin_object();
        w.key("children");
        w.begin_array();
        ids.write_children(w, t);
        w.end_array();
        w.member("condition", iteration.when ? iteration.when->expression : std::string());
        w.member("action", p.actions[t.action_index].name);
        w.end_object();
    } else if (t.subworkflow) {
        // As the reference writes it: uses.name holds the definition, its version and (the
        // aggregate's) the invocation's own tasks.
        const bool input = t.subworkflow->role == plan_subworkflow::role_t::input;
        w.member("kind", input ? "subworkflow_input" : "subworkflow_aggregate");
        w.key("name");
        w.begin_object();
        w.member("name", t.subworkflow->name);
        w.member("version", t.subworkflow->version);
        if (!input) {
            strings_member(w, "children", t.subworkflow->children);
        }
        w.end_object();
    } else if (t.route) {
        // As the reference writes it: uses.name holds the selector, the cases and the default.
        w.member("kind", "router");
        w.key("name");
        w.begin_object();
        w.member("select", t.route->select);
        w.key("cases");
        w.begin_array();
        for (const auto& c : t.route->cases) {
            w.begin_object();
            w.key("equals");
            w.value(c.equals);
            strings_member(w, "tasks", c.tasks);
            w.end_object();
        }
        w.end_array();
        strings_member(w, "default", t.route->otherwise);
        w.end_object();
    } else {
        w.member("kind", "action");
        w.member("name", p.actions[t.action_index].name);
    }
    w.end_object();
    if (!t.route_guards.empty()) {
        w.key("routeGuards");
        w.begin_array();
        for (const auto& router : t.route_guards) {
            w.begin_object();
            w.member("router", router);
            w.end_object();
        }
        w.end_array();
    }
    w.key("needs");
    w.begin_array();
    for (auto n : t.needs) w.string(ids(n));
    // A loop iteration after the first needs the one before it.
    if (t.kind == plan_task::kind_t::child && t.expansion == plan_task::expansion_t::loop &&
        t.expansion_index > 0)
        w.string(ids.child(p.expansions[t.expansion_slot], t.parent, t.expansion_index - 1));
    if (t.kind == plan_task::kind_t::aggregate) ids.write_children(w, t);
    w.end_array();
}

// The members of task `t` from `timeoutSeconds` to `compensate`: its settings, which the
// children of an expansion share with their template.
void write_settings(json_writer& w, const plan_task& t) {
    w.key("timeoutSeconds");
    write_seconds(w, t.timeout_ms);
    w.key("retry");
    w.begin_object();
    w.member("maxAttempts", t.retry.max_attempts);
    w.member("backoffMs", t.retry.backoff_ms);
    w.key("on");
    w.begin_array();
    for (auto r : t.retry.on) w.string(to_string(r));
    w.end_array();
    w.end_object();
    w.member("failure", to_string(t.failure));
    if (t.when) w.member("when", t.when->expression);
    w.key("limits");
    write_limits(w, t.limits.stdout_bytes, t.limits.stderr_bytes, t.limits.combined_bytes);
    w.member("requiresApproval", t.requires_approval);
    if (t.output_schema) w.member("outputSchema", *t.output_schema);
    if (!t.source_task_id.empty()) w.member("sourceTaskId", t.source_task_id);
    if (t.compensate) {  // as written: its templates are rendered when compensating
        w.key("compensate");
        w.begin_object();
        w.member("uses", "action:" + t.compensate->action);
        w.member("with", t.compensate->with);
        w.key("retry");
        w.begin_object();
        w.member("maxAttempts", t.compensate->retry.max_attempts);
        w.member("backoffMs", t.compensate->retry.backoff_ms);
        w.end_object();
        if (t.compensate->timeout_ms) {
            w.key("timeoutSeconds");
            write_seconds(w, *t.compensate->timeout_ms);
        }
        w.end_object();
    }
}

// What all the children of one expansion write alike, serialised once from their template:
// writing a plan of 100 000 children spends most of its time on these otherwise.
struct shared_members {
    std::optional<std::string> uses_and_needs;  ///< nullopt for a loop: each iteration needs the one before
    std::string settings;
};

std::string members_text(const std::function<void(json_writer&)>& write) {
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_object();
        write(w);
        w.end_object();
        w.flush();
    }
    return sink.text.substr(1, sink.text.size() - 2);  // without the braces
}

shared_members shared_by_children(const plan& p, const plan_expansion& e, task_ids& ids) {
    const plan_task& child = p.nodes[e.node];
    shared_members out;
    if (child.expansion != plan_task::expansion_t::loop)
        out.uses_and_needs = members_text([&](json_writer& w) { write_uses_and_needs(w, p, child, ids); });
    out.settings = members_text([&](json_writer& w) { write_settings(w, child); });
    return out;
}

// Task `t` (whole: a child rendered by plan::task(), with what its expansion's children share).
void write_task(json_writer& w, const plan& p, const plan_task& t, task_ids& ids,
                const shared_members* shared = nullptr) {
    w.begin_object();
    w.member("id", t.id);
    if (shared && shared->uses_and_needs)
        w.raw_members(*shared->uses_and_needs);
    else
        write_uses_and_needs(w, p, t, ids);
    if (t.kind == plan_task::kind_t::aggregate) {
        w.key("expansion");
        w.begin_object();
        w.member("kind", expansion_name(t.expansion));
        w.member("count", static_cast<std::uint64_t>(t.child_count));
        if (t.expansion == plan_task::expansion_t::loop)
            w.member("maxIterations", static_cast<std::uint64_t>(t.child_count));
        w.end_object();
        w.end_object();
        return;
    }
    w.member("with", t.with);
    if (t.kind == plan_task::kind_t::child || !t.vars.empty() || !t.vars_deferred.empty()) {
        // Deferred variables show their template text, as deferred `with` does.
        w.key("vars");
        w.begin_object();
        for (const auto* o : {&t.vars, &t.vars_deferred})
            for (const auto& m : *o) {
                w.key(std::string_view(m.key().data(), m.key().size()));
                w.value(m.value());
            }
        w.end_object();
    }
    if (shared)
        w.raw_members(shared->settings);
    else
        write_settings(w, t);
    if (t.kind == plan_task::kind_t::child) {
        w.key("expansion");
        w.begin_object();
        w.member("kind", expansion_name(t.expansion));
        w.member("parent", t.parent);
        w.member("index", static_cast<std::uint64_t>(t.expansion_index));
        w.end_object();
    }
    if (t.route) {  // a pure node: no action, so no argv
        w.end_object();
        return;
    }
    if (t.subworkflow) {  // a pure node: no action, so no argv
        if (t.with_deferred || !t.vars_deferred.empty()) {
            w.key("deferred");
            w.begin_array();
            if (!t.vars_deferred.empty()) w.string("vars");
            if (t.with_deferred) w.string("with");
            w.end_array();
        }
        w.end_object();
        return;
    }
    // Deferred argv shows the action's template text; rendered argv shows the values.
    const action_spec& act = p.actions[t.action_index];
    if (t.args) {
        strings_member(w, "args", *t.args);
    } else if (t.argv_deferred) {
        strings_member(w, "args", act.args);
    }
    if (t.cwd)
        w.member("cwd", *t.cwd);
    else if (t.argv_deferred && act.cwd)
        w.member("cwd", *act.cwd);
    if (t.with_deferred || t.argv_deferred || !t.vars_deferred.empty()) {
        w.key("deferred");
        w.begin_array();
        if (!t.vars_deferred.empty()) w.string("vars");
        if (t.with_deferred) w.string("with");
        if (t.argv_deferred) w.string("argv");
        w.end_array();
    }
    w.end_object();
}

std::string env_source_text(const env_source& s) {
    switch (s.kind) {
        case env_source::kind_t::env:
            return "env:" + s.text;
        case env_source::kind_t::file:
            return "file:" + s.text;
        case env_source::kind_t::process:
            return "process:" + s.process.command;
        case env_source::kind_t::value:
            return "value";  // never the literal itself
    }
    return "";
}

void write_container(json_writer& w, const container_spec& c, const std::vector<std::string>& engines) {
    w.begin_object();
    w.member("image", c.image);
    w.member("runtime", to_string(c.runtime));
    strings_member(w, "engines", engines);
    w.member("memoryLimitBytes", c.memory_limit_bytes);
    w.member("cpuLimitMillis", static_cast<std::uint64_t>(c.cpu_limit_millis));
    w.member("pidsLimit", static_cast<std::uint64_t>(c.pids_limit));
    strings_member(w, "controls", fixed_container_controls());
    w.end_object();
}

void write_extension(json_writer& w, const extension_spec& x) {
    w.begin_object();
    w.member("protocolVersion", x.protocol_version);
    w.member("idempotency", to_string(x.idempotency_class));
    strings_member(w, "capabilities", x.capabilities);
    w.member("inputSchema", x.input_schema);
    w.member("outputSchema", x.output_schema);
    w.end_object();
}

void write_process(json_writer& w, const plan& p, const plan_process& proc) {
    const action_spec& a = p.actions[proc.action_index];
    w.begin_object();
    w.member("action", a.name);
    w.member("kind", to_string(a.kind));
    strings_member(w, "tasks", proc.tasks);
    w.member("isolation", to_string(a.isolation));
    w.member("command", a.command);
    strings_member(w, "args", a.args);
    if (a.cwd) w.member("cwd", *a.cwd);
    w.key("env");
    w.begin_array();
    for (const auto& e : a.env) {
        w.begin_object();
        w.member("name", e.name);
        w.member("source", env_source_text(e.source));
        if (e.source.kind == env_source::kind_t::env && !e.source.secret) w.member("secret", false);
        w.end_object();
    }
    w.end_array();
    if (a.timeout_ms) {
        w.key("timeoutSeconds");
        write_seconds(w, *a.timeout_ms);
    }
    w.key("limits");
    write_limits(w, a.stdout_limit_bytes, a.stderr_limit_bytes, a.combined_output_limit_bytes);
    if (a.container) {
        w.key("container");
        write_container(w, *a.container, proc.engines);
    }
    if (a.extension) {
        w.key("extension");
        write_extension(w, *a.extension);
    }
    w.end_object();
}

bool has_compensation(const plan& p) {
    return std::any_of(p.nodes.begin(), p.nodes.end(),
                       [](const plan_task& t) { return t.compensate.has_value(); });
}

void write_head(json_writer& w, const plan& p) {
    w.begin_object();
    w.member("formatVersion", p.format_version);
    w.member("workflowName", p.workflow_name);
    w.member("workflowDigest", p.workflow_digest);
}

void write_body(json_writer& w, const plan& p) {
    w.member("maxConcurrency", p.max_concurrency);
    w.member("killGraceSeconds", p.kill_grace_seconds);
    w.member("approval", to_string(p.policy.approval));
    w.member("workspaceRoot", p.policy.workspace_root);
    // Only where compensation is used: every other plan (and its digest) stays as it was.
    if (!p.source_run_id.empty()) {
        w.member("mode", "compensation");
        w.member("sourceRunId", p.source_run_id);
    }
    if (has_compensation(p)) {
        w.key("compensation");
        w.begin_object();
        w.member("onFailure",
                 p.compensation.on_failure == compensation_spec::trigger::automatic ? "automatic" : "manual");
        const auto mode = p.compensation.approval_mode;
        w.member("approval", mode == compensation_spec::approval::always  ? "always"
                             : mode == compensation_spec::approval::never ? "never"
                                                                          : "policy");
        w.end_object();
    }
    w.key("budgets");
    w.begin_object();
    const budgets_spec& b = p.budgets;
    if (b.max_process_output_bytes) w.member("maxProcessOutputBytes", *b.max_process_output_bytes);
    if (b.max_wall_time_seconds) w.member("maxWallTimeSeconds", *b.max_wall_time_seconds);
    if (b.max_tasks) w.member("maxTasks", *b.max_tasks);
    if (b.max_expansion_items) w.member("maxExpansionItems", *b.max_expansion_items);
    if (b.max_artifact_bytes) w.member("maxArtifactBytes", *b.max_artifact_bytes);
    if (b.max_loop_iterations) w.member("maxLoopIterations", *b.max_loop_iterations);
    // Limits on model usage, as written: shown, never reached (no model runs here).
    for (const auto& [key, value] : b.model_usage) w.member(key, value);
    w.end_object();
    w.key("inputs");
    w.value(p.inputs);
    task_ids ids(p);
    w.key("order");
    w.begin_array();
    for (std::uint32_t i = 0; i < p.size(); ++i) w.string(ids(i));
    w.end_array();
    w.key("tasks");
    w.begin_object();
    // One task at a time: a child is rendered, written and dropped. The children of an
    // expansion are consecutive and share one renderer (its templates parsed once).
    std::optional<detail::child_renderer> children;
    const plan_expansion* children_of = nullptr;
    shared_members shared;
    for (std::uint32_t i = 0; i < p.size(); ++i) {
        const plan_task& n = p.node(i);
        if (n.kind != plan_task::kind_t::child) {
            w.key(n.id);
            write_task(w, p, n, ids);
            continue;
        }
        const plan_expansion& e = p.expansions[n.expansion_slot];
        if (children_of != &e) {
            children.emplace(p, e);
            children_of = &e;
            shared = shared_by_children(p, e, ids);
        }
        const plan_task& t = children->task(i - e.first_child);
        w.key(t.id);
        write_task(w, p, t, ids, &shared);
    }
    w.end_object();
    w.key("processes");
    w.begin_array();
    for (const auto& proc : p.processes) write_process(w, p, proc);
    w.end_array();
    w.key("outputs");
    write_object(w, p.outputs);
    w.end_object();
}

}  // namespace

std::vector<std::string> fixed_container_controls() {
    return {
        "read-only root filesystem",
        "user 65532:65532",
        "network none",
        "cap-drop ALL",
        "no-new-privileges",
        "/workspace read-only",
        "/tmp tmpfs 16 MiB noexec,nosuid,nodev",
    };
}

namespace detail {

std::string compute_plan_digest(const plan& p) {
    hash_sink sink;
    {
        json_writer w(sink);
        write_head(w, p);
        write_body(w, p);
    }
    return "sha256:" + sink.hash.hex();
}

}  // namespace detail

void write_plan_json(const plan& p, json_sink& out) {
    // compile() stores the digest; a plan assembled by hand gets it computed here.
    std::string digest = p.plan_digest.empty() ? detail::compute_plan_digest(p) : p.plan_digest;
    json_writer w(out);
    write_head(w, p);
    w.member("planDigest", digest);
    write_body(w, p);
    w.flush();
}

std::string plan_json(const plan& p) {
    string_sink sink;
    write_plan_json(p, sink);
    return std::move(sink.text);
}

}  // namespace agentctl
