// What the compiler knows of each task's output (docs/DESIGN.md, "Plan"): the reference's
// result shapes of the built-in actions, an extension's or a task's outputSchema when it
// closes its objects, and the aggregate of an expanded task. A `tasks.X.output...` path that
// no such output can hold is reported at `check` (template_missing_path), not rendered as
// nothing at run time.
#include "plan/compiler.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

namespace agentctl::plan_compiler {
namespace {

// `what` of a value: anything (unknown), a scalar (no member), an object whose members are
// all known, or an array whose items are all alike. A member is a struct of its own, defined
// after `shape`: a std::pair of an incomplete type does not compile with clang's checks.
struct named_shape;
struct shape {
    enum class kind_t { any, scalar, object, array } kind = kind_t::any;
    std::vector<named_shape> members;  ///< object
    std::vector<shape> item;           ///< array: one element

    static shape scalar();
    static shape object(std::vector<named_shape> m);
    static shape array(shape item);
    static shape scalars(std::initializer_list<const char*> names);
};

struct named_shape {
    std::string name;
    shape value;
};

shape shape::scalar() {
    return {kind_t::scalar, {}, {}};
}
shape shape::object(std::vector<named_shape> m) {
    return {kind_t::object, std::move(m), {}};
}
shape shape::array(shape item) {
    shape s{kind_t::array, {}, {}};
    s.item.push_back(std::move(item));
    return s;
}
shape shape::scalars(std::initializer_list<const char*> names) {
    std::vector<named_shape> m;
    for (const char* n : names) m.push_back({n, scalar()});
    return object(std::move(m));
}

// A value as written, templates unknown: `{message: "hello, ${{ inputs.name }}"}` has a member
// `message`, a string.
shape value_shape(const boost::json::value& v) {
    if (v.is_object()) {
        std::vector<named_shape> m;
        for (const auto& member : v.get_object())
            m.push_back({std::string(member.key()), value_shape(member.value())});
        return shape::object(std::move(m));
    }
    if (v.is_string()) {
        std::string_view s(v.get_string().data(), v.get_string().size());
        // Exactly one template keeps its value's type; embedded ones make text.
        if (looks_templated(s)) {
            detail::template_error e;
            auto ts = detail::parse_template(s, e);
            return ts && ts->is_single_ref() && !ts->parts[0].test ? shape{} : shape::scalar();
        }
        return shape::scalar();
    }
    if (v.is_array()) return shape{};  // items may differ: nothing is claimed
    return shape::scalar();
}

// A JSON Schema that closes its objects (`additionalProperties: false`) says which members
// exist; anything else says nothing.
shape schema_shape(const boost::json::value& schema) {
    const auto* o = schema.if_object();
    if (!o) return {};
    const auto* additional = o->if_contains("additionalProperties");
    const auto* properties = o->if_contains("properties");
    if (additional && additional->is_bool() && !additional->get_bool()) {
        std::vector<named_shape> m;
        if (properties && properties->is_object())
            for (const auto& p : properties->get_object())
                m.push_back({std::string(p.key()), schema_shape(p.value())});
        return shape::object(std::move(m));
    }
    if (const auto* type = o->if_contains("type"); type && type->is_string()) {
        std::string_view t(type->get_string().data(), type->get_string().size());
        if (t == "string" || t == "number" || t == "integer" || t == "boolean" || t == "null")
            return shape::scalar();
        if (t == "array") {
            const auto* items = o->if_contains("items");
            return shape::array(items ? schema_shape(*items) : shape{});
        }
    }
    return {};
}

// What a task of action `a` outputs when it runs, with input `with` (as written).
shape action_shape(const action_spec& a, const boost::json::value& with,
                   const std::optional<boost::json::value>& output_schema) {
    switch (a.kind) {
        case action_kind::assign: {
            shape input = value_shape(with);
            return shape::object({{"status", shape::scalar()},
                                  {"changed", shape::scalar()},
                                  {"before", shape::scalar()},
                                  {"after", input},
                                  {"diff", shape::scalar()},
                                  {"output", input},
                                  {"predictability", shape::scalar()}});
        }
        case action_kind::assert_that:
            return shape::scalars({"status", "changed", "passed"});
        case action_kind::read:
            return shape::scalars({"status", "changed", "content"});
        case action_kind::write:
            return shape::scalars({"status", "changed", "before", "after", "diff", "path", "predictability"});
        case action_kind::shell_exec:
            return shape::scalars({"status", "changed", "exitCode", "stdout", "stderr"});
        case action_kind::extension_process:
            if (output_schema) return schema_shape(*output_schema);
            return a.extension ? schema_shape(a.extension->output_schema) : shape{};
    }
    return {};
}

std::string member_list(const shape& s) {
    std::string out;
    for (const auto& [name, _] : s.members) out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "no member" : out;
}

// Why `path[from..]` cannot exist in a value of shape `s` ("" when it may): the first
// segment that cannot be there.
std::string absent(const shape& s, const std::vector<std::string>& path, std::size_t from, std::string at) {
    const shape* cur = &s;
    for (std::size_t i = from; i < path.size(); ++i) {
        const std::string& seg = path[i];
        switch (cur->kind) {
            case shape::kind_t::any:
                return "";
            case shape::kind_t::scalar:
                return "`" + at + "` holds no members, so it has no `" + seg + "`";
            case shape::kind_t::array: {
                bool digits = !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos;
                if (!digits) return "`" + at + "` is an array: `" + seg + "` is not an index";
                cur = &cur->item.front();
                break;
            }
            case shape::kind_t::object: {
                const shape* next = nullptr;
                for (const auto& [name, member] : cur->members)
                    if (name == seg) next = &member;
                if (!next) return "`" + at + "` has " + member_list(*cur) + "; not `" + seg + "`";
                cur = next;
                break;
            }
        }
        at += "." + seg;
    }
    return "";
}

}  // namespace

// `tasks.X.output...` sites whose path no output of X can hold.
void compiler::check_task_output_paths(const std::vector<site>& sites) {
    for (const auto& s : sites) {
        if (s.ref.root != template_root::tasks) continue;
        auto it = declared_ids_.find(std::string(s.ref.task_id()));
        if (it == declared_ids_.end()) continue;  // a child of an expansion, or unknown (reported)
        const std::size_t x = it->second;
        const declared_task& t = tasks_[x];
        const task_spec& spec = wf_.tasks[x];
        if (t.skip || (!t.action && !spec.route)) continue;
        const std::string base = "tasks." + spec.id + ".output";
        if (!t.action) {  // a router: its decision
            shape decision = shape::object({{"selected", shape{}},
                                            {"matched", shape::scalar()},
                                            {"destinations", shape::array(shape::scalar())}});
            std::string why = absent(decision, s.ref.path, 2, base);
            if (!why.empty() && first_time("shape|" + s.path + "|" + s.ref.text))
                error("template_missing_path", s.path, "`${{ " + s.ref.text + " }}` can never exist: " + why,
                      "a router's output is {selected, matched, destinations} (docs/CONTROL_FLOW.md)");
            continue;
        }
        const action_spec& a = wf_.actions[*t.action];
        shape runs = action_shape(a, t.with, spec.output_schema);
        if (t.expansion != declared_task::expansion_t::none) {
            // A loop's iteration may have been skipped by its `while` (the skipped output instead),
            // and a loop counts the iterations that ran.
            const bool loop = t.expansion == declared_task::expansion_t::loop;
            shape items = shape::array(shape::object({{"index", shape::scalar()},
                                                      {"taskId", shape::scalar()},
                                                      {"state", shape::scalar()},
                                                      {"output", loop ? shape{} : runs},
                                                      {"error", shape{}}}));
            runs = loop ? shape::object({{"iterations", shape::scalar()}, {"items", std::move(items)}})
                        : shape::object({{"items", std::move(items)}});
        }
        std::string why = absent(runs, s.ref.path, 2, base);
        if (why.empty()) continue;
        // A destination of a router has the route's skipped output when it is not selected.
        if (!t.route_guards.empty()) {
            shape skipped = shape::object({{"reason", shape::scalar()},
                                           {"route", shape::object({{"router", shape::scalar()},
                                                                    {"selected", shape{}},
                                                                    {"matched", shape::scalar()}})}});
            if (absent(skipped, s.ref.path, 2, base).empty()) continue;
        }
        // A task whose condition may be false has the skipped output instead.
        if (spec.when) {
            shape skipped =
                shape::object({{"reason", shape::scalar()},
                               {"condition", shape::scalars({"expression", "contextDigest", "result"})}});
            if (absent(skipped, s.ref.path, 2, base).empty()) continue;
        }
        std::string help = "the output of `" + spec.id + "` (" + std::string(to_string(a.kind)) + ") is " +
                           (a.kind == action_kind::assign ? "{status, changed, before, after, diff, output, "
                                                            "predictability}; its input is under `output.`"
                                                          : "described in docs/CONTRACT.md, \"Results\"");
        if (a.kind == action_kind::assign && t.expansion == declared_task::expansion_t::none &&
            s.ref.path.size() > 2 && s.ref.path[2] != "output") {
            std::vector<std::string> fixed = s.ref.path;
            fixed.insert(fixed.begin() + 2, "output");
            if (absent(runs, fixed, 2, base).empty())
                help = "did you mean `" + base + ".output" + s.ref.text.substr(base.size()) +
                       "`? an assignment's input is under `output.`";
        }
        if (first_time("shape|" + s.path + "|" + s.ref.text))
            error("template_missing_path", s.path, "`${{ " + s.ref.text + " }}` can never exist: " + why,
                  help);
    }
}

void compiler::check_task_output_paths() {
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const declared_task& t = tasks_[i];
        if (t.skip) continue;
        check_task_output_paths(t.with_sites);
        check_task_output_paths(t.when_sites);
        check_task_output_paths(t.vars_sites);
        check_task_output_paths(t.select_sites);
        if (t.action && actions_[*t.action].templated) check_task_output_paths(actions_[*t.action].sites);
    }
}

}  // namespace agentctl::plan_compiler
