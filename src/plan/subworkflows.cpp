// Sub-workflows flattened into the static graph before anything else is compiled
// (docs/CONTROL_FLOW.md, "Sub-workflows").
//
// An invocation `I` of definition `D` at version `V` becomes, where `I` was declared:
//   I--inputs-H   the input boundary (H: the first 8 hex digits of sha256("D@V")): the
//                 invocation's needs, D's inputs under the invocation's `with`, inputSchema;
//   I--t          each local task t of D, its needs and templates rewritten into the namespace,
//                 needing the boundary besides its own needs (a nested invocation recursively);
//   I             the aggregate: needs the boundary and every local task, D's outputs, outputSchema.
// The compiler then sees only ordinary tasks and these two kinds of pure nodes, so every later
// check (ids, needs, cycles, templates, routes, budgets) applies to them unchanged; each flat
// task keeps the document path it was written at, for diagnostics.
#include "json/sha256.hpp"
#include "plan/compiler.hpp"
#include "plan/schema.hpp"

#include <algorithm>

namespace agentctl::plan_compiler {
namespace {

bool is_path_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

// How the names of one definition's body map into an invocation's namespace.
struct scope {
    std::string prefix;    ///< the invocation's namespaced id
    std::string boundary;  ///< the input boundary's id
    std::unordered_set<std::string> locals;
};

// One `${{ ... }}` expression with `inputs` and `tasks.LOCAL` renamed; quoted literals of a
// condition are left alone.
std::string rewrite_expression(std::string_view e, const scope& s) {
    std::string out;
    for (std::size_t i = 0; i < e.size();) {
        const char c = e[i];
        if (c == '"' || c == '\'') {
            std::size_t end = e.find(c, i + 1);
            end = end == std::string_view::npos ? e.size() : end + 1;
            out.append(e.substr(i, end - i));
            i = end;
            continue;
        }
        const bool starts = i == 0 || !is_path_char(e[i - 1]);
        auto word = [&](std::string_view w) {
            return starts && e.substr(i, w.size()) == w &&
                   (i + w.size() == e.size() || !is_path_char(e[i + w.size()]) || e[i + w.size()] == '.');
        };
        if (word("inputs")) {
            out += "tasks." + s.boundary + ".output";
            i += 6;
            continue;
        }
        if (word("tasks") && i + 5 < e.size() && e[i + 5] == '.') {
            std::size_t b = i + 6, end = b;
            while (end < e.size() && is_path_char(e[end]) && e[end] != '.') ++end;
            std::string id(e.substr(b, end - b));
            out += "tasks.";
            out += s.locals.contains(id) ? s.prefix + "--" + id : id;
            i = end;
            continue;
        }
        out += c;
        ++i;
    }
    return out;
}

std::string rewrite_text(std::string_view text, const scope& s) {
    std::string out;
    std::size_t at = 0;
    for (;;) {
        std::size_t open = text.find("${{", at);
        if (open == std::string_view::npos) break;
        std::size_t close = text.find("}}", open + 3);
        if (close == std::string_view::npos) break;  // a syntax error, reported as written
        out.append(text.substr(at, open + 3 - at));
        out += rewrite_expression(text.substr(open + 3, close - open - 3), s);
        at = close;
    }
    out.append(text.substr(at));
    return out;
}

void rewrite_value(boost::json::value& v, const scope& s) {
    if (auto* str = v.if_string()) {
        std::string_view text(str->data(), str->size());
        if (text.find("${{") != std::string_view::npos) *str = rewrite_text(text, s);
    } else if (auto* a = v.if_array()) {
        for (auto& item : *a) rewrite_value(item, s);
    } else if (auto* o = v.if_object()) {
        for (auto& m : *o) rewrite_value(m.value(), s);
    }
}

void rewrite_object(boost::json::object& o, const scope& s) {
    for (auto& m : o) rewrite_value(m.value(), s);
}

// A name of a definition's body in the invocation's namespace. One that names no local task is
// renamed too, so that it cannot reach outside (it is then reported as an unknown need).
std::string local_id(const scope* s, const std::string& id) {
    return s ? s->prefix + "--" + id : id;
}

// The boundary's digest part: the first 8 hex digits of sha256("NAME@VERSION").
std::string boundary_digest(const subworkflow_spec& d) {
    sha256 h;
    h.update(d.name + "@" + d.version);
    return h.hex().substr(0, 8);
}

class flattener {
public:
    flattener(const workflow& wf, diagnostics& diags, flat_workflow& out)
        : wf_(wf), diags_(diags), out_(out) {}

    void run() {
        for (const auto& d : wf_.subworkflows) check_definition(d);
        std::vector<std::string> stack;
        expand(wf_.tasks, "spec.tasks", nullptr, stack);
    }

private:
    void error(std::string code, const std::string& path, std::string message, std::string help) {
        if (!reported_.insert(code + "|" + path).second) return;
        diags_.error(std::move(code), path, std::move(message), std::move(help), wf_.where(path));
    }

    const subworkflow_spec* find(const std::string& name) const {
        for (const auto& d : wf_.subworkflows)
            if (d.name == name) return &d;
        return nullptr;
    }

    // Schemas are compiled now, as an action's or a task's are (docs/DESIGN.md, "Output schemas").
    void check_definition(const subworkflow_spec& d) {
        const std::string base = "spec.subworkflows." + d.name;
        auto check = [&](std::string_view key, const boost::json::value& document, const std::string& path) {
            if (document.is_null()) return;  // missing: reported by the reader
            for (const auto& p : json_schema::problems(document))
                error("invalid_schema", path,
                      std::string(key) + (p.pointer.empty() ? "" : " at " + p.pointer) +
                          " is not a valid JSON Schema: " + p.error,
                      "write a draft 7 JSON Schema whose $refs point inside it (\"#/definitions/...\")");
        };
        check("inputSchema", d.input_schema, base + ".inputSchema");
        check("outputSchema", d.output_schema, base + ".outputSchema");
        for (std::size_t j = 0; j < d.tasks.size(); ++j)
            if (d.tasks[j].output_schema)
                check("outputSchema", *d.tasks[j].output_schema,
                      base + ".tasks[" + std::to_string(j) + "].outputSchema");
    }

    std::uint32_t push(task_spec t, std::string path, std::optional<plan_subworkflow> role = std::nullopt) {
        out_.wf.tasks.push_back(std::move(t));
        out_.nodes.push_back({std::move(path), std::move(role), std::nullopt});
        return static_cast<std::uint32_t>(out_.wf.tasks.size() - 1);
    }

    // A local task of a definition, renamed into scope `s` (nullptr: a top-level task, as is).
    task_spec renamed(const task_spec& local, const scope* s) {
        task_spec t = local;
        if (!s) return t;
        t.id = s->prefix + "--" + local.id;
        // The boundary last, so that needs[j] still names the document's j-th need.
        for (auto& n : t.needs) n = local_id(s, n);
        t.needs.push_back(s->boundary);
        rewrite_value(t.with, *s);
        rewrite_object(t.vars, *s);
        if (t.when) *t.when = rewrite_text(*t.when, *s);
        if (t.loop) t.loop->condition = rewrite_text(t.loop->condition, *s);
        if (t.foreach) rewrite_value(t.foreach->items, *s);
        if (t.matrix)
            for (auto& [name, values] : t.matrix->axes) rewrite_value(values, *s);
        if (t.route) {
            t.route->select = rewrite_text(t.route->select, *s);
            for (auto& c : t.route->cases)
                for (auto& id : c.tasks) id = local_id(s, id);
            for (auto& id : t.route->otherwise) id = local_id(s, id);
        }
        if (t.compensate) rewrite_value(t.compensate->with, *s);
        return t;
    }

    // `tasks` of the document (base "spec.tasks") or of a definition, into scope `s`.
    void expand(const std::vector<task_spec>& tasks, const std::string& base, const scope* s,
                std::vector<std::string>& stack) {
        for (std::size_t j = 0; j < tasks.size(); ++j) {
            const std::string path = base + "[" + std::to_string(j) + "]";
            if (tasks[j].subworkflow.empty()) {
                push(renamed(tasks[j], s), path);
                continue;
            }
            invoke(tasks[j], path, s, stack);
        }
    }

    void invoke(const task_spec& local, const std::string& path, const scope* s,
                std::vector<std::string>& stack) {
        // What stands for the invocation whatever happens: its aggregate, keeping its id, so
        // that the tasks needing it are not reported as well.
        task_spec aggregate = renamed(local, s);
        aggregate.with = boost::json::object();
        plan_subworkflow role{plan_subworkflow::role_t::aggregate, local.subworkflow, "", aggregate.id, {}};
        const subworkflow_spec* d = find(local.subworkflow);
        if (!d) {
            std::vector<std::string_view> names;
            for (const auto& x : wf_.subworkflows) names.push_back(x.name);
            std::string hint = nearest(local.subworkflow, names);
            error("unknown_subworkflow", path + ".uses",
                  "task `" + local.id + "` uses `" + local.uses + "`, but spec.subworkflows has no `" +
                      local.subworkflow + "`",
                  hint.empty() ? "declare the sub-workflow under spec.subworkflows"
                               : "did you mean `workflow:" + hint + "`?");
            push(std::move(aggregate), path, role);
            return;
        }
        if (std::find(stack.begin(), stack.end(), d->name) != stack.end()) {
            std::string chain;
            for (auto it = std::find(stack.begin(), stack.end(), d->name); it != stack.end(); ++it)
                chain += *it + " -> ";
            error("dependency_cycle", path + ".uses", "sub-workflow cycle: " + chain + d->name,
                  "a sub-workflow cannot invoke itself, directly or through others");
            push(std::move(aggregate), path, role);
            return;
        }
        if (out_.wf.tasks.size() + d->tasks.size() + 2 > hard_max_tasks) {
            error("budget_max_tasks", path + ".uses",
                  "the sub-workflows expand to more than " + std::to_string(hard_max_tasks) + " tasks",
                  "invoke fewer sub-workflows, or nest them less deeply");
            push(std::move(aggregate), path, role);
            return;
        }
        role.version = d->version;

        scope inner;
        inner.prefix = aggregate.id;
        inner.boundary = aggregate.id + "--inputs-" + boundary_digest(*d);
        for (const auto& t : d->tasks) inner.locals.insert(t.id);

        // The boundary: the invocation's needs and `with` (in the caller's names) over the
        // definition's input defaults.
        task_spec input;
        input.id = inner.boundary;
        input.uses = local.uses;
        input.subworkflow = local.subworkflow;
        input.needs = aggregate.needs;
        input.failure = local.failure;
        boost::json::object with = d->inputs;
        boost::json::value given = local.with;
        if (s) rewrite_value(given, *s);
        if (auto* o = given.if_object())
            for (const auto& m : *o) with[m.key()] = m.value();
        input.with = std::move(with);
        input.output_schema = d->input_schema;
        const std::uint32_t boundary_index =
            push(std::move(input), path,
                 plan_subworkflow{plan_subworkflow::role_t::input, d->name, d->version, inner.prefix, {}});

        stack.push_back(d->name);
        expand(d->tasks, "spec.subworkflows." + d->name + ".tasks", &inner, stack);
        stack.pop_back();

        aggregate.needs = {inner.boundary};
        for (const auto& t : d->tasks) {
            role.children.push_back(inner.prefix + "--" + t.id);
            aggregate.needs.push_back(role.children.back());
        }
        boost::json::value outputs = d->outputs;
        rewrite_value(outputs, inner);
        aggregate.with = std::move(outputs);
        aggregate.output_schema = d->output_schema;
        const std::uint32_t a = push(std::move(aggregate), path, std::move(role));
        out_.nodes[a].boundary = boundary_index;
    }

    const workflow& wf_;
    diagnostics& diags_;
    flat_workflow& out_;
    std::unordered_set<std::string> reported_;
};

}  // namespace

bool has_subworkflows(const workflow& wf) {
    if (!wf.subworkflows.empty()) return true;
    return std::any_of(wf.tasks.begin(), wf.tasks.end(),
                       [](const task_spec& t) { return !t.subworkflow.empty(); });
}

void flatten_subworkflows(const workflow& wf, diagnostics& diags, flat_workflow& out) {
    out.source = &wf;
    out.wf.api_version = wf.api_version;
    out.wf.metadata = wf.metadata;
    out.wf.inputs = wf.inputs;
    out.wf.policy = wf.policy;
    out.wf.runtime = wf.runtime;
    out.wf.actions = wf.actions;
    out.wf.outputs = wf.outputs;
    out.wf.vars = wf.vars;
    out.wf.compensation = wf.compensation;
    out.wf.vars_files = wf.vars_files;
    out.wf.loaded_vars_files = wf.loaded_vars_files;
    out.wf.unsupported = wf.unsupported;
    out.wf.output_verbose = wf.output_verbose;
    out.wf.output_show_diff = wf.output_show_diff;
    out.wf.locations = wf.locations;
    out.wf.source_digest = wf.source_digest;
    flattener(wf, diags, out).run();
}

}  // namespace agentctl::plan_compiler
