// The plan compiler's internals, shared by its parts (docs/DESIGN.md, "Plan"):
//   compile.cpp    the driver (run: the steps in order), inputs, processes[], compile()
//   graph.cpp      task ids, actions and needs, cycles, the topological order
//   expansion.cpp  foreach/matrix sizes and budgets, child ids, node generation
//   rendering.cpp  templates: parsing, allowed roots and needs, compile-time rendering
//   variables.cpp  the layers of `vars.` (files, inline, command line), merged per task
//   shapes.cpp     the output each task can have: task output paths that can never exist
#pragma once

#include "plan/template_detail.hpp"

#include <agentctl/plan.hpp>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace agentctl::plan_compiler {

// The total number of tasks when budgets.maxTasks does not say: keeps a typo in maxItems
// from asking for millions of nodes.
inline constexpr std::uint64_t hard_max_tasks = 1000000;

inline std::string task_path(std::size_t i) {
    return "spec.tasks[" + std::to_string(i) + "]";
}
inline std::string action_path(const action_spec& a) {
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

inline bool any_root(const std::vector<site>& sites, template_root r) {
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
bool compile_value(const boost::json::value& v, compiled_value& out);
std::optional<boost::json::value> render_compiled(const compiled_value& c, const render_context& ctx,
                                                  detail::template_error& error);

/// What the compiler learns about one declared task before generating nodes.
struct declared_task {
    bool skip = false;  ///< duplicate id: reported and left out
    std::optional<std::uint32_t> action;
    std::vector<std::uint32_t> needs;  ///< declared indices: known, not itself, unique
    boost::json::object vars;          ///< every variable layer merged (docs/DESIGN.md, "Variables")
    boost::json::object vars_deferred;  ///< task-level variables reading task outputs
    std::vector<site> vars_sites;       ///< references in task-level variables
    boost::json::value with;           ///< the action's `with` merged under the task's
    compiled_value with_compiled;      ///< `with`, parsed for rendering
    std::vector<site> with_sites;
    std::vector<site> when_sites;
    std::optional<condition> when;
    std::vector<site> select_sites;         ///< a router's `select`
    std::vector<std::string> route_guards;  ///< routers naming this task among their destinations
    bool templates_ok = true;  ///< with/when parsed and use allowed roots only
    bool with_deferred = false;
    bool argv_deferred = false;

    enum class expansion_t { none, foreach, matrix, loop } expansion = expansion_t::none;
    bool expansion_ok = true;
    std::uint64_t count = 0;                                              ///< children
    const boost::json::array* items = nullptr;                            ///< foreach; loop: loop_previous
    boost::json::array loop_previous;  ///< loop: each iteration's `vars.loopPrevious` (plan_expansion::items)
    std::vector<std::pair<std::string, const boost::json::array*>> axes;  ///< matrix, by axis name

    std::uint32_t result_node = 0;    ///< single: its node; expanded: its aggregate's (into nodes_)
    std::uint32_t template_node = 0;  ///< expanded: its children's template (into nodes_)
};

/// A workflow whose sub-workflow invocations are flattened into tasks (subworkflows.cpp).
struct flat_workflow {
    const workflow* source = nullptr;  ///< the document as written
    workflow wf;                       ///< its copy with the flat tasks
    struct node {
        std::string path;                       ///< where the task is written in the document
        std::optional<plan_subworkflow> role;   ///< a boundary or an aggregate
        std::optional<std::uint32_t> boundary;  ///< an aggregate: its boundary's flat index
    };
    std::vector<node> nodes;  ///< parallel to wf.tasks
};

/// Whether `wf` declares or invokes a sub-workflow.
bool has_subworkflows(const workflow& wf);
/// Flattens every invocation (docs/CONTROL_FLOW.md, "Sub-workflows"), checking the definitions:
/// unknown ones, cycles between them, their schemas.
void flatten_subworkflows(const workflow& wf, diagnostics& diags, flat_workflow& out);

class compiler {
public:
    compiler(const workflow& wf, const compile_options& options, const flat_workflow* flat = nullptr)
        : wf_(wf), options_(options), flat_(flat) {}
    compile_result run();
    diagnostics& diags() { return diags_; }

private:
    /// Where task `i` is written: `spec.tasks[i]`, or inside a sub-workflow's definition.
    std::string task_path(std::size_t i) const {
        return flat_ ? flat_->nodes[i].path : plan_compiler::task_path(i);
    }
    const plan_subworkflow* subworkflow_of(std::size_t i) const {
        return flat_ && flat_->nodes[i].role ? &*flat_->nodes[i].role : nullptr;
    }

    void error(std::string code, const std::string& path, std::string message, std::string help = {}) {
        diags_.error(std::move(code), path, std::move(message), std::move(help), wf_.where(path));
    }
    bool first_time(std::string key) { return reported_.insert(std::move(key)).second; }

    void merge_inputs();
    void index_tasks();
    const boost::json::object* loaded_vars_file(const std::string& where, const std::string& file);
    bool render_inline_vars(const boost::json::object& vars, const std::string& base, bool allow_tasks,
                            std::size_t task, boost::json::object& out, boost::json::object* deferred);
    void resolve_workflow_vars();
    void resolve_task_vars(std::size_t i);
    bool reads_deferred_var(const std::vector<site>& sites, std::size_t i) const;
    bool is_deferred_var(const template_ref& ref, std::size_t i) const;
    void check_task_output_paths(const std::vector<site>& sites);
    void check_task_output_paths();
    void find_cycles();
    bool parse_sites(const boost::json::value& value, const std::string& base, std::vector<site>& out);
    bool parse_site(std::string_view text, const std::string& path, std::vector<site>& out,
                    bool as_text = false);
    bool check_roots(const std::vector<site>& sites, root_set allowed, std::string_view place);
    bool check_task_refs(const std::vector<site>& sites, std::size_t task, std::string_view via_action);
    void parse_action_templates();
    void parse_task_templates(std::size_t i);
    void check_compensation(std::size_t i);
    const boost::json::array* expansion_array(const boost::json::value& v, const std::string& path,
                                              std::string_view what);
    void prepare_expansion(std::size_t i);
    bool check_budgets();
    void generate();
    void fill_node(plan_task& n, std::size_t i, plan_task::kind_t kind);
    void make_expansion(std::size_t i);
    std::optional<std::uint32_t> child_owner(std::string_view id) const;
    void check_child_ids();
    /// `argv`: the sites of action args and cwd, where `vars.jobSlot` is bound (at dispatch).
    bool check_sites(const std::vector<site>& sites, const render_context& ctx, std::size_t i,
                     const std::string& node_id, bool argv = false);
    void render_node(plan_task& n, std::size_t i, const boost::json::value& vars);
    void order();
    void check_outputs();
    void check_routes();
    void mark_referenced_outputs();
    void warn_about_approval();
    void list_processes();

    const workflow& wf_;
    const compile_options& options_;
    const flat_workflow* flat_ = nullptr;
    diagnostics diags_;
    plan out_;
    boost::json::value inputs_;  ///< merged, an object
    boost::json::object workflow_vars_;  ///< spec.varsFiles, then spec.vars rendered
    std::vector<declared_task> tasks_;
    std::vector<action_templates> actions_;
    std::unordered_map<std::string, std::uint32_t> declared_ids_;
    std::unordered_map<std::string, std::uint32_t> action_ids_;
    std::unordered_set<std::string> reported_;  ///< keys of diagnostics already given
    std::vector<plan_task> nodes_;              ///< singles, child templates, aggregates (generate())
    std::vector<std::uint32_t> generation_;     ///< per node: its first task's generation position
    std::vector<std::pair<std::uint32_t, std::uint32_t>>
        expansion_nodes_;                       ///< per expansion: template, aggregate
    std::vector<std::string> output_refs_;      ///< task ids spec.outputs reads
    bool generated_ = false;
};

}  // namespace agentctl::plan_compiler
