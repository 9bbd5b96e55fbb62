// Parse and semantic diagnostics of one document, reported together.
#include <agentctl/plan.hpp>

#include <algorithm>
#include <set>

namespace agentctl {
namespace {

// The entity a dotted path belongs to: a task (`spec.tasks[3]`), an action
// (`spec.actions.build`), or a section of spec (`spec.policy`). Empty for document-level paths.
std::string entity_of(std::string_view path) {
    constexpr std::string_view tasks = "spec.tasks[", actions = "spec.actions.", spec = "spec.";
    if (path.substr(0, tasks.size()) == tasks) {
        auto close = path.find(']');
        return std::string(path.substr(0, close == std::string_view::npos ? path.size() : close + 1));
    }
    if (path.substr(0, actions.size()) == actions) {
        auto dot = path.find_first_of(".[", actions.size());
        return std::string(path.substr(0, dot));
    }
    if (path.substr(0, spec.size()) == spec) {
        auto dot = path.find_first_of(".[", spec.size());
        return std::string(path.substr(0, dot));
    }
    return {};
}

bool is_whole_section(std::string_view entity) {
    return entity.empty() || entity == "spec.tasks" || entity == "spec.actions";
}

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

    std::set<std::string> broken;
    for (const auto& d : parsed.diags.items()) {
        if (d.level != severity::error) continue;
        std::string entity = entity_of(d.path);
        // A broken section would make every later finding a repetition: stop here.
        if (is_whole_section(entity)) return r;
        broken.insert(std::move(entity));
    }
    compile_result more = compile(*parsed.partial, options);
    for (const auto& d : more.diags.items()) {
        if (broken.count(entity_of(d.path))) continue;
        // An unusable policy section explains every policy finding.
        if (broken.count("spec.policy") && is_policy_code(d.code)) continue;
        r.diags.add(d);
    }
    return r;
}

}  // namespace

compile_result check_document(const parse_result& parsed, const compile_options& options) {
    compile_result r = check_unsorted(parsed, options);
    // People read top to bottom.
    std::stable_sort(r.diags.items().begin(), r.diags.items().end(), [](const diagnostic& a, const diagnostic& b) {
        return std::pair(a.location.line, a.location.column) < std::pair(b.location.line, b.location.column);
    });
    return r;
}

}  // namespace agentctl
