// foreach and matrix: the arrays they expand, sizes against maxItems and the budgets, child
// ids, and node generation (children in item order, then the aggregate; singles).
#include "plan/compiler.hpp"
#include "plan/plan_detail.hpp"

#include <boost/json/object.hpp>

#include <algorithm>
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

}  // namespace plan_compiler
}  // namespace agentctl
