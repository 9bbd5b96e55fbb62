#include "engine/outcome.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <tuple>

namespace json = boost::json;

namespace agentctl {

task_result skipped_result(error_code code, std::string message) {
    task_result r;
    r.state = task_state::skipped;
    r.error = task_error{code, std::move(message)};
    return r;
}

task_result failed_result(error_code code, std::string message) {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{code, std::move(message)};
    return r;
}

task_result without_streams(const task_result& r, bool in_place) {
    // Every member but the three that may hold the captured text (stdout_text, stderr_text and
    // output, below), which this copy must not duplicate: a new member of task_result belongs here.
    using t = task_result;
    constexpr auto members = std::tuple(
        &t::state, &t::attempts, &t::exit_code, &t::signal, &t::stdout_lossy, &t::stderr_lossy,
        &t::duration_ms, &t::command, &t::argv, &t::isolation, &t::engine, &t::containment, &t::backend,
        &t::slurm_job_id, &t::slurm_node, &t::slurm_worker, &t::slurm_state, &t::descendants_killed,
        &t::usage, &t::limit_stream, &t::limit_bytes, &t::output_bytes, &t::output_passed_through, &t::error,
        &t::streams_in_output, &t::reused, &t::streams_released, &t::output_released);
    task_result out;
    std::apply([&](auto... member) { ((out.*member = r.*member), ...); }, members);
    if (r.streams_in_output && r.output.is_object()) {
        json::object o;
        for (const auto& m : r.output.get_object())
            if (m.key() != "stdout" && m.key() != "stderr")
                o.emplace(m.key(), m.value());
            else if (in_place)
                o.emplace(m.key(), m.value().is_string() ? json::value(json::string()) : m.value());
        out.output = std::move(o);
    } else {
        out.output = r.output;
    }
    return out;
}

bool is_failure(task_state s) {
    return s != task_state::succeeded && s != task_state::skipped && s != task_state::cancelled;
}

json::object aggregate_item(const plan& p, std::uint32_t child, const task_result* c) {
    json::object item;
    item["index"] = child - p.node(child).first_child;
    item["taskId"] = p.task_id(child);
    item["state"] = to_string(c ? c->state : task_state::skipped);
    item["output"] = c ? c->output : json::value(nullptr);
    if (c && c->error)
        item["error"] = json::object{{"code", to_string(c->error->code)}, {"message", c->error->message}};
    else
        item["error"] = nullptr;
    return item;
}

namespace {

// A loop's aggregate (docs/CONTROL_FLOW.md, "Bounded loops"): every iteration as an item and
// how many ran. When the last one succeeded and `while` still holds at loopIndex = N, the
// bound was hit before the loop was done: a failure, never a silent stop.
task_result loop_result(const run_view& view, std::uint32_t index) {
    const plan& p = *view.compiled;
    const plan_task& t = p.node(index);
    const plan_expansion& e = p.expansions[t.expansion_slot];
    json::array items;
    std::size_t iterations = 0, failed = 0;
    bool any_cancelled = false;
    for (std::uint32_t child = t.first_child; child < t.first_child + t.child_count; ++child) {
        task_state state = view.state_of(child).value_or(task_state::skipped);
        iterations += state != task_state::skipped;
        failed += is_failure(state);
        any_cancelled |= state == task_state::cancelled;
        items.push_back(aggregate_item(p, child, view.result_of(child)));
    }
    task_result r;
    r.state = task_state::succeeded;
    if (failed > 0) {
        r.state = task_state::failed;
        r.error = task_error{error_code::child_failed,
                             std::to_string(failed) + " of " + std::to_string(t.child_count) +
                                 (failed == 1 ? " iteration failed" : " iterations failed")};
    } else if (any_cancelled) {
        r.state = task_state::cancelled;
    } else if (const std::uint32_t last = t.first_child + t.child_count - 1;
               t.child_count > 0 && view.state_of(last) == task_state::succeeded) {
        const plan_task& iteration = p.nodes[e.node];
        const task_result* previous = view.result_of(last);
        json::value vars = json::value(iteration.vars);
        vars.get_object()["loopIndex"] = static_cast<std::int64_t>(t.child_count);
        vars.get_object()["loopPrevious"] = previous ? previous->output : json::value(nullptr);
        render_context ctx = context_for(view, vars, nullptr);
        std::string error;
        std::optional<bool> more =
            iteration.when ? evaluate(*iteration.when, ctx, error) : std::optional(false);
        if (!more) {
            r = failed_result(error_code::condition_error,
                              "while \"" + iteration.when->expression + "\": " + error);
        } else if (*more) {
            r = failed_result(error_code::loop_exhausted, "loop reached maxIterations " +
                                                              std::to_string(t.child_count) +
                                                              " while its condition remained true");
        }
    }
    r.output =
        json::object{{"iterations", static_cast<std::int64_t>(iterations)}, {"items", std::move(items)}};
    return r;
}

}  // namespace

task_result aggregate_result(const run_view& view, std::uint32_t index) {
    const plan& p = *view.compiled;
    const plan_task& t = p.node(index);
    if (t.expansion == plan_task::expansion_t::loop) return loop_result(view, index);
    const bool with_items = !view.release_unread_aggregates || p.output_referenced(index);
    task_result r;
    json::array items;
    if (with_items) items.reserve(t.child_count);
    bool any_cancelled = false, all_skipped = true;
    std::size_t failed = 0;
    for (std::uint32_t child = t.first_child; child < t.first_child + t.child_count; ++child) {
        task_state state = view.state_of(child).value_or(task_state::skipped);
        failed += is_failure(state);
        any_cancelled |= state == task_state::cancelled;
        all_skipped &= state == task_state::skipped;
        if (with_items) items.push_back(aggregate_item(p, child, view.result_of(child)));
    }
    r.state = failed > 0                            ? task_state::failed
              : any_cancelled                       ? task_state::cancelled
              : (all_skipped && t.child_count != 0) ? task_state::skipped
                                                    : task_state::succeeded;
    if (r.state == task_state::failed)
        r.error = task_error{error_code::child_failed,
                             std::to_string(failed) + " of " + std::to_string(t.child_count) +
                                 (t.child_count == 1 ? " item failed" : " items failed")};
    if (with_items) {
        r.output = json::object{{"items", std::move(items)}};
    } else {
        r.output = nullptr;
        r.output_released = true;
    }
    return r;
}

bool output_holds_streams(const plan& p, std::uint32_t index) {
    const plan_task& t = p.node(index);
    return t.kind != plan_task::kind_t::aggregate && !t.route && !t.subworkflow &&
           p.action_of(t).kind == action_kind::shell_exec;
}

namespace {

// Task `index`'s output without the stream copies (render_outputs()).
json::value output_without_streams(const plan& p, std::uint32_t index, const json::value& output) {
    const plan_task& t = p.node(index);
    const json::object* o = output.if_object();
    if (!o || (t.kind != plan_task::kind_t::aggregate && !output_holds_streams(p, index))) return output;
    json::object out;
    for (const auto& m : *o) {
        if (t.kind != plan_task::kind_t::aggregate) {
            if (m.key() != "stdout" && m.key() != "stderr") out.emplace(m.key(), m.value());
            continue;
        }
        const json::array* items = m.key() == "items" ? m.value().if_array() : nullptr;
        if (!items) {
            out.emplace(m.key(), m.value());
            continue;
        }
        json::array kept;
        kept.reserve(items->size());
        for (const auto& item : *items) {
            const json::object* io = item.if_object();
            const json::value* n = io ? io->if_contains("index") : nullptr;
            if (!io || !n || !n->is_number() || n->to_number<std::uint64_t>() >= t.child_count) {
                kept.push_back(item);
                continue;
            }
            auto child = t.first_child + static_cast<std::uint32_t>(n->to_number<std::uint64_t>());
            json::object copy;
            for (const auto& f : *io)
                copy.emplace(f.key(),
                             f.key() == "output" ? output_without_streams(p, child, f.value()) : f.value());
            kept.push_back(std::move(copy));
        }
        out.emplace(m.key(), std::move(kept));
    }
    return out;
}

}  // namespace

json::value render_outputs(const run_view& view, std::optional<task_error>& error) {
    const plan& p = *view.compiled;
    json::object out;
    if (p.outputs.empty()) {
        for (std::uint32_t v = 0; v < p.nodes.size(); ++v) {
            const plan_task& t = p.nodes[v];
            if (t.kind == plan_task::kind_t::child) continue;
            std::uint32_t index = p.node_starts[v];
            const task_result* r = view.result_of(index);
            out[t.id] = r ? output_without_streams(p, index, r->output) : json::value(nullptr);
        }
        return out;
    }
    json::value vars = json::object{};
    render_context ctx = context_for(view, vars, nullptr);
    for (const auto& m : p.outputs) {
        std::string why;
        auto v = render(m.value(), ctx, why);
        // A value that cannot be rendered is an error of the run, never a silent null.
        if (!v && !error)
            error =
                task_error{error_code::template_error, "spec.outputs." + std::string(m.key()) + ": " + why};
        out[m.key()] = v ? std::move(*v) : json::value(nullptr);
    }
    return out;
}

std::string task_list(const plan& p, const std::vector<std::uint32_t>& needing) {
    std::string ids;
    for (std::size_t i = 0; i < needing.size() && i < 5; ++i) ids += (i ? ", " : "") + p.task_id(needing[i]);
    if (needing.size() > 5) ids += " and " + std::to_string(needing.size() - 5) + " more";
    return ids;
}

task_error approval_required_error(const plan& p, const std::vector<std::uint32_t>& needing) {
    std::string ids = task_list(p, needing);
    return task_error{error_code::approval_required,
                      "policy.approval is \"" + std::string(to_string(p.policy.approval)) + "\" and " +
                          std::to_string(needing.size()) +
                          (needing.size() == 1 ? " task needs" : " tasks need") +
                          " approval to run a process (" + ids +
                          "); nothing was run. Run with --interactive on a terminal to approve, or set "
                          "spec.policy.approval: never for unattended runs"};
}

}  // namespace agentctl
