// What every front end does before it checks, plans, surveys or runs a workflow: load the
// document, apply the inputs in order, compile, and find the base folder and agentctl's
// own environment. The CLI is one front end; an embedding application can be another.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/error.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/object.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// An input filled from an items file (`--items NAME=FILE`).
struct items_source {
    std::string name;  ///< the input to fill
    std::string file;  ///< `-`: standard input
};

/// A compensation run's selection (docs/CONTROL_FLOW.md, "Compensation"), made by
/// prepare_compensation(): the source run, and per undo (in the order they run) the source task
/// it undoes, its declared task (which holds `compensate`) and its `with`, rendered over the
/// source run. open_session() turns the source document into the compensation run's.
struct compensation_request {
    struct item {
        std::string source_task_id;    ///< a child's own id for an expanded task
        std::string declared_task_id;  ///< the task of spec.tasks whose `compensate` it runs
        boost::json::value with;       ///< rendered: holds no template
    };
    std::string source_run_id;
    std::vector<item> items;
};

/// A workflow file and the inputs given for it.
struct session_request {
    std::string file;
    std::vector<std::string> inputs;         ///< `KEY=VALUE`, applied in order after the items files
    std::optional<std::string> inputs_file;  ///< a JSON or YAML mapping, applied over spec.inputs
    std::optional<std::string> workspace;    ///< base folder for workspaceRoot; else the workflow's folder
    std::vector<items_source> items;         ///< each an array of strings, applied after the inputs file
    item_separator separator = item_separator::line;  ///< how every items file is split
    /// The document's bytes, already read (a resume's, from its journal): parsed instead of
    /// reading `file`, which then only names it in diagnostics.
    std::optional<std::string> source;
    std::vector<std::string> vars_files;  ///< `--vars-file FILE`, in order (below every `--var`)
    std::vector<std::string> vars;        ///< `--var KEY=JSON`, in order: the last one wins
    std::optional<double> task_timeout_seconds;  ///< `--timeout S`: every task's (compile_options)
    std::optional<int> task_attempts;            ///< `--retries N`: every task's attempts in all
    /// The workflow's variables files as a run recorded them (file name -> mapping, see
    /// session::vars_files): used instead of reading them again (a resume).
    std::optional<boost::json::object> recorded_vars_files;
    /// Compile the compensation run this selects instead of the document's own tasks.
    std::optional<compensation_request> compensation;
};

/// A loaded and compiled workflow.
struct session {
    std::optional<workflow> document;           ///< what could be read, also when it has errors
    std::optional<plan> compiled;               ///< present only when `diags` has no error
    diagnostics diags;                          ///< the document's, then the inputs'
    exit_status status = exit_status::success;  ///< usage or policy when it did not compile
    std::string failure;                        ///< "FILE: N errors" when it did not compile
    std::string source;                         ///< the document's bytes as read and parsed
    /// What a run records so that a resume compiles the same plan: the workflow's variables
    /// files as read (file name -> mapping) and the command line's variables merged in order
    /// (`--vars-file` mappings, then `--var`).
    boost::json::object vars_files;
    boost::json::object var_overrides;

    bool ok() const { return compiled.has_value(); }
};

/// Loads and compiles `request.file` with its inputs: spec.inputs, then the inputs file, then
/// each items file, then each `--input` in order (the last one wins). Every problem is a diagnostic; nothing
/// is run.
session open_session(const session_request& request);

/// The canonical base folder: `request.workspace`, else the workflow file's folder; the error
/// (workspace_unavailable) when it does not exist.
expected<std::string> resolve_base_dir(const session_request& request);

/// agentctl's own environment: PATH for bare command names and engines (a default when
/// unset), and a reader of its variables for `{env}` sources and engine clients.
struct host_environment {
    std::string search_path;
    std::function<std::optional<std::string>(std::string_view)> lookup;
};
host_environment process_environment();

/// What can be known of the secrets from agentctl's environment alone, reading no file and
/// running no helper: a warning for each `{env}` secret of a process action whose value is
/// shorter than limits::min_redactable_secret_bytes (`check`; a run warns for every source).
diagnostics short_secret_warnings(const session& s, const host_environment& host);

/// When tasks need approval under the policy and no one can approve them: the diagnostic
/// (at spec.policy.approval) and the message a front end prints; nothing when the run may go.
struct approval_refusal {
    diagnostics diags;
    std::string message;
    exit_status status = exit_status::policy;
};
std::optional<approval_refusal> refuse_unapproved(const session& s);

}  // namespace agentctl
