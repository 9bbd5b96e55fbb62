// Parse and semantic diagnostics of one document, reported together.
//
// A document with parse errors is compiled from its partial model (bad fields left at their
// defaults) to find the semantic problems too. A semantic finding is kept unless a parse error
// could have caused it: one at the same place or inside it (or around it), one in a field the
// finding depends on (a task's uses, needs, foreach and matrix; an action's kind), or one in a
// section a whole class of findings reads (task ids for the graph, spec.policy for policy
// rules, spec.inputs and spec.runtime.budgets for rendering and expansion). docs/DESIGN.md,
// "Plan", lists the rule.
#include <agentctl/plan.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {
namespace {

// `inner` is `outer` or lies inside it: `spec.tasks[0]` holds `spec.tasks[0].needs[1]`.
bool inside(std::string_view inner, std::string_view outer) {
    if (outer.empty()) return true;
    if (inner.substr(0, outer.size()) != outer) return false;
    return inner.size() == outer.size() || inner[outer.size()] == '.' || inner[outer.size()] == '[';
}

bool related(std::string_view a, std::string_view b) {
    return inside(a, b) || inside(b, a);
}

// `spec.tasks[3]` of any path inside a task, `spec.actions.build` of any path inside an
// action; empty otherwise.
std::string_view owner_of(std::string_view path) {
    constexpr std::string_view tasks = "spec.tasks[", actions = "spec.actions.";
    if (path.substr(0, tasks.size()) == tasks) {
        auto close = path.find(']');
        return close == std::string_view::npos ? std::string_view() : path.substr(0, close + 1);
    }
    if (path.substr(0, actions.size()) == actions) {
        auto end = path.find_first_of(".[", actions.size());
        return path.substr(0, end);
    }
    return {};
}

// The first component below `owner`: `needs` of `spec.tasks[3].needs[0]`.
std::string_view field_of(std::string_view path, std::string_view owner) {
    if (path.size() <= owner.size() + 1) return {};
    std::string_view rest = path.substr(owner.size() + 1);
    return rest.substr(0, rest.find_first_of(".["));
}

bool is_one_of(std::string_view code, std::initializer_list<std::string_view> codes) {
    return std::find(codes.begin(), codes.end(), code) != codes.end();
}

// Findings that read every task's id.
bool is_graph_code(std::string_view code) {
    return is_one_of(
        code, {"duplicate_task_id", "unknown_need", "dependency_cycle", "template_unknown_task",
               "template_missing_need", "unknown_route_destination", "route_destination_without_router"});
}

// Findings that read input values or budgets (rendering and expansion).
bool is_data_code(std::string_view code) {
    return is_one_of(code, {"template_missing_path", "template_not_scalar", "foreach_items_not_array",
                            "expansion_too_large", "budget_max_tasks", "invalid_cwd", "policy_path_escape"});
}

/// What the parse errors of a document leave unreliable.
class parse_damage {
public:
    explicit parse_damage(const diagnostics& parsed) {
        for (const auto& d : parsed.items()) {
            if (d.level != severity::error) continue;
            const std::string& p = d.path;
            // A document using features this engine does not run is refused as a whole: what
            // its other parts would mean cannot be judged without them (one diagnostic).
            if (p.empty() || p == "spec" || p == "spec.tasks" || p == "spec.actions" ||
                d.code == "unsupported_feature")
                whole_ = true;
            if (inside(p, "spec.policy")) policy_ = true;
            // A definition is flattened into tasks: what is wrong in it shows everywhere.
            if (inside(p, "spec.subworkflows")) subworkflows_ = true;
            if (inside(p, "spec.inputs") || inside(p, "spec.runtime.budgets")) data_ = true;
            std::string_view owner = owner_of(p);
            // An invalid task id is kept as written; a missing one leaves the task unnamed.
            if (owner.substr(0, 11) == "spec.tasks[" &&
                (p == owner || (field_of(p, owner) == "id" && d.code != "invalid_task_id")))
                ids_ = true;
            if (owner.substr(0, 11) == "spec.tasks[" && field_of(p, owner) == "needs") needs_ = true;
            errors_.push_back(p);
        }
    }

    /// Nothing semantic can be trusted: the document's shape is broken.
    bool whole() const { return whole_; }

    bool explains(const diagnostic& finding) const {
        const std::string& f = finding.path;
        if (is_graph_code(finding.code) && ids_) return true;
        if (is_policy_code(finding.code) && policy_) return true;
        if (is_data_code(finding.code) && data_) return true;
        if (subworkflows_ && (is_graph_code(finding.code) || inside(f, "spec.subworkflows") ||
                              finding.code == "unknown_subworkflow"))
            return true;
        // Whether a destination needs its router is read from that other task's needs.
        if (finding.code == "route_destination_without_router" && needs_) return true;
        std::string_view owner = owner_of(f);
        const bool task = owner.substr(0, 11) == "spec.tasks[";
        for (const auto& e : errors_) {
            if (related(e, f)) return true;
            if (owner.empty() || !inside(e, owner)) continue;
            // The fields everything else about a task or an action depends on.
            std::string_view field = field_of(e, owner);
            if (e == owner) return true;
            if (task && is_one_of(field, {"uses", "needs", "foreach", "matrix"})) return true;
            if (!task && field == "kind") return true;
        }
        return false;
    }

private:
    std::vector<std::string> errors_;
    bool whole_ = false, policy_ = false, data_ = false, ids_ = false, needs_ = false, subworkflows_ = false;
};

compile_result check_unsorted(const parse_result& parsed, const compile_options& options) {
    if (parsed.document) {
        compile_result r = compile(*parsed.document, options);
        diagnostics all = parsed.diags;
        all.append(r.diags);
        r.diags = std::move(all);
        return r;
    }
    compile_result r;
    r.diags = parsed.diags;
    if (!parsed.partial) return r;
    parse_damage damage(parsed.diags);
    if (damage.whole()) return r;
    compile_result more = compile(*parsed.partial, options);
    for (const auto& d : more.diags.items())
        if (!damage.explains(d)) r.diags.add(d);
    return r;
}

}  // namespace

compile_result check_document(const parse_result& parsed, const compile_options& options) {
    compile_result r = check_unsorted(parsed, options);
    // People read top to bottom.
    std::stable_sort(r.diags.items().begin(), r.diags.items().end(),
                     [](const diagnostic& a, const diagnostic& b) {
                         return std::pair(a.location.line, a.location.column) <
                                std::pair(b.location.line, b.location.column);
                     });
    return r;
}

}  // namespace agentctl
