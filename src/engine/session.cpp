// Loading a workflow for a front end, and what a front end needs from this host.
#include <agentctl/compensation.hpp>
#include <agentctl/session.hpp>

#include "engine/outcome.hpp"
#include "exec/host.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/parse.hpp>

namespace agentctl {

session open_session(const session_request& request) {
    session s;
    parse_result parsed =
        request.source ? parse_workflow(*request.source, request.file) : load_workflow(request.file);
    if (request.source) {
        parsed.source = *request.source;
        if (workflow* wf = parsed.document  ? &*parsed.document
                           : parsed.partial ? &*parsed.partial
                                            : nullptr) {
            auto slash = request.file.rfind('/');
            std::string dir =
                slash == std::string::npos ? "" : request.file.substr(0, slash == 0 ? 1 : slash);
            diagnostics vars_diags;
            load_workflow_vars(*wf, dir, vars_diags,
                               request.recorded_vars_files ? &*request.recorded_vars_files : nullptr);
            if (vars_diags.has_errors() && parsed.document) {
                parsed.partial = std::move(parsed.document);
                parsed.document.reset();
            }
            parsed.diags.append(vars_diags);
        }
    }
    // A compensation run runs its selection of the source document (docs/CONTROL_FLOW.md).
    if (request.compensation && parsed.document)
        parsed.document = compensation_workflow(*parsed.document, *request.compensation, parsed.diags);
    if (const workflow* wf = parsed.document ? &*parsed.document : nullptr)
        for (const auto& f : wf->loaded_vars_files)
            if (f.values) s.vars_files[f.path] = *f.values;

    // spec.inputs, then the inputs file, then the items files, then each --input in order:
    // the last one wins.
    compile_options options;
    diagnostics input_diags;
    if (request.inputs_file) {
        inputs_result file_inputs = load_inputs_file(*request.inputs_file);
        input_diags.append(file_inputs.diags);
        if (file_inputs.inputs)
            for (const auto& m : *file_inputs.inputs)
                options.input_overrides.emplace_back(m.key(), m.value());
    }
    const workflow* doc = parsed.document ? &*parsed.document : parsed.partial ? &*parsed.partial : nullptr;
    for (const auto& source : request.items) {
        // An items file fills a list the workflow reads: a name it does not declare is a typo
        // (`--items file=...` for `files`), never a new input, and would run no task at all.
        if (doc && !doc->inputs.contains(source.name)) {
            std::vector<std::string_view> declared;
            for (const auto& m : doc->inputs) declared.emplace_back(m.key().data(), m.key().size());
            std::string hint = nearest(source.name, declared);
            source_location at = doc->where("spec.inputs");
            if (at.file.empty()) at.file = request.file;
            input_diags.error("undeclared_input", "spec.inputs." + source.name,
                              "--items " + source.name + "=" + source.file +
                                  ": the workflow declares no input `" + source.name + "`",
                              hint.empty() ? "an items file fills an input declared under spec.inputs"
                                           : "did you mean `" + hint + "`?",
                              at);
            continue;
        }
        items_result items = load_items_file(source.file, request.separator);
        input_diags.append(items.diags);
        if (items.items) options.input_overrides.emplace_back(source.name, std::move(*items.items));
    }
    for (const auto& text : request.inputs) {
        std::string key;
        boost::json::value value;
        if (parse_input_assignment(text, key, value, input_diags))
            options.input_overrides.emplace_back(std::move(key), std::move(value));
    }
    // Variables of the command line: every --vars-file, then every --var (whatever their
    // order on the line), each replacing a whole key.
    for (const auto& file : request.vars_files) {
        vars_result r = load_vars_file(file);
        input_diags.append(r.diags);
        if (r.vars)
            for (const auto& m : *r.vars) s.var_overrides[m.key()] = m.value();
    }
    for (const auto& text : request.vars) {
        std::string key;
        boost::json::value value;
        if (parse_var_assignment(text, key, value, input_diags)) s.var_overrides[key] = std::move(value);
    }
    for (const auto& m : s.var_overrides) options.var_overrides.emplace_back(m.key(), m.value());
    if (request.task_timeout_seconds)
        options.task_timeout_ms = static_cast<std::int64_t>(*request.task_timeout_seconds * 1000 + 0.5);
    options.task_attempts = request.task_attempts;

    compile_result compiled = check_document(parsed, options);
    s.diags = std::move(compiled.diags);
    s.diags.append(input_diags);
    if (!input_diags.has_errors()) s.compiled = std::move(compiled.compiled);
    s.document = std::move(parsed.document);
    s.source = std::move(parsed.source);
    if (s.diags.has_errors() || !s.compiled) {
        s.compiled.reset();
        int code = s.diags.exit_code();
        s.status = code == 3 ? exit_status::policy : exit_status::usage;
        std::size_t errors = 0;
        for (const auto& d : s.diags.items()) errors += d.level == severity::error;
        s.failure = request.file + ": " + std::to_string(errors) + (errors == 1 ? " error" : " errors");
    }
    return s;
}

expected<std::string> resolve_base_dir(const session_request& request) {
    std::string dir = request.workspace ? *request.workspace : request.file;
    if (!request.workspace) {
        auto slash = dir.rfind('/');
        dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : dir.substr(0, slash));
    }
    auto canonical = exec::canonical_path(dir);
    if (!canonical)
        return task_error{canonical.error().code,
                          "cannot resolve " +
                              std::string(request.workspace ? "--workspace " : "the workflow's folder ") +
                              dir + ": " + canonical.error().message};
    return canonical;
}

host_environment process_environment() {
    host_environment env;
    env.search_path = exec::environment_variable("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
    env.lookup = exec::environment_variable;
    return env;
}

diagnostics short_secret_warnings(const session& s, const host_environment& host) {
    diagnostics d;
    if (!s.compiled || !host.lookup) return d;
    const plan& p = *s.compiled;
    for (const auto& proc : p.processes) {
        const action_spec& a = p.actions[proc.action_index];
        for (const auto& e : a.env) {
            if (e.source.kind != env_source::kind_t::env || !e.source.is_secret()) continue;
            auto value = host.lookup(e.source.text);
            if (!value || value->empty() || value->size() >= limits::min_redactable_secret_bytes) continue;
            std::string path = "spec.actions." + a.name + ".env." + e.name;
            d.warning("secret_too_short_to_redact", path,
                      "the secret " + e.name + " from {env: " + e.source.text + "} is " +
                          std::to_string(value->size()) + (value->size() == 1 ? " byte" : " bytes") +
                          " long here: every occurrence of it in output and errors becomes [REDACTED]",
                      "use a longer secret, or {env: " + e.source.text +
                          ", secret: false} for a host variable that is not a secret",
                      s.document ? s.document->where(path) : source_location{});
        }
    }
    return d;
}

std::optional<approval_refusal> refuse_unapproved(const session& s) {
    const plan& p = *s.compiled;
    auto needing = tasks_requiring_approval(p);
    if (needing.empty()) return std::nullopt;
    approval_refusal r;
    std::string ids = task_list(p, needing);
    r.diags.error(
        "policy_approval_required", "spec.policy.approval",
        "policy.approval is \"" + std::string(to_string(p.policy.approval)) +
            "\": " + std::to_string(needing.size()) + (needing.size() == 1 ? " task needs" : " tasks need") +
            " approval to run a process (" + ids + ")",
        "set spec.policy.approval: never for unattended runs, or run with --interactive on a terminal",
        s.document ? s.document->where("spec.policy.approval") : source_location{});
    r.message = "approval is required and the run is not interactive; nothing was run";
    return r;
}

}  // namespace agentctl
