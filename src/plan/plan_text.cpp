// The plan for people: a header, the order, one line per declared task and two lines per
// process action. An expansion is one line however many children it has.
#include "plan/plan_detail.hpp"

#include <agentctl/json.hpp>
#include <agentctl/plan.hpp>

#include <algorithm>

namespace agentctl {
namespace {

constexpr std::string_view ellipsis = "\xe2\x80\xa6";   // …
constexpr std::string_view times = "\xc3\x97";          // ×
constexpr std::size_t run_to_summarise = 4;             // children in a row shown as `first … last`
constexpr std::size_t order_head = 12, order_tail = 4;  // entries kept when the order is long
constexpr std::size_t max_with_chars = 60;

std::string bytes_text(std::uint64_t n) {
    constexpr std::uint64_t kib = 1024, mib = kib * 1024, gib = mib * 1024;
    if (n >= gib && n % gib == 0) return std::to_string(n / gib) + " GiB";
    if (n >= mib && n % mib == 0) return std::to_string(n / mib) + " MiB";
    if (n >= kib && n % kib == 0) return std::to_string(n / kib) + " KiB";
    return std::to_string(n) + " B";
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (const auto& s : items) {
        if (!out.empty()) out += sep;
        out += s;
    }
    return out;
}

// An argv element as a reader would type it: quoted when empty or holding blanks, quotes or
// shell characters; control characters are escaped so one process stays on its lines.
std::string shown_arg(const std::string& arg) {
    static constexpr char hex[] = "0123456789abcdef";
    bool plain = !arg.empty() && std::none_of(arg.begin(), arg.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 ||
               std::string_view(" '\"\\$`;&|<>()*?").find(c) != std::string_view::npos;
    });
    if (plain) return arg;
    std::string out = "'";
    for (char c : arg) {
        auto u = static_cast<unsigned char>(c);
        if (c == '\'')
            out += "'\\''";
        else if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (u < 0x20)
            out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
        else
            out += c;
    }
    return out + "'";
}

std::string argv_text(const std::string& command, const std::vector<std::string>& args) {
    std::string out = shown_arg(command);
    for (const auto& a : args) out += " " + shown_arg(a);
    return out;
}

std::string short_json(const boost::json::value& v) {
    std::string s = to_json(v);
    if (s.size() <= max_with_chars) return s;
    return std::string(utf8_prefix(s, max_with_chars - 1)) + std::string(ellipsis);
}

// Order entries with an expansion's children (consecutive, in item order) folded into one entry.
std::vector<std::string> folded_order(const plan& p) {
    std::vector<std::string> out;
    for (std::uint32_t v = 0; v < p.nodes.size(); ++v) {
        const plan_task& t = p.nodes[v];
        if (t.kind != plan_task::kind_t::child) {
            out.push_back(t.id);
            continue;
        }
        const std::uint32_t first = p.node_starts[v];
        if (t.child_count >= run_to_summarise) {
            out.push_back(p.task_id(first) + " " + std::string(ellipsis) + " " +
                          p.task_id(first + t.child_count - 1) + " (" + std::string(times) +
                          std::to_string(t.child_count) + ")");
        } else {
            for (std::uint32_t k = 0; k < t.child_count; ++k) out.push_back(p.task_id(first + k));
        }
    }
    if (out.size() > order_head + order_tail + 1) {
        std::size_t hidden = out.size() - order_head - order_tail;
        std::vector<std::string> shorter(out.begin(), out.begin() + order_head);
        shorter.push_back(std::string(ellipsis) + " (" + std::to_string(hidden) + " more)");
        shorter.insert(shorter.end(), out.end() - order_tail, out.end());
        out = std::move(shorter);
    }
    return out;
}

// Details of a runnable task (or of an expansion's first child), leaving out defaults.
std::string task_details(const plan& p, const plan_task& t, bool show_with) {
    std::string out = "  timeout " + seconds_text(t.timeout_ms);
    if (t.retry.max_attempts > 1) {
        std::vector<std::string> on;
        for (auto r : t.retry.on) on.emplace_back(to_string(r));
        out += "  retry " + std::to_string(t.retry.max_attempts) + std::string(times) + " every " +
               std::to_string(t.retry.backoff_ms) + "ms on " + join(on, ",");
    }
    if (t.failure == failure_mode::continue_run) out += "  failure continue";
    if (t.when) out += "  when " + t.when->expression;
    if (t.requires_approval) out += "  needs approval";
    if (t.compensate) out += "  compensate action:" + t.compensate->action;
    if (!t.source_task_id.empty()) out += "  undoes " + t.source_task_id;
    if (t.with_deferred)
        out += "  with (at run time) " + short_json(t.with);
    else if (show_with && !(t.with.is_object() && t.with.get_object().empty()))
        out += "  with " + short_json(t.with);
    const action_spec& act = p.actions[t.action_index];
    if (t.argv_deferred)
        out += "  argv (at run time) " + argv_text(act.command, act.args);
    else if (t.args && show_with)
        out += "  argv " + argv_text(act.command, *t.args);
    if (t.cwd && show_with) out += "  cwd " + *t.cwd;
    return out;
}

std::string needs_text(const plan& p, const std::vector<std::uint32_t>& needs) {
    if (needs.empty()) return "";
    std::vector<std::string> ids;
    for (auto n : needs) ids.push_back(p.task_id(n));
    return "  needs " + join(ids, ", ");
}

std::string process_lines(const plan& p, const plan_process& proc) {
    const action_spec& a = p.actions[proc.action_index];
    std::string out = "  " + a.name + "  " + std::string(to_string(a.kind)) + "  " +
                      std::string(to_string(a.isolation)) + "  " + argv_text(a.command, a.args);
    if (a.cwd) out += "  cwd " + *a.cwd;
    out += "  tasks: " + (proc.tasks.empty() ? std::string("(none)") : join(proc.tasks, ", ")) + "\n    ";
    out += "limits stdout " + bytes_text(a.stdout_limit_bytes) + ", stderr " +
           bytes_text(a.stderr_limit_bytes) + ", combined " + bytes_text(a.combined_output_limit_bytes);
    if (a.timeout_ms) out += "; timeout " + seconds_text(*a.timeout_ms);
    if (!a.env.empty()) {
        std::vector<std::string> env;
        for (const auto& e : a.env) {
            std::string source;
            switch (e.source.kind) {
                case env_source::kind_t::env:
                    source = "env:" + e.source.text + (e.source.secret ? "" : " (not secret)");
                    break;
                case env_source::kind_t::file:
                    source = "file:" + e.source.text;
                    break;
                case env_source::kind_t::process:
                    source = "process:" + e.source.process.command;
                    break;
                case env_source::kind_t::value:
                    source = "value";
                    break;
            }
            env.push_back(e.name + "<-" + source);
        }
        out += "; env " + join(env, ", ");
    }
    if (a.extension) {
        const extension_spec& x = *a.extension;
        out += "; extension " + x.protocol_version + ", idempotency " +
               std::string(to_string(x.idempotency_class)) + ", capabilities " +
               (x.capabilities.empty() ? std::string("(none)") : join(x.capabilities, ","));
    }
    if (a.container) {
        const container_spec& c = *a.container;
        std::string cpu = std::to_string(c.cpu_limit_millis / 1000) + "." +
                          std::string(3 - std::to_string(c.cpu_limit_millis % 1000).size(), '0') +
                          std::to_string(c.cpu_limit_millis % 1000);
        out += "; image " + c.image + "; engines " + join(proc.engines, " then ") + "; memory " +
               bytes_text(c.memory_limit_bytes) + ", cpus " + cpu + ", pids " + std::to_string(c.pids_limit) +
               "; fixed: " + join(fixed_container_controls(), ", ");
    }
    return out + "\n";
}

// What a child binds: the foreach name, or the matrix axes.
std::string binding_names(const plan_task& child) {
    std::vector<std::string> names;
    if (child.expansion == plan_task::expansion_t::matrix) {
        if (const auto* cell = child.vars.if_contains("matrix"); cell && cell->is_object())
            for (const auto& m : cell->get_object()) names.emplace_back(m.key());
    } else {
        for (const auto& m : child.vars)
            if (m.key() != "foreachIndex") names.emplace_back(m.key());
    }
    return join(names, ", ");
}

// A loop's aggregate line (its bound and condition), then every iteration on a line of its
// own: at most 64, and each is a task that may run (docs/CONTROL_FLOW.md, "Bounded loops").
std::string loop_lines(const plan& p, const plan_task& aggregate, const std::string& id,
                       const std::string& uses) {
    plan_task first = p.task(aggregate.first_child);
    const std::string condition = first.when ? first.when->expression : std::string();
    first.when.reset();  // said once, as the loop's `while`
    std::string out = "  " + id + "  loop maxIterations " + std::to_string(aggregate.child_count) +
                      " while " + condition + "  " + uses + needs_text(p, first.needs) +
                      task_details(p, first, false) + "\n";
    for (std::uint32_t k = 0; k < aggregate.child_count; ++k)
        out += "    " + p.task_id(aggregate.first_child + k) + "  loopIndex " + std::to_string(k) +
               (k == 0 ? "" : "  needs " + p.task_id(aggregate.first_child + k - 1)) + "\n";
    return out;
}

// A router: its selector, each case's destinations, then the default's.
std::string route_text(const route_spec& r) {
    std::string out = "router " + r.select;
    for (const auto& c : r.cases) out += "  " + to_json(c.equals) + " -> " + join(c.tasks, ", ");
    out += "  default -> " + (r.otherwise.empty() ? std::string("(none)") : join(r.otherwise, ", "));
    return out;
}

// The routers a destination waits for: it runs only where their decisions name it.
std::string guards_text(const plan_task& t) {
    return t.route_guards.empty() ? std::string() : "  routed by " + join(t.route_guards, ", ");
}

}  // namespace

std::string plan_text(const plan& p, std::string_view workspace) {
    std::string out = "plan " + p.workflow_name + "\n";
    out += "  workflow " + p.workflow_digest + "\n";
    out += "  plan     " + p.plan_digest + "\n";
    out += "  approval " + std::string(to_string(p.policy.approval)) + "  max concurrency " +
           std::to_string(p.max_concurrency) + "  kill grace " + std::to_string(p.kill_grace_seconds) +
           "s  workspace " + (workspace.empty() ? p.policy.workspace_root : std::string(workspace)) + "\n";
    std::vector<std::string> budgets;
    const budgets_spec& b = p.budgets;
    if (b.max_tasks) budgets.push_back("maxTasks " + std::to_string(*b.max_tasks));
    if (b.max_expansion_items)
        budgets.push_back("maxExpansionItems " + std::to_string(*b.max_expansion_items));
    if (b.max_process_output_bytes)
        budgets.push_back("maxProcessOutputBytes " + bytes_text(*b.max_process_output_bytes));
    if (b.max_wall_time_seconds)
        budgets.push_back("maxWallTimeSeconds " + std::to_string(*b.max_wall_time_seconds));
    if (b.max_artifact_bytes) budgets.push_back("maxArtifactBytes " + bytes_text(*b.max_artifact_bytes));
    if (b.max_loop_iterations)
        budgets.push_back("maxLoopIterations " + std::to_string(*b.max_loop_iterations));
    if (!budgets.empty()) out += "  budgets " + join(budgets, ", ") + "\n";
    std::vector<std::string> model;
    for (const auto& [key, value] : b.model_usage) model.push_back(key + " " + std::to_string(value));
    if (!model.empty())
        out += "  model budgets " + join(model, ", ") + " (no model runs here: never reached)\n";
    if (!p.source_run_id.empty()) out += "  compensation of run " + p.source_run_id + "\n";
    if (std::any_of(p.nodes.begin(), p.nodes.end(),
                    [](const plan_task& t) { return t.compensate.has_value(); }))
        out += std::string("  compensation ") +
               (p.compensation.on_failure == compensation_spec::trigger::automatic ? "automatic" : "manual") +
               " (agentctl compensate RUN)\n";

    out += "order (" + std::to_string(p.size()) + (p.size() == 1 ? " task): " : " tasks): ") +
           join(folded_order(p), " -> ") + "\n";

    std::size_t width = 0;
    for (const auto& t : p.nodes)
        if (t.kind != plan_task::kind_t::child) width = std::max(width, t.id.size());
    width = std::min<std::size_t>(width, 24);
    out += "tasks:\n";
    for (const auto& t : p.nodes) {
        if (t.kind == plan_task::kind_t::child) continue;
        std::string id = t.id;
        if (id.size() < width) id.append(width - id.size(), ' ');
        if (t.route) {
            // A pure node: no timeout, retry or argv to show.
            out += "  " + id + "  " + route_text(*t.route) + needs_text(p, t.needs) +
                   (t.when ? "  when " + t.when->expression : std::string()) + "\n";
            continue;
        }
        if (t.subworkflow) {
            // A pure node: the boundary shows what it passes, the aggregate what it returns.
            const plan_subworkflow& sw = *t.subworkflow;
            const bool input = sw.role == plan_subworkflow::role_t::input;
            out += "  " + id + "  workflow:" + sw.name + " " + sw.version +
                   (input ? " inputs"
                          : " outputs of " + std::to_string(sw.children.size()) +
                                (sw.children.size() == 1 ? " task" : " tasks")) +
                   guards_text(t) + needs_text(p, t.needs) +
                   (t.failure == failure_mode::continue_run ? "  failure continue" : "") +
                   (t.with_deferred ? "  with (at run time) " : "  with ") + short_json(t.with) + "\n";
            continue;
        }
        const std::string uses = "action:" + p.actions[t.action_index].name + guards_text(t);
        if (t.kind == plan_task::kind_t::single) {
            out += "  " + id + "  " + uses + needs_text(p, t.needs) + task_details(p, t, true) + "\n";
            continue;
        }
        if (t.expansion == plan_task::expansion_t::loop) {
            out += loop_lines(p, t, id, uses);
            continue;
        }
        std::string kind = t.expansion == plan_task::expansion_t::matrix ? "matrix " : "foreach ";
        out += "  " + id + "  " + kind + std::string(times) + std::to_string(t.child_count);
        if (t.child_count == 0) {
            out += "  " + uses + "\n";
            continue;
        }
        const plan_task first = p.task(t.first_child);
        const std::string last = p.task_id(t.first_child + t.child_count - 1);
        out += " over " + binding_names(first);
        out += "  " + first.id + (t.child_count > 1 ? " " + std::string(ellipsis) + " " + last : "") + "  " +
               uses + needs_text(p, first.needs) + task_details(p, first, false) + "\n";
    }
    if (!p.processes.empty()) {
        out += "processes:\n";
        for (const auto& proc : p.processes) out += process_lines(p, proc);
    }
    if (!p.outputs.empty()) {
        std::vector<std::string> names;
        for (const auto& m : p.outputs) names.emplace_back(m.key());
        out += "outputs: " + join(names, ", ") + "\n";
    }
    return out;
}

}  // namespace agentctl
