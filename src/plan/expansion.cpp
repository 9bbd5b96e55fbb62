// foreach and matrix: the arrays they expand, sizes against maxItems and the budgets, child
// ids, and node generation (singles; for an expanded task its expansion, the template its
// children share, then its aggregate; every child is rendered once, to check it, and dropped).
#include "json/sha256.hpp"
#include "plan/compiler.hpp"
#include "plan/plan_detail.hpp"

#include <agentctl/json.hpp>

#include <boost/json/object.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace agentctl {

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

std::array<std::uint8_t, 6> binding_digest(const boost::json::object& bindings) {
    // As the reference hashes them: its bindings are a sorted map; values keep their order.
    std::vector<const boost::json::key_value_pair*> members;
    members.reserve(bindings.size());
    for (const auto& m : bindings) members.push_back(&m);
    std::sort(members.begin(), members.end(),
              [](const auto* a, const auto* b) { return a->key() < b->key(); });
    string_sink text;
    {
        json_writer w(text);
        w.begin_object();
        for (const auto* m : members) {
            w.key(std::string_view(m->key().data(), m->key().size()));
            w.value(m->value());
        }
        w.end_object();
        w.flush();
    }
    sha256 hash;
    hash.update(text.text);
    auto full = hash.finish();
    std::array<std::uint8_t, 6> out;
    std::copy_n(full.begin(), out.size(), out.begin());
    return out;
}

void append_child_id(std::string& out, std::string_view parent, std::size_t index, std::size_t width,
                     const std::uint8_t* digest) {
    static constexpr char hex[] = "0123456789abcdef";
    // The index, `-` and the 12 hex digits of the digest are made here and appended at once
    // (not a byte at a time): the plan writers name each child three times per pass.
    char tail[20 + 13];
    char* t = std::to_chars(tail, tail + 20, index).ptr;
    const auto digits = static_cast<std::size_t>(t - tail);
    out += parent;
    out += "--";
    if (width > digits) out.append(width - digits, '0');
    *t++ = '-';
    for (std::size_t i = 0; i < 6; ++i) {
        *t++ = hex[digest[i] >> 4];
        *t++ = hex[digest[i] & 15];
    }
    out.append(tail, static_cast<std::size_t>(t - tail));
}

std::string child_id(std::string_view parent, std::size_t index, std::size_t width,
                     const std::array<std::uint8_t, 6>& digest) {
    std::string out;
    out.reserve(parent.size() + 2 + std::max<std::size_t>(width, 20) + 13);
    append_child_id(out, parent, index, width, digest.data());
    return out;
}

void append_child_id(std::string& out, const plan_expansion& e, std::string_view parent, std::uint64_t k) {
    constexpr std::size_t digest_size = 6;
    if (e.id_digests.size() >= (k + 1) * digest_size) {
        append_child_id(out, parent, k, e.id_width,
                        reinterpret_cast<const std::uint8_t*>(e.id_digests.data()) + k * digest_size);
        return;
    }
    const auto digest = binding_digest(expansion_bindings(e, k));
    append_child_id(out, parent, k, e.id_width, digest.data());
}

std::string child_id(const plan_expansion& e, std::string_view parent, std::uint64_t k) {
    std::string out;
    out.reserve(parent.size() + 2 + std::max<std::size_t>(e.id_width, 20) + 13);
    append_child_id(out, e, parent, k);
    return out;
}

}  // namespace detail

namespace plan_compiler {

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
              std::string(what) + " `" + std::string(text) + "` is " +
                  std::string(utf8_prefix(to_json(*r), 60)) + ", not an array",
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
    } else if (spec.loop) {
        // Bounded by the reader (1..64), so never too large; each iteration's loopPrevious
        // names the iteration before it, whose id is its bindings' digest (docs/CONTROL_FLOW.md).
        t.expansion = declared_task::expansion_t::loop;
        t.count = spec.loop->max_iterations;
        const std::size_t width = detail::child_index_width(t.count);
        std::string previous;
        for (std::uint64_t k = 0; k < t.count; ++k) {
            t.loop_previous.push_back(k == 0 ? spec.loop->initial
                                             : boost::json::value("${{ tasks." + previous + ".output }}"));
            previous = detail::child_id(spec.id, k, width,
                                        detail::binding_digest(detail::loop_bindings(t.loop_previous, k)));
        }
        t.items = &t.loop_previous;
        return;
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

// The fields a node of declared task `i` takes from its declaration: everything but its id,
// its bindings and what rendering fills in. Needs name the nodes of the tasks needed (node
// indices; order() turns them into plan indices).
void compiler::fill_node(plan_task& n, std::size_t i, plan_task::kind_t kind) {
    const task_spec& spec = wf_.tasks[i];
    const declared_task& t = tasks_[i];
    n.kind = kind;
    n.declared_index = static_cast<std::uint32_t>(i);
    n.action_index = t.action.value_or(0);
    n.failure = spec.failure;
    if (t.expansion == declared_task::expansion_t::foreach) n.expansion = plan_task::expansion_t::foreach;
    if (t.expansion == declared_task::expansion_t::matrix) n.expansion = plan_task::expansion_t::matrix;
    if (t.expansion == declared_task::expansion_t::loop) n.expansion = plan_task::expansion_t::loop;
    n.timeout_ms = wf_.runtime.default_timeout_ms;
    n.route_guards = t.route_guards;  // an expanded destination: its children and its aggregate
    if (kind == plan_task::kind_t::aggregate) return;
    if (!t.action) n.route = spec.route;
    if (const plan_subworkflow* role = subworkflow_of(i)) n.subworkflow = *role;
    n.needs.reserve(t.needs.size());
    for (auto d : t.needs) n.needs.push_back(tasks_[d].result_node);
    n.retry = spec.retry;
    n.when = t.when;
    n.vars = t.vars;
    n.vars_deferred = t.vars_deferred;
    n.output_schema = spec.output_schema;
    n.compensate = spec.compensate;  // copied to every child (docs/CONTROL_FLOW.md, "Compensation")
    if (wf_.compensation_of && i < wf_.compensation_of->source_task_ids.size())
        n.source_task_id = wf_.compensation_of->source_task_ids[i];
    if (t.action) {
        const action_spec& act = wf_.actions[*t.action];
        n.timeout_ms = act.timeout_ms.value_or(spec.timeout_ms.value_or(n.timeout_ms));
        n.limits = {act.stdout_limit_bytes, act.stderr_limit_bytes, act.combined_output_limit_bytes};
        n.requires_approval = act.needs_approval(wf_.policy.approval);
    } else {
        n.timeout_ms = spec.timeout_ms.value_or(n.timeout_ms);
    }
    // The command line's, over whatever the workflow says (as --jobs and --keep-going are).
    if (options_.task_timeout_ms) n.timeout_ms = *options_.task_timeout_ms;
    if (options_.task_attempts) {
        n.retry.max_attempts = *options_.task_attempts;
        n.retry.on = {retry_reason::spawn_error, retry_reason::exit_nonzero, retry_reason::timeout};
    }
}

// The expanded task `i`: its expansion, the template its children share, every child rendered
// once to check it (and dropped: plan::task() renders it again when asked), its aggregate.
void compiler::make_expansion(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    declared_task& t = tasks_[i];
    const std::uint64_t count = t.expansion_ok ? t.count : 0;
    const auto slot = static_cast<std::uint32_t>(out_.expansions.size());
    plan_expansion& e = out_.expansions.emplace_back();
    expansion_nodes_.emplace_back(t.template_node, t.result_node);
    e.count = static_cast<std::uint32_t>(count);
    e.id_width = static_cast<std::uint32_t>(detail::child_index_width(count));
    if (t.expansion == declared_task::expansion_t::foreach && count > 0) {
        e.as = spec.foreach->as;
        e.items = *t.items;
    }
    if (t.expansion == declared_task::expansion_t::matrix && count > 0)
        for (const auto& [name, values] : t.axes) e.axes.emplace_back(name, *values);
    if (t.expansion == declared_task::expansion_t::loop) {
        e.loop = true;
        e.items = t.loop_previous;
    }

    plan_task& child = nodes_[t.template_node];
    fill_node(child, i, plan_task::kind_t::child);
    child.parent = spec.id;
    child.with = t.with;
    child.with_deferred = t.with_deferred;
    child.argv_deferred = t.argv_deferred && t.action && actions_[*t.action].templated;
    child.expansion_slot = slot;
    child.child_count = e.count;
    e.id_digests.reserve(count * 6);
    for (std::uint64_t k = 0; k < count; ++k) {
        plan_task rendered;
        boost::json::value vars = detail::expansion_bindings(out_.expansions[slot], k);
        auto digest = detail::binding_digest(vars.get_object());
        out_.expansions[slot].id_digests.append(reinterpret_cast<const char*>(digest.data()), digest.size());
        rendered.id = detail::child_id(spec.id, k, out_.expansions[slot].id_width, digest);
        for (const auto& m : t.vars) vars.get_object().emplace(m.key(), m.value());
        render_node(rendered, i, vars);
    }

    plan_task& aggregate = nodes_[t.result_node];
    fill_node(aggregate, i, plan_task::kind_t::aggregate);
    aggregate.id = spec.id;
    aggregate.expansion_slot = slot;
    aggregate.child_count = e.count;
    if (!t.expansion_ok) t.count = 0;
}

void compiler::generate() {
    // Node indices first, so that needs can name nodes declared later: an expanded task has
    // its children's template, then its aggregate. Their generation positions (the children
    // in item order, then the aggregate) break ties in the topological order.
    std::uint32_t position = 0;
    for (auto& t : tasks_) {
        if (t.skip) continue;
        if (t.expansion != declared_task::expansion_t::none) {
            t.template_node = static_cast<std::uint32_t>(generation_.size());
            generation_.push_back(position);
            position += static_cast<std::uint32_t>(t.expansion_ok ? t.count : 0);
        }
        t.result_node = static_cast<std::uint32_t>(generation_.size());
        generation_.push_back(position++);
    }
    nodes_.resize(generation_.size());
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const declared_task& t = tasks_[i];
        if (t.skip) continue;
        if (t.expansion != declared_task::expansion_t::none) {
            make_expansion(i);
            continue;
        }
        plan_task& n = nodes_[t.result_node];
        fill_node(n, i, plan_task::kind_t::single);
        n.id = wf_.tasks[i].id;
        render_node(n, i, boost::json::value(t.vars));
    }
    check_child_ids();
    generated_ = true;
}

// Whether `id` is the id of a child the plan generates.
std::optional<std::uint32_t> compiler::child_owner(std::string_view id) const {
    auto parts = detail::split_child_id(id);
    if (!parts) return std::nullopt;
    auto it = declared_ids_.find(std::string(parts->parent));
    if (it == declared_ids_.end()) return std::nullopt;
    const declared_task& x = tasks_[it->second];
    if (x.skip || x.expansion == declared_task::expansion_t::none || !x.expansion_ok) return std::nullopt;
    if (parts->digits.size() != detail::child_index_width(x.count)) return std::nullopt;
    std::uint64_t k = 0;
    for (char c : parts->digits) k = k * 10 + static_cast<std::uint64_t>(c - '0');
    if (k >= x.count) return std::nullopt;
    // The digest too: the child's id is exactly what its bindings make it.
    const auto& spec = wf_.tasks[it->second];
    auto bindings = x.expansion == declared_task::expansion_t::loop
                        ? detail::loop_bindings(*x.items, k)
                        : detail::expansion_bindings(spec.foreach ? std::string_view(spec.foreach->as) : "",
                                                     x.items, x.axes, k);
    if (detail::child_id(parts->parent, k, parts->digits.size(), detail::binding_digest(bindings)) != id)
        return std::nullopt;
    return it->second;
}

// A declared id of the shape `PARENT--NNNN-DIGEST` may be the id of one of PARENT's children: one
// diagnostic per collision, at whichever of the two comes later in declaration order.
void compiler::check_child_ids() {
    for (std::uint32_t i = 0; i < tasks_.size(); ++i) {
        if (tasks_[i].skip) continue;
        const std::string& id = wf_.tasks[i].id;
        auto x = child_owner(id);
        if (!x) continue;
        if (*x < i)
            error("duplicate_task_id", task_path(i) + ".id",
                  "task id `" + id + "` is also the id of a child of `" + wf_.tasks[*x].id + "` (" +
                      task_path(*x) + ")",
                  "rename one of the tasks: children of an expanded task are `PARENT--NNNN-DIGEST`");
        else
            error("duplicate_task_id", task_path(*x) + ".id",
                  "task `" + wf_.tasks[*x].id + "` generates the child id `" + id + "`, which " +
                      task_path(i) + " also has",
                  "rename one of the tasks: children of an expanded task are `PARENT--NNNN-DIGEST`");
    }
}

}  // namespace plan_compiler
}  // namespace agentctl
