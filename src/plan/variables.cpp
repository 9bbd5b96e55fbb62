// Variables (`vars.`; docs/DESIGN.md, "Variables"). A task's are the reference's layers, low
// to high: spec.varsFiles in order, spec.vars, the task's varsFiles in order, the task's vars,
// then the command line's (--vars-file mappings, then --var). A higher layer replaces a whole
// top-level key. Files and the command line are data, never rendered; the inline layers may
// read inputs (both) and the outputs of needed tasks (task vars only, rendered at run time).
#include "plan/compiler.hpp"

#include <boost/json/object.hpp>

namespace agentctl::plan_compiler {

const boost::json::object* compiler::loaded_vars_file(const std::string& where, const std::string& file) {
    for (const auto& f : wf_.loaded_vars_files)
        if (f.where == where) return f.values ? &*f.values : nullptr;  // unreadable: reported by the loader
    if (first_time("unread|" + where))
        error("vars_file_unread", where, "variables file `" + file + "` was not read",
              "load the workflow with load_workflow() or open_session(): parse_workflow() reads no file");
    return nullptr;
}

bool compiler::render_inline_vars(const boost::json::object& vars, const std::string& base, bool allow_tasks,
                                  std::size_t task, boost::json::object& out, boost::json::object* deferred) {
    bool ok = true;
    render_context ctx;
    ctx.inputs = &inputs_;
    for (const auto& m : vars) {
        const std::string path = base + "." + std::string(m.key());
        std::vector<site> sites;
        if (!parse_sites(m.value(), path, sites) ||
            !check_roots(sites, {.inputs = true, .tasks = allow_tasks},
                         allow_tasks ? "task vars" : "spec.vars") ||
            (allow_tasks && !check_task_refs(sites, task, ""))) {
            ok = false;
            continue;
        }
        if (any_root(sites, template_root::tasks)) {
            (*deferred)[m.key()] = m.value();
            out.erase(m.key());
            auto& kept = tasks_[task].vars_sites;
            kept.insert(kept.end(), sites.begin(), sites.end());
            continue;
        }
        detail::template_error e;
        auto rendered = detail::render(m.value(), ctx, e);
        if (!rendered) {
            ok = false;
            if (first_time("vars|" + path))
                error(e.code, path, e.message,
                      e.code == "template_missing_path" ? "declare the input in spec.inputs" : "");
            continue;
        }
        out[m.key()] = std::move(*rendered);
    }
    return ok;
}

void compiler::resolve_workflow_vars() {
    for (std::size_t i = 0; i < wf_.vars_files.size(); ++i)
        if (const auto* file =
                loaded_vars_file("spec.varsFiles[" + std::to_string(i) + "]", wf_.vars_files[i]))
            for (const auto& m : *file) workflow_vars_[m.key()] = m.value();
    render_inline_vars(wf_.vars, "spec.vars", false, 0, workflow_vars_, nullptr);
}

void compiler::resolve_task_vars(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    declared_task& t = tasks_[i];
    t.vars = workflow_vars_;
    for (std::size_t f = 0; f < spec.vars_files.size(); ++f) {
        const std::string where = task_path(i) + ".varsFiles[" + std::to_string(f) + "]";
        if (const auto* file = loaded_vars_file(where, spec.vars_files[f]))
            for (const auto& m : *file) t.vars[m.key()] = m.value();
    }
    if (!render_inline_vars(spec.vars, task_path(i) + ".vars", true, i, t.vars, &t.vars_deferred))
        t.templates_ok = false;
    for (const auto& [key, value] : options_.var_overrides) {
        t.vars[key] = value;
        t.vars_deferred.erase(key);
    }
    // Bindings are looked up in the same namespace: one name, one meaning.
    if (spec.foreach && (t.vars.contains(spec.foreach->as) || t.vars_deferred.contains(spec.foreach->as)))
        error("binding_shadows_variable", task_path(i) + ".foreach.as",
              "foreach binds `vars." + spec.foreach->as + "`, which is also a variable of task `" + spec.id +
                  "`",
              "name the binding differently with `as`, or rename the variable");
}

bool compiler::reads_deferred_var(const std::vector<site>& sites, std::size_t i) const {
    for (const auto& s : sites)
        if (s.ref.root == template_root::vars && is_deferred_var(s.ref, i)) return true;
    return false;
}

// A loop's `vars.loopPrevious` is the previous iteration's output after the first, so it is
// rendered when an iteration is admitted, as the task-level variables reading outputs are.
bool compiler::is_deferred_var(const template_ref& ref, std::size_t i) const {
    if (ref.path.empty()) return false;
    if (wf_.tasks[i].loop && ref.path.front() == "loopPrevious") return true;
    return tasks_[i].vars_deferred.contains(ref.path.front());
}

}  // namespace agentctl::plan_compiler
