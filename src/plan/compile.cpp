// The plan compiler (SPEC sections 2-3, REFERENCE 1.5-1.8): workflow -> immutable plan.
//
// Steps, each reporting every problem it finds before the next runs:
//   inputs -> policy rules -> extension schemas -> task ids, actions, needs -> cycles ->
//   template syntax and roots -> expansion sizes and budgets -> nodes (children, aggregates,
//   singles) with their rendered `with`/args/cwd -> deterministic topological order ->
//   processes -> digest.
// Nodes are first generated in "declaration order" (each expanded task's children in item
// order, then its aggregate); that position is the tie-breaker of the topological sort.
#include "plan/plan_detail.hpp"
#include "plan/schema.hpp"
#include "plan/template_detail.hpp"
#include "policy/policy.hpp"

#include <agentctl/plan.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_set>

namespace agentctl {

std::optional<std::uint32_t> plan::find(std::string_view id) const {
    auto it = index.find(std::string(id));
    if (it == index.end()) return std::nullopt;
    return it->second;
}

namespace detail {

std::size_t child_index_width(std::size_t count) {
    std::size_t largest = count == 0 ? 0 : count - 1;
    std::size_t digits = 1;
    while (largest >= 10) {
        largest /= 10;
        ++digits;
    }
    return std::max<std::size_t>(4, digits);
}

std::string child_id(const std::string& parent, std::size_t index, std::size_t width) {
    std::string digits = std::to_string(index);
    std::string out;
    out.reserve(parent.size() + 2 + std::max(width, digits.size()));
    out += parent;
    out += "--";
    if (width > digits.size()) out.append(width - digits.size(), '0');
    out += digits;
    return out;
}

}  // namespace detail

namespace {

// The total number of tasks when budgets.maxTasks does not say: keeps a typo in maxItems
// from asking for millions of nodes.
constexpr std::uint64_t hard_max_tasks = 1000000;

std::string task_path(std::size_t i) {
    return "spec.tasks[" + std::to_string(i) + "]";
}
std::string action_path(const action_spec& a) {
    return "spec.actions." + a.name;
}

/// Which template roots a place accepts.
struct root_set {
    bool inputs = false;
    bool vars = false;
    bool with = false;
    bool tasks = false;

    bool allows(template_root r) const {
        switch (r) {
            case template_root::inputs:
                return inputs;
            case template_root::vars:
                return vars;
            case template_root::with:
                return with;
            case template_root::tasks:
                return tasks;
        }
        return false;
    }
};

/// One reference and the dotted document path of the string holding it.
struct site {
    template_ref ref;
    std::string path;
    bool scalar =
        false;  ///< the string is text (embedded, or an argv element): objects and arrays are refused
};

bool any_root(const std::vector<site>& sites, template_root r) {
    return std::any_of(sites.begin(), sites.end(), [r](const site& s) { return s.ref.root == r; });
}

/// Templates of one action's args and cwd, parsed once.
struct action_templates {
    bool templated = false;  ///< an arg or the cwd holds a template
    bool ok = true;          ///< all of them parsed
    std::vector<site> sites;
    std::vector<std::optional<template_string>> args;  ///< per arg; empty when not templated
    std::optional<template_string> cwd;
};

/// A JSON value with its templated strings parsed once, so thousands of children render it
/// without parsing again. Parts without templates are copied from the source as they are.
struct compiled_value {
    enum class kind_t { literal, text, array, object } kind = kind_t::literal;
    const boost::json::value* source = nullptr;
    template_string text;
    std::vector<compiled_value> children;  ///< array items or object member values, in order
};

// Returns false when a templated string does not parse (already reported by parse_sites).
bool compile_value(const boost::json::value& v, compiled_value& out) {
    out.source = &v;
    bool templated = false;
    detail::for_each_templated(v, [&](const std::string&, std::string_view) {
        templated = true;
        return false;
    });
    if (!templated) return true;
    if (v.is_string()) {
        out.kind = compiled_value::kind_t::text;
        detail::template_error e;
        auto ts = detail::parse_template(std::string_view(v.get_string().data(), v.get_string().size()), e);
        if (!ts) return false;
        out.text = std::move(*ts);
        return true;
    }
    bool ok = true;
    out.kind = v.is_array() ? compiled_value::kind_t::array : compiled_value::kind_t::object;
    if (v.is_array()) {
        out.children.resize(v.get_array().size());
        for (std::size_t i = 0; i < out.children.size(); ++i)
            ok = compile_value(v.get_array()[i], out.children[i]) && ok;
    } else {
        out.children.resize(v.get_object().size());
        std::size_t i = 0;
        for (const auto& m : v.get_object()) ok = compile_value(m.value(), out.children[i++]) && ok;
    }
    return ok;
}

std::optional<boost::json::value> render_compiled(const compiled_value& c, const render_context& ctx,
                                                  detail::template_error& error) {
    switch (c.kind) {
        case compiled_value::kind_t::literal:
            return *c.source;
        case compiled_value::kind_t::text:
            return detail::render_parsed(c.text, ctx, error);
        case compiled_value::kind_t::array: {
            boost::json::array out;
            out.reserve(c.children.size());
            for (const auto& child : c.children) {
                auto r = render_compiled(child, ctx, error);
                if (!r) return std::nullopt;
                out.push_back(std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
        case compiled_value::kind_t::object: {
            boost::json::object out;
            out.reserve(c.children.size());
            std::size_t i = 0;
            for (const auto& m : c.source->get_object()) {
                auto r = render_compiled(c.children[i++], ctx, error);
                if (!r) return std::nullopt;
                out.emplace(m.key(), std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
    }
    return std::nullopt;
}

/// What the compiler learns about one declared task before generating nodes.
struct declared_task {
    bool skip = false;  ///< duplicate id: reported and left out
    std::optional<std::uint32_t> action;
    std::vector<std::uint32_t> needs;  ///< declared indices: known, not itself, unique
    boost::json::value with;           ///< the action's `with` merged under the task's
    compiled_value with_compiled;      ///< `with`, parsed for rendering
    std::vector<site> with_sites;
    std::vector<site> when_sites;
    std::optional<condition> when;
    bool templates_ok = true;  ///< with/when parsed and use allowed roots only
    bool with_deferred = false;
    bool argv_deferred = false;

    enum class expansion_t { none, foreach, matrix } expansion = expansion_t::none;
    bool expansion_ok = true;
    std::uint64_t count = 0;                                              ///< children
    const boost::json::array* items = nullptr;                            ///< foreach
    std::vector<std::pair<std::string, const boost::json::array*>> axes;  ///< matrix, by axis name

    std::uint32_t result_node = 0;  ///< single: its node; expanded: its aggregate
};

class compiler {
public:
    compiler(const workflow& wf, const compile_options& options) : wf_(wf), options_(options) {}
    compile_result run();

private:
    void error(std::string code, const std::string& path, std::string message, std::string help = {}) {
        diags_.error(std::move(code), path, std::move(message), std::move(help), wf_.where(path));
    }
    bool first_time(std::string key) { return reported_.insert(std::move(key)).second; }

    void merge_inputs();
    void index_tasks();
    void find_cycles();
    bool parse_sites(const boost::json::value& value, const std::string& base, std::vector<site>& out);
    bool parse_site(std::string_view text, const std::string& path, std::vector<site>& out,
                    bool as_text = false);
    bool check_roots(const std::vector<site>& sites, root_set allowed, std::string_view place);
    bool check_task_refs(const std::vector<site>& sites, std::size_t task, std::string_view via_action);
    void parse_action_templates();
    void parse_task_templates(std::size_t i);
    const boost::json::array* expansion_array(const boost::json::value& v, const std::string& path,
                                              std::string_view what);
    void prepare_expansion(std::size_t i);
    bool check_budgets();
    void generate();
    void make_node(std::size_t i, plan_task::kind_t kind, std::uint64_t k, std::size_t width);
    boost::json::value bindings(const declared_task& t, std::uint64_t k) const;
    bool check_sites(const std::vector<site>& sites, const render_context& ctx, std::size_t i,
                     const std::string& node_id);
    void render_node(plan_task& n, std::size_t i, const boost::json::value& vars);
    void order();
    void check_outputs();
    void list_processes();

    const workflow& wf_;
    const compile_options& options_;
    diagnostics diags_;
    plan out_;
    boost::json::value inputs_;  ///< merged, an object
    std::vector<declared_task> tasks_;
    std::vector<action_templates> actions_;
    std::unordered_map<std::string, std::uint32_t> declared_ids_;
    std::unordered_map<std::string, std::uint32_t> action_ids_;
    std::unordered_set<std::string> reported_;  ///< keys of diagnostics already given
    std::vector<plan_task> nodes_;              ///< generation order
    bool generated_ = false;
};

void compiler::merge_inputs() {
    boost::json::object merged = wf_.inputs;
    std::unordered_set<std::string> warned;
    for (const auto& [key, value] : options_.input_overrides) {
        if (!wf_.inputs.contains(key) && warned.insert(key).second) {
            std::vector<std::string_view> declared;
            for (const auto& m : wf_.inputs) declared.emplace_back(m.key().data(), m.key().size());
            std::string hint = nearest(key, declared);
            std::string message = "input `" + key + "` is not declared in spec.inputs; it is kept";
            diags_.warning(
                "undeclared_input", "spec.inputs." + key, message,
                hint.empty() ? "declare it under spec.inputs with a default" : "did you mean `" + hint + "`?",
                wf_.where("spec.inputs"));
            out_.warnings.push_back(std::move(message));
        }
        merged[key] = value;
    }
    inputs_ = std::move(merged);
}

void compiler::index_tasks() {
    for (std::uint32_t a = 0; a < wf_.actions.size(); ++a) action_ids_.emplace(wf_.actions[a].name, a);
    tasks_.resize(wf_.tasks.size());
    for (std::uint32_t i = 0; i < wf_.tasks.size(); ++i) {
        auto [it, inserted] = declared_ids_.emplace(wf_.tasks[i].id, i);
        if (!inserted) {
            tasks_[i].skip = true;
            error("duplicate_task_id", task_path(i) + ".id",
                  "task id `" + wf_.tasks[i].id + "` is already used by " + task_path(it->second),
                  "give every task a unique id");
        }
    }
    std::vector<std::string_view> action_names, task_names;
    for (const auto& a : wf_.actions) action_names.push_back(a.name);
    for (const auto& t : wf_.tasks) task_names.push_back(t.id);
    for (std::uint32_t i = 0; i < wf_.tasks.size(); ++i) {
        const task_spec& spec = wf_.tasks[i];
        declared_task& t = tasks_[i];
        if (auto it = action_ids_.find(spec.action); it != action_ids_.end()) {
            t.action = it->second;
        } else {
            std::string hint = nearest(spec.action, action_names);
            error("unknown_action", task_path(i) + ".uses",
                  "task `" + spec.id + "` uses `" + spec.uses + "`, but spec.actions has no `" + spec.action +
                      "`",
                  hint.empty() ? "declare the action under spec.actions"
                               : "did you mean `action:" + hint + "`?");
        }
        for (std::size_t j = 0; j < spec.needs.size(); ++j) {
            const std::string& need = spec.needs[j];
            const std::string path = task_path(i) + ".needs[" + std::to_string(j) + "]";
            auto it = declared_ids_.find(need);
            if (it == declared_ids_.end()) {
                std::string hint = nearest(need, task_names);
                error("unknown_need", path,
                      "task `" + spec.id + "` needs `" + need + "`, which is not a task id",
                      hint.empty() ? "list ids of tasks declared in spec.tasks"
                                   : "did you mean `" + hint + "`?");
            } else if (it->second == i) {
                error("dependency_cycle", path, "dependency cycle: " + spec.id + " -> " + spec.id,
                      "a task cannot need itself");
            } else if (std::find(t.needs.begin(), t.needs.end(), it->second) == t.needs.end()) {
                t.needs.push_back(it->second);
            }
        }
    }
}

// Tarjan's strongly connected components over `needs`; one diagnostic per component
// (self-needs were reported already), showing one cycle through its first declared task.
void compiler::find_cycles() {
    const std::size_t n = tasks_.size();
    constexpr std::uint32_t unvisited = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> index(n, unvisited), low(n, 0), component(n, unvisited);
    std::vector<bool> on_stack(n, false);
    std::vector<std::uint32_t> stack;
    std::vector<std::pair<std::uint32_t, std::size_t>> calls;
    std::vector<std::vector<std::uint32_t>> components;
    std::uint32_t counter = 0;
    for (std::uint32_t s = 0; s < n; ++s) {
        if (index[s] != unvisited || tasks_[s].skip) continue;
        index[s] = low[s] = counter++;
        stack.push_back(s);
        on_stack[s] = true;
        calls.emplace_back(s, 0);
        while (!calls.empty()) {
            std::uint32_t v = calls.back().first;
            std::size_t& pos = calls.back().second;
            if (pos < tasks_[v].needs.size()) {
                std::uint32_t w = tasks_[v].needs[pos++];
                if (index[w] == unvisited) {
                    index[w] = low[w] = counter++;
                    stack.push_back(w);
                    on_stack[w] = true;
                    calls.emplace_back(w, 0);
                } else if (on_stack[w]) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            if (low[v] == index[v]) {
                std::vector<std::uint32_t> members;
                std::uint32_t w;
                do {
                    w = stack.back();
                    stack.pop_back();
                    on_stack[w] = false;
                    members.push_back(w);
                } while (w != v);
                if (members.size() > 1) components.push_back(std::move(members));
            }
            calls.pop_back();
            if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
        }
    }
    // Report in declaration order of each component's first task.
    for (auto& members : components) std::sort(members.begin(), members.end());
    std::sort(components.begin(), components.end());
    for (std::uint32_t c = 0; c < components.size(); ++c)
        for (auto m : components[c]) component[m] = c;
    for (std::uint32_t c = 0; c < components.size(); ++c) {
        // Shortest path from the first member back to itself, inside the component.
        std::uint32_t start = components[c].front();
        std::vector<std::uint32_t> parent(n, unvisited);
        std::queue<std::uint32_t> queue;
        queue.push(start);
        std::uint32_t last = unvisited;
        while (!queue.empty() && last == unvisited) {
            std::uint32_t v = queue.front();
            queue.pop();
            for (auto w : tasks_[v].needs) {
                if (component[w] != c) continue;
                if (w == start) {
                    last = v;
                    break;
                }
                if (parent[w] == unvisited) {
                    parent[w] = v;
                    queue.push(w);
                }
            }
        }
        if (last == unvisited) continue;  // cannot happen: a component of 2+ tasks has a cycle
        std::vector<std::uint32_t> path{start};
        for (std::uint32_t v = last; v != start; v = parent[v]) path.insert(path.begin() + 1, v);
        std::string text;
        for (auto v : path) text += wf_.tasks[v].id + " -> ";
        text += wf_.tasks[start].id;
        const auto& needs = wf_.tasks[start].needs;
        std::size_t j =
            std::find(needs.begin(), needs.end(), wf_.tasks[path.size() > 1 ? path[1] : start].id) -
            needs.begin();
        error("dependency_cycle", task_path(start) + ".needs[" + std::to_string(j) + "]",
              "dependency cycle: " + text, "remove one of these needs so the tasks can be ordered");
    }
}

bool compiler::parse_site(std::string_view text, const std::string& path, std::vector<site>& out,
                          bool as_text) {
    detail::template_error e;
    auto ts = detail::parse_template(text, e);
    if (!ts) {
        if (first_time(e.code + "|" + path))
            error(e.code, path, e.message, "templates are `${{ root.path }}`");
        return false;
    }
    const bool scalar = as_text || !ts->is_single_ref();
    for (auto& part : ts->parts)
        if (part.ref) out.push_back({std::move(*part.ref), path, scalar});
    return true;
}

bool compiler::parse_sites(const boost::json::value& value, const std::string& base, std::vector<site>& out) {
    bool ok = true;
    detail::for_each_templated(value, [&](const std::string& sub, std::string_view text) {
        ok = parse_site(text, base + sub, out) && ok;
        return true;
    });
    return ok;
}

bool compiler::check_roots(const std::vector<site>& sites, root_set allowed, std::string_view place) {
    bool ok = true;
    for (const auto& s : sites) {
        if (allowed.allows(s.ref.root)) continue;
        ok = false;
        std::string why;
        switch (s.ref.root) {
            case template_root::with:
                why = "`with.` is the task's input: use it in action args and cwd";
                break;
            case template_root::vars:
                why = "`vars.` holds foreach/matrix bindings: use it in task with, when, args, cwd";
                break;
            case template_root::tasks:
                why = "task outputs are not known when " + std::string(place) + " is evaluated";
                break;
            case template_root::inputs:
                why = "use literal values here";
                break;
        }
        if (first_time("root|" + s.path + "|" + s.ref.text))
            error("template_unknown_root", s.path,
                  "`${{ " + s.ref.text + " }}`: this root is not available in " + std::string(place), why);
    }
    return ok;
}

// `tasks.X.output` must name a declared task that task `i` needs.
bool compiler::check_task_refs(const std::vector<site>& sites, std::size_t i, std::string_view via_action) {
    bool ok = true;
    const task_spec& spec = wf_.tasks[i];
    for (const auto& s : sites) {
        if (s.ref.root != template_root::tasks) continue;
        std::string id(s.ref.task_id());
        std::string who = via_action.empty()
                              ? "task `" + spec.id + "`"
                              : "task `" + spec.id + "` (through action `" + std::string(via_action) + "`)";
        auto it = declared_ids_.find(id);
        if (it == declared_ids_.end()) {
            ok = false;
            std::vector<std::string_view> names;
            for (const auto& t : wf_.tasks) names.push_back(t.id);
            std::string hint = nearest(id, names);
            if (first_time("task|" + s.path + "|" + id))
                error(
                    "template_unknown_task", s.path,
                    "`${{ " + s.ref.text + " }}`: there is no task `" + id + "`",
                    hint.empty() ? "refer to a task declared in spec.tasks" : "did you mean `" + hint + "`?");
        } else if (std::find(tasks_[i].needs.begin(), tasks_[i].needs.end(), it->second) ==
                   tasks_[i].needs.end()) {
            ok = false;
            if (first_time("need|" + std::to_string(i) + "|" + s.path + "|" + id))
                error("template_missing_need", s.path,
                      who + " refers to `tasks." + id + ".output` but does not need `" + id + "`",
                      "add `" + id + "` to the needs of `" + spec.id + "`");
        }
    }
    return ok;
}

void compiler::parse_action_templates() {
    actions_.resize(wf_.actions.size());
    for (std::size_t a = 0; a < wf_.actions.size(); ++a) {
        const action_spec& act = wf_.actions[a];
        action_templates& at = actions_[a];
        // Only templated strings are kept parsed; the others are copied as they are.
        auto parsed = [](std::string_view text) -> std::optional<template_string> {
            if (!looks_templated(text)) return std::nullopt;
            detail::template_error e;
            return detail::parse_template(text, e);
        };
        for (std::size_t j = 0; j < act.args.size(); ++j) {
            if (!looks_templated(act.args[j])) continue;
            at.templated = true;
            const std::string path = action_path(act) + ".args[" + std::to_string(j) + "]";
            at.ok = parse_site(act.args[j], path, at.sites, true) && at.ok;
        }
        if (act.cwd && looks_templated(*act.cwd)) {
            at.templated = true;
            at.ok = parse_site(*act.cwd, action_path(act) + ".cwd", at.sites, true) && at.ok;
        }
        if (!at.templated || !at.ok) continue;
        for (const auto& arg : act.args) at.args.push_back(parsed(arg));
        if (act.cwd) at.cwd = parsed(*act.cwd);
    }
}

void compiler::parse_task_templates(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    declared_task& t = tasks_[i];
    const action_spec* act = t.action ? &wf_.actions[*t.action] : nullptr;

    // `with`: the action's default object, then the task's members over it.
    bool ok = true;
    if (act && act->with.is_object() && (spec.with.is_object() || spec.with.is_null())) {
        boost::json::object merged = act->with.get_object();
        for (const auto& m : act->with.get_object()) {
            if (spec.with.is_object() && spec.with.get_object().contains(m.key())) continue;
            std::string base = action_path(*act) + ".with." + std::string(m.key());
            ok = parse_sites(m.value(), base, t.with_sites) && ok;
        }
        if (spec.with.is_object())
            for (const auto& m : spec.with.get_object()) merged[m.key()] = m.value();
        t.with = std::move(merged);
    } else if (!spec.with.is_null()) {
        t.with = spec.with;
    } else {
        t.with = boost::json::object();
    }
    ok = parse_sites(spec.with, task_path(i) + ".with", t.with_sites) && ok;
    ok = check_roots(t.with_sites, {.inputs = true, .vars = true, .tasks = true}, "task `with`") && ok;
    ok = check_task_refs(t.with_sites, i, "") && ok;

    if (spec.when) {
        detail::template_error e;
        auto c = detail::parse_condition(*spec.when, e);
        const std::string path = task_path(i) + ".when";
        if (!c) {
            ok = false;
            error(e.code == "template_syntax" ? "invalid_condition" : e.code, path, e.message,
                  "write `path`, `not path` or `path OP literal` (OP: == != < <= > >=)");
        } else {
            t.when_sites.push_back({c->left, path});
            t.when = std::move(*c);
            ok = check_roots(t.when_sites, {.inputs = true, .vars = true, .tasks = true}, "`when`") && ok;
            ok = check_task_refs(t.when_sites, i, "") && ok;
        }
    }
    t.templates_ok = ok && compile_value(t.with, t.with_compiled);
    t.with_deferred = any_root(t.with_sites, template_root::tasks);

    if (act && t.action && actions_[*t.action].templated) {
        const action_templates& at = actions_[*t.action];
        check_task_refs(at.sites, i, act->name);
        t.argv_deferred = any_root(at.sites, template_root::tasks) ||
                          (t.with_deferred && any_root(at.sites, template_root::with));
    }
}

// The array behind foreach items or a matrix axis: a literal array, or exactly one
// `inputs.` template resolving to one.
const boost::json::array* compiler::expansion_array(const boost::json::value& v, const std::string& path,
                                                    std::string_view what) {
    if (v.is_array()) return &v.get_array();
    if (!v.is_string()) {
        error("foreach_items_not_array", path,
              std::string(what) + " must be an array or one `${{ inputs.NAME }}`",
              "write a YAML list, or refer to an input holding one");
        return nullptr;
    }
    std::string_view text(v.get_string().data(), v.get_string().size());
    std::vector<site> sites;
    detail::template_error e;
    auto ts = detail::parse_template(text, e);
    if (!ts) {
        error(e.code, path, e.message, "templates are `${{ root.path }}`");
        return nullptr;
    }
    if (!ts->is_single_ref()) {
        error("foreach_items_not_array", path,
              std::string(what) + " `" + std::string(text) + "` is text, not an array",
              "write a YAML list, or exactly one `${{ inputs.NAME }}` referring to a list");
        return nullptr;
    }
    sites.push_back({*ts->parts[0].ref, path});
    if (!check_roots(sites, {.inputs = true}, std::string(what) + " (expanded at compile time)"))
        return nullptr;
    render_context ctx;
    ctx.inputs = &inputs_;
    const boost::json::value* r = detail::resolve(sites[0].ref, ctx, e);
    if (!r) {
        error(e.code, path, e.message, "declare the input in spec.inputs or pass it with --input");
        return nullptr;
    }
    if (!r->is_array()) {
        error("foreach_items_not_array", path,
              std::string(what) + " `" + std::string(text) + "` is " + to_json(*r).substr(0, 60) +
                  ", not an array",
              "the input must hold a list");
        return nullptr;
    }
    return &r->get_array();
}

void compiler::prepare_expansion(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    declared_task& t = tasks_[i];
    std::uint64_t max_items = 0;
    std::string path;
    if (spec.foreach) {
        t.expansion = declared_task::expansion_t::foreach;
        path = task_path(i) + ".foreach";
        max_items = spec.foreach->max_items;
        if (spec.foreach->as == "foreachIndex") {
            error("invalid_value", path + ".as", "`as: foreachIndex` would hide the item index",
                  "choose another name, e.g. `item`");
            t.expansion_ok = false;
        }
        t.items = expansion_array(spec.foreach->items, path + ".items", "foreach items");
        if (!t.items) {
            t.expansion_ok = false;
            return;
        }
        t.count = t.items->size();
        path += ".items";
    } else if (spec.matrix) {
        t.expansion = declared_task::expansion_t::matrix;
        path = task_path(i) + ".matrix";
        max_items = spec.matrix->max_items;
        t.count = spec.matrix->axes.empty() ? 0 : 1;
        for (const auto& [name, value] : spec.matrix->axes) {
            const auto* a = expansion_array(value, path + ".axes." + name, "matrix axis `" + name + "`");
            if (!a) {
                t.expansion_ok = false;
                continue;
            }
            t.axes.emplace_back(name, a);
            // Saturate instead of overflowing: anything this large is refused below.
            t.count = a->empty() || t.count <= std::numeric_limits<std::uint64_t>::max() / a->size()
                          ? t.count * a->size()
                          : std::numeric_limits<std::uint64_t>::max();
        }
        if (!t.expansion_ok) return;
        std::sort(t.axes.begin(), t.axes.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        path += ".axes";
    } else {
        return;
    }
    const std::string what = t.expansion == declared_task::expansion_t::foreach ? "foreach" : "matrix";
    if (t.count > max_items) {
        t.expansion_ok = false;
        error("expansion_too_large", path,
              "task `" + spec.id + "` expands to " + std::to_string(t.count) + " children, more than " +
                  what + ".maxItems (" + std::to_string(max_items) + ")",
              "raise " + what + ".maxItems (up to " + std::to_string(limits::max_max_items) +
                  ") or split the work");
    } else if (wf_.runtime.budgets.max_expansion_items &&
               t.count > *wf_.runtime.budgets.max_expansion_items) {
        t.expansion_ok = false;
        error("expansion_too_large", path,
              "task `" + spec.id + "` expands to " + std::to_string(t.count) +
                  " children, more than spec.runtime.budgets.maxExpansionItems (" +
                  std::to_string(*wf_.runtime.budgets.max_expansion_items) + ")",
              "raise spec.runtime.budgets.maxExpansionItems or split the work");
    }
}

// Counts the tasks that would run; false when generating them would exceed a budget.
bool compiler::check_budgets() {
    std::uint64_t total = 0;
    for (const auto& t : tasks_) {
        if (t.skip) continue;
        std::uint64_t add =
            t.expansion == declared_task::expansion_t::none ? 1 : (t.expansion_ok ? t.count : 0);
        total = std::min(total + add, std::numeric_limits<std::uint64_t>::max() / 2);
    }
    if (const auto& max = wf_.runtime.budgets.max_tasks; max && total > *max) {
        error("budget_max_tasks", "spec.runtime.budgets.maxTasks",
              "the plan has " + std::to_string(total) +
                  " tasks after expansion, more than budgets.maxTasks (" + std::to_string(*max) + ")",
              "raise spec.runtime.budgets.maxTasks or expand fewer items");
        return false;
    }
    if (!wf_.runtime.budgets.max_tasks && total > hard_max_tasks) {
        error("budget_max_tasks", "spec.tasks",
              "the plan has " + std::to_string(total) + " tasks after expansion, more than " +
                  std::to_string(hard_max_tasks) + " (the limit when budgets.maxTasks is not set)",
              "set spec.runtime.budgets.maxTasks to allow more, or expand fewer items");
        return false;
    }
    return true;
}

boost::json::value compiler::bindings(const declared_task& t, std::uint64_t k) const {
    const task_spec& spec = wf_.tasks[&t - tasks_.data()];
    boost::json::object vars;
    if (t.expansion == declared_task::expansion_t::foreach) {
        vars.reserve(2);
        vars.emplace(spec.foreach->as, (*t.items)[k]);
        vars.emplace("foreachIndex", static_cast<std::int64_t>(k));
    } else {
        boost::json::object cell;
        cell.reserve(t.axes.size());
        // Mixed radix, last axis fastest: the product ordered by axis name, then values.
        std::uint64_t rest = k;
        std::vector<std::size_t> digits(t.axes.size());
        for (std::size_t a = t.axes.size(); a-- > 0;) {
            digits[a] = rest % t.axes[a].second->size();
            rest /= t.axes[a].second->size();
        }
        for (std::size_t a = 0; a < t.axes.size(); ++a)
            cell.emplace(t.axes[a].first, (*t.axes[a].second)[digits[a]]);
        vars.reserve(2);
        vars.emplace("matrix", std::move(cell));
        vars.emplace("matrixIndex", static_cast<std::int64_t>(k));
    }
    return vars;
}

// Resolves every `inputs.`, `vars.` (and, when bound, `with.`) reference; task outputs are
// checked against `needs` elsewhere. One diagnostic per declared task and reference.
bool compiler::check_sites(const std::vector<site>& sites, const render_context& ctx, std::size_t i,
                           const std::string& node_id) {
    bool ok = true;
    const declared_task& t = tasks_[i];
    for (const auto& s : sites) {
        if (s.ref.root == template_root::tasks || (s.ref.root == template_root::with && !ctx.with)) continue;
        detail::template_error e;
        if (const boost::json::value* v = detail::resolve(s.ref, ctx, e)) {
            if (!s.scalar || !(v->is_object() || v->is_array())) continue;
            ok = false;
            if (first_time("scalar|" + std::to_string(i) + "|" + s.path + "|" + s.ref.text))
                error("template_not_scalar", s.path,
                      "`${{ " + s.ref.text + " }}` is " + (v->is_object() ? "an object" : "an array") +
                          " and cannot be embedded in text (in `" + node_id + "`)",
                      "only a string that is exactly one template may hold an object or array; argv elements "
                      "and "
                      "cwd are always text");
            continue;
        }
        ok = false;
        if (!first_time("path|" + std::to_string(i) + "|" + s.path + "|" + s.ref.text)) continue;
        std::string help;
        if (s.ref.root == template_root::vars) {
            if (t.expansion == declared_task::expansion_t::none)
                help =
                    "task `" + wf_.tasks[i].id + "` has no foreach or matrix, so nothing is bound to `vars.`";
            else if (t.expansion == declared_task::expansion_t::foreach)
                help = "this task binds `vars." + wf_.tasks[i].foreach->as + "` and `vars.foreachIndex`";
            else
                help = "this task binds `vars.matrix.<axis>` and `vars.matrixIndex`";
        } else if (s.ref.root == template_root::inputs) {
            std::string names;
            for (const auto& m : inputs_.get_object())
                names += (names.empty() ? "" : ", ") + std::string(m.key());
            help = "inputs are: " + (names.empty() ? std::string("(none)") : names);
        } else {
            help = "the task's `with` has no such member";
        }
        std::string where = node_id == wf_.tasks[i].id ? "task `" + node_id + "`" : "`" + node_id + "`";
        error("template_missing_path", s.path, e.message + " (in " + where + ")", help);
    }
    return ok;
}

void compiler::render_node(plan_task& n, std::size_t i, const boost::json::value& vars) {
    declared_task& t = tasks_[i];
    render_context ctx;
    ctx.inputs = &inputs_;
    ctx.vars = &vars;
    bool ok = check_sites(t.with_sites, ctx, i, n.id);
    ok = check_sites(t.when_sites, ctx, i, n.id) && ok && t.templates_ok;
    if (t.with_deferred || !ok) {
        n.with = t.with;
        n.with_deferred = t.with_deferred;
    } else {
        detail::template_error e;
        auto rendered = render_compiled(t.with_compiled, ctx, e);
        if (rendered) {
            n.with = std::move(*rendered);
        } else {
            ok = false;
            n.with = t.with;
            if (first_time("render|" + std::to_string(i) + "|" + e.code))
                error(e.code, task_path(i) + ".with", e.message + " (in `" + n.id + "`)",
                      "embed scalars only; pass objects and arrays as a whole value");
        }
    }
    if (!t.action || !actions_[*t.action].templated) return;
    const action_templates& at = actions_[*t.action];
    const action_spec& act = wf_.actions[*t.action];
    if (t.argv_deferred) {
        n.argv_deferred = true;
        if (at.ok && ok) check_sites(at.sites, ctx, i, n.id);
        return;
    }
    if (!at.ok || !ok) return;
    ctx.with = &n.with;
    if (!check_sites(at.sites, ctx, i, n.id)) return;
    std::vector<std::string> args;
    args.reserve(act.args.size());
    for (std::size_t j = 0; j < act.args.size(); ++j) {
        if (!at.args[j]) {
            args.push_back(act.args[j]);
            continue;
        }
        detail::template_error e;
        auto r = detail::render_parsed_text(*at.args[j], ctx, e);
        if (!r) {
            std::string path = action_path(act) + ".args[" + std::to_string(j) + "]";
            if (first_time("render|" + std::to_string(i) + "|" + path))
                error(e.code, path, e.message + " (in `" + n.id + "`)",
                      "each argument must render to one string");
            return;
        }
        args.push_back(std::move(*r));
    }
    n.args = std::move(args);
    if (act.cwd) {
        detail::template_error e;
        const std::string path = action_path(act) + ".cwd";
        auto r = at.cwd ? detail::render_parsed_text(*at.cwd, ctx, e) : std::optional<std::string>(*act.cwd);
        if (!r) {
            if (first_time("render|" + std::to_string(i) + "|" + path))
                error(e.code, path, e.message + " (in `" + n.id + "`)",
                      "cwd must render to one relative path");
            return;
        }
        std::string_view problem = policy::cwd_problem(*r);
        if (!problem.empty()) {
            if (first_time("cwd|" + std::to_string(i)))
                error(std::string(problem), path, "cwd renders to `" + *r + "` for `" + n.id + "`",
                      problem == "invalid_cwd" ? "cwd must be a non-empty path relative to workspaceRoot"
                                               : "cwd must stay inside workspaceRoot: no `..` components");
            return;
        }
        n.cwd = std::move(*r);
    }
}

void compiler::make_node(std::size_t i, plan_task::kind_t kind, std::uint64_t k, std::size_t width) {
    const task_spec& spec = wf_.tasks[i];
    const declared_task& t = tasks_[i];
    // Built in place: nodes_ was reserved for every node, so references stay valid.
    plan_task& n = nodes_.emplace_back();
    const auto self = static_cast<std::uint32_t>(nodes_.size() - 1);
    n.kind = kind;
    n.declared_index = static_cast<std::uint32_t>(i);
    n.action_index = t.action.value_or(0);
    n.failure = spec.failure;
    if (t.expansion == declared_task::expansion_t::foreach) n.expansion = plan_task::expansion_t::foreach;
    if (t.expansion == declared_task::expansion_t::matrix) n.expansion = plan_task::expansion_t::matrix;
    if (kind == plan_task::kind_t::child) {
        n.id = detail::child_id(spec.id, k, width);
        n.parent = spec.id;
        n.expansion_index = static_cast<std::uint32_t>(k);
    } else {
        n.id = spec.id;
    }
    auto [it, inserted] = out_.index.emplace(n.id, self);
    if (!inserted) {
        const plan_task& other = nodes_[it->second];
        std::string message = kind == plan_task::kind_t::child
                                  ? "task `" + spec.id + "` generates the child id `" + n.id + "`, which " +
                                        task_path(other.declared_index) + " also has"
                                  : "task id `" + n.id + "` is also the id of a child of `" + other.parent +
                                        "` (" + task_path(other.declared_index) + ")";
        error("duplicate_task_id", task_path(i) + ".id", message,
              "rename one of the tasks: children of an expanded task are `PARENT--NNNN`");
    }
    if (kind == plan_task::kind_t::aggregate) {
        // Children were generated just before, in item order.
        auto first = static_cast<std::uint32_t>(self - t.count);
        n.children.reserve(t.count);
        for (std::uint32_t c = 0; c < t.count; ++c) n.children.push_back(first + c);
        n.needs = n.children;
        n.timeout_ms = wf_.runtime.default_timeout_ms;
        return;
    }
    n.needs.reserve(t.needs.size());
    for (auto d : t.needs) n.needs.push_back(tasks_[d].result_node);
    n.retry = spec.retry;
    n.when = t.when;
    n.timeout_ms = wf_.runtime.default_timeout_ms;
    if (t.action) {
        const action_spec& act = wf_.actions[*t.action];
        n.timeout_ms = act.timeout_ms.value_or(spec.timeout_ms.value_or(n.timeout_ms));
        n.limits = {act.stdout_limit_bytes, act.stderr_limit_bytes, act.combined_output_limit_bytes};
        n.requires_approval = act.is_process() && wf_.policy.approval != approval_mode::never;
    } else {
        n.timeout_ms = spec.timeout_ms.value_or(n.timeout_ms);
    }
    boost::json::value vars = kind == plan_task::kind_t::child ? bindings(t, k) : boost::json::object();
    render_node(n, i, vars);
    n.vars = std::move(vars.get_object());
}

void compiler::generate() {
    std::uint32_t position = 0;
    for (auto& t : tasks_) {
        if (t.skip) continue;
        bool children = t.expansion != declared_task::expansion_t::none && t.expansion_ok;
        t.result_node = position + static_cast<std::uint32_t>(children ? t.count : 0);
        position = t.result_node + 1;
    }
    nodes_.reserve(position);
    out_.index.reserve(position);
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const declared_task& t = tasks_[i];
        if (t.skip) continue;
        if (t.expansion == declared_task::expansion_t::none) {
            make_node(i, plan_task::kind_t::single, 0, 0);
            continue;
        }
        std::uint64_t count = t.expansion_ok ? t.count : 0;
        std::size_t width = detail::child_index_width(count);
        for (std::uint64_t k = 0; k < count; ++k) make_node(i, plan_task::kind_t::child, k, width);
        if (!t.expansion_ok) tasks_[i].count = 0;
        make_node(i, plan_task::kind_t::aggregate, 0, 0);
    }
    generated_ = true;
}

// Kahn's algorithm; among ready nodes the one generated first goes first, which is
// declaration order with children in item order.
void compiler::order() {
    const std::size_t n = nodes_.size();
    std::vector<std::uint32_t> pending(n), first_dependant(n + 1, 0), dependants;
    for (std::size_t v = 0; v < n; ++v) {
        pending[v] = static_cast<std::uint32_t>(nodes_[v].needs.size());
        for (auto d : nodes_[v].needs) ++first_dependant[d + 1];
    }
    for (std::size_t v = 0; v < n; ++v) first_dependant[v + 1] += first_dependant[v];
    dependants.resize(first_dependant[n]);
    {
        std::vector<std::uint32_t> fill(first_dependant.begin(), first_dependant.end() - 1);
        for (std::uint32_t v = 0; v < n; ++v)
            for (auto d : nodes_[v].needs) dependants[fill[d]++] = v;
    }
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
    for (std::uint32_t v = 0; v < n; ++v)
        if (pending[v] == 0) ready.push(v);
    std::vector<std::uint32_t> position(n, 0);
    std::vector<std::uint32_t> sequence;
    sequence.reserve(n);
    while (!ready.empty()) {
        std::uint32_t v = ready.top();
        ready.pop();
        position[v] = static_cast<std::uint32_t>(sequence.size());
        sequence.push_back(v);
        for (std::uint32_t e = first_dependant[v]; e < first_dependant[v + 1]; ++e)
            if (--pending[dependants[e]] == 0) ready.push(dependants[e]);
    }
    // Cycles among declared tasks were refused earlier, so every node is placed. Usually the
    // generation order is already topological and nothing moves.
    bool moved = false;
    for (std::uint32_t v = 0; v < n && !moved; ++v) moved = sequence[v] != v;
    if (!moved) {
        out_.tasks = std::move(nodes_);
        return;
    }
    out_.tasks.reserve(n);
    for (auto v : sequence) {
        plan_task& node = nodes_[v];
        for (auto& d : node.needs) d = position[d];
        for (auto& c : node.children) c = position[c];
        out_.tasks.push_back(std::move(node));
    }
    for (auto& entry : out_.index) entry.second = position[entry.second];
    nodes_.clear();
}

void compiler::check_outputs() {
    for (const auto& m : wf_.outputs) {
        std::vector<site> sites;
        const std::string base = "spec.outputs." + std::string(m.key());
        if (!parse_sites(m.value(), base, sites)) continue;
        check_roots(sites, {.inputs = true, .tasks = true}, "spec.outputs");
        render_context ctx;
        ctx.inputs = &inputs_;
        for (const auto& s : sites) {
            detail::template_error e;
            if (s.ref.root == template_root::inputs && !detail::resolve(s.ref, ctx, e)) {
                error("template_missing_path", s.path, e.message, "declare the input in spec.inputs");
            } else if (s.ref.root == template_root::tasks && generated_ &&
                       !out_.index.contains(std::string(s.ref.task_id())) &&
                       !declared_ids_.contains(std::string(s.ref.task_id()))) {
                error("template_unknown_task", s.path,
                      "`${{ " + s.ref.text + " }}`: there is no task `" + std::string(s.ref.task_id()) + "`",
                      "refer to a task of the plan");
            }
        }
    }
}

void compiler::list_processes() {
    constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> process_of(wf_.actions.size(), none);
    for (std::uint32_t a = 0; a < wf_.actions.size(); ++a) {
        const action_spec& act = wf_.actions[a];
        if (!act.is_process()) continue;
        plan_process p;
        p.action_index = a;
        if (act.isolation == isolation_mode::container && act.container) {
            switch (act.container->runtime) {
                case engine_choice::auto_select:
                    p.engines = {"docker", "podman"};
                    break;
                case engine_choice::docker:
                    p.engines = {"docker"};
                    break;
                case engine_choice::podman:
                    p.engines = {"podman"};
                    break;
            }
        }
        process_of[a] = static_cast<std::uint32_t>(out_.processes.size());
        out_.processes.push_back(std::move(p));
    }
    // Declared ids in plan order (an expanded task where its first child is).
    std::vector<bool> seen(wf_.tasks.size(), false);
    for (const auto& t : out_.tasks) {
        if (seen[t.declared_index]) continue;
        seen[t.declared_index] = true;
        std::uint32_t a = t.action_index;
        if (process_of[a] != none)
            out_.processes[process_of[a]].tasks.push_back(wf_.tasks[t.declared_index].id);
    }
}

compile_result compiler::run() {
    out_.workflow_name = wf_.metadata.name;
    out_.workflow_digest = wf_.source_digest;
    out_.max_concurrency = wf_.runtime.max_concurrency.value_or(1);
    out_.kill_grace_seconds = wf_.runtime.kill_grace_seconds;
    out_.budgets = wf_.runtime.budgets;
    out_.policy = wf_.policy;
    out_.actions = wf_.actions;
    out_.outputs = wf_.outputs;

    merge_inputs();
    policy::check_policy(wf_, diags_);
    check_extension_schemas(wf_, diags_);
    index_tasks();
    find_cycles();
    parse_action_templates();
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        if (tasks_[i].skip) continue;
        parse_task_templates(i);
        prepare_expansion(i);
    }
    if (check_budgets()) generate();
    check_outputs();
    if (diags_.has_errors()) return {std::nullopt, std::move(diags_)};
    order();
    list_processes();
    out_.inputs = std::move(inputs_.get_object());
    out_.plan_digest = detail::compute_plan_digest(out_);
    return {std::move(out_), std::move(diags_)};
}

}  // namespace

compile_result compile(const workflow& wf, const compile_options& options) {
    try {
        return compiler(wf, options).run();
    } catch (const std::exception& e) {
        // Only allocation failures are expected here; they must not escape the front end.
        compile_result r;
        r.diags.error("internal_error", "", std::string("the plan could not be compiled: ") + e.what());
        return r;
    }
}

}  // namespace agentctl
