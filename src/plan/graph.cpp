// The plan's graph: task ids, actions and needs, cycles (Tarjan's components, one
// diagnostic each), and the deterministic topological order of the generated nodes.
#include "plan/compiler.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

namespace agentctl::plan_compiler {

void compiler::index_tasks() {
    for (std::uint32_t a = 0; a < wf_.actions.size(); ++a) action_ids_.emplace(wf_.actions[a].name, a);
    tasks_.resize(wf_.tasks.size());
    for (std::uint32_t i = 0; i < wf_.tasks.size(); ++i) {
        auto [it, inserted] = declared_ids_.emplace(wf_.tasks[i].id, i);
        if (!inserted) {
            tasks_[i].skip = true;
            error("duplicate_task_id", task_path(i) + ".id",
                  "task id `" + wf_.tasks[i].id + "` is already used by " + task_path(it->second),
                  "give every task a unique id");
        }
    }
    std::vector<std::string_view> action_names, task_names;
    for (const auto& a : wf_.actions) action_names.push_back(a.name);
    for (const auto& t : wf_.tasks) task_names.push_back(t.id);
    for (std::uint32_t i = 0; i < wf_.tasks.size(); ++i) {
        const task_spec& spec = wf_.tasks[i];
        declared_task& t = tasks_[i];
        if (auto it = action_ids_.find(spec.action); it != action_ids_.end()) {
            t.action = it->second;
        } else if (spec.uses == "router" && !spec.route) {
            // The reader requires `route`; a partial document (check of a damaged file) can
            // still lack it, and a router without its decision must not reach the plan.
            error("missing_field", task_path(i) + ".route",
                  "task `" + spec.id + "` uses `router` but has no `route`",
                  "add route: with select and cases");
        } else if (spec.uses != "router" && spec.subworkflow.empty()) {
            // A router and a sub-workflow's boundary and aggregate are pure nodes, without an action.
            std::string hint = nearest(spec.action, action_names);
            error("unknown_action", task_path(i) + ".uses",
                  "task `" + spec.id + "` uses `" + spec.uses + "`, but spec.actions has no `" + spec.action +
                      "`",
                  hint.empty() ? "declare the action under spec.actions"
                               : "did you mean `action:" + hint + "`?");
        }
        for (std::size_t j = 0; j < spec.needs.size(); ++j) {
            const std::string& need = spec.needs[j];
            const std::string path = task_path(i) + ".needs[" + std::to_string(j) + "]";
            auto it = declared_ids_.find(need);
            if (it == declared_ids_.end()) {
                std::string hint = nearest(need, task_names);
                error("unknown_need", path,
                      "task `" + spec.id + "` needs `" + need + "`, which is not a task id",
                      hint.empty() ? "list ids of tasks declared in spec.tasks"
                                   : "did you mean `" + hint + "`?");
            } else if (it->second == i) {
                error("dependency_cycle", path, "dependency cycle: " + spec.id + " -> " + spec.id,
                      "a task cannot need itself");
            } else if (std::find(t.needs.begin(), t.needs.end(), it->second) == t.needs.end()) {
                t.needs.push_back(it->second);
            }
        }
    }
}

// Tarjan's strongly connected components over `needs`; one diagnostic per component
// (self-needs were reported already), showing one cycle through its first declared task.
void compiler::find_cycles() {
    const std::size_t n = tasks_.size();
    constexpr std::uint32_t unvisited = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> index(n, unvisited), low(n, 0), component(n, unvisited);
    std::vector<bool> on_stack(n, false);
    std::vector<std::uint32_t> stack;
    std::vector<std::pair<std::uint32_t, std::size_t>> calls;
    std::vector<std::vector<std::uint32_t>> components;
    std::uint32_t counter = 0;
    for (std::uint32_t s = 0; s < n; ++s) {
        if (index[s] != unvisited || tasks_[s].skip) continue;
        index[s] = low[s] = counter++;
        stack.push_back(s);
        on_stack[s] = true;
        calls.emplace_back(s, 0);
        while (!calls.empty()) {
            std::uint32_t v = calls.back().first;
            std::size_t& pos = calls.back().second;
            if (pos < tasks_[v].needs.size()) {
                std::uint32_t w = tasks_[v].needs[pos++];
                if (index[w] == unvisited) {
                    index[w] = low[w] = counter++;
                    stack.push_back(w);
                    on_stack[w] = true;
                    calls.emplace_back(w, 0);
                } else if (on_stack[w]) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            if (low[v] == index[v]) {
                std::vector<std::uint32_t> members;
                std::uint32_t w;
                do {
                    w = stack.back();
                    stack.pop_back();
                    on_stack[w] = false;
                    members.push_back(w);
                } while (w != v);
                if (members.size() > 1) components.push_back(std::move(members));
            }
            calls.pop_back();
            if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
        }
    }
    // Report in declaration order of each component's first task.
    for (auto& members : components) std::sort(members.begin(), members.end());
    std::sort(components.begin(), components.end());
    for (std::uint32_t c = 0; c < components.size(); ++c)
        for (auto m : components[c]) component[m] = c;
    for (std::uint32_t c = 0; c < components.size(); ++c) {
        // Shortest path from the first member back to itself, inside the component.
        std::uint32_t start = components[c].front();
        std::vector<std::uint32_t> parent(n, unvisited);
        std::queue<std::uint32_t> queue;
        queue.push(start);
        std::uint32_t last = unvisited;
        while (!queue.empty() && last == unvisited) {
            std::uint32_t v = queue.front();
            queue.pop();
            for (auto w : tasks_[v].needs) {
                if (component[w] != c) continue;
                if (w == start) {
                    last = v;
                    break;
                }
                if (parent[w] == unvisited) {
                    parent[w] = v;
                    queue.push(w);
                }
            }
        }
        if (last == unvisited) continue;  // cannot happen: a component of 2+ tasks has a cycle
        std::vector<std::uint32_t> path{start};
        for (std::uint32_t v = last; v != start; v = parent[v]) path.insert(path.begin() + 1, v);
        std::string text;
        for (auto v : path) text += wf_.tasks[v].id + " -> ";
        text += wf_.tasks[start].id;
        const auto& needs = wf_.tasks[start].needs;
        std::size_t j =
            std::find(needs.begin(), needs.end(), wf_.tasks[path.size() > 1 ? path[1] : start].id) -
            needs.begin();
        error("dependency_cycle", task_path(start) + ".needs[" + std::to_string(j) + "]",
              "dependency cycle: " + text, "remove one of these needs so the tasks can be ordered");
    }
}

// Kahn's algorithm over the nodes; among ready nodes the one generated first goes first, which
// is declaration order with children in item order. A child template takes as many plan
// indices as it has children, consecutively (nothing else can come between them: their only
// dependant is their aggregate); its aggregate waits for it.
void compiler::order() {
    const std::size_t n = nodes_.size();
    std::vector<std::vector<std::uint32_t>> dependants(n);
    std::vector<std::uint32_t> pending(n, 0);
    for (std::uint32_t v = 0; v < n; ++v)
        for (auto d : nodes_[v].needs) {
            dependants[d].push_back(v);
            ++pending[v];
        }
    for (const auto& [child, aggregate] : expansion_nodes_)
        if (nodes_[child].child_count > 0) {
            dependants[child].push_back(aggregate);
            ++pending[aggregate];
        }
    using entry = std::pair<std::uint32_t, std::uint32_t>;  // generation position, node
    std::priority_queue<entry, std::vector<entry>, std::greater<>> ready;
    for (std::uint32_t v = 0; v < n; ++v)
        if (pending[v] == 0) ready.emplace(generation_[v], v);
    std::vector<std::uint32_t> start(n, 0), slot(n, 0);
    std::vector<std::uint32_t> sequence;
    sequence.reserve(n);
    std::uint32_t position = 0;
    while (!ready.empty()) {
        std::uint32_t v = ready.top().second;
        ready.pop();
        start[v] = position;
        slot[v] = static_cast<std::uint32_t>(sequence.size());
        sequence.push_back(v);
        position += nodes_[v].kind == plan_task::kind_t::child ? nodes_[v].child_count : 1;
        for (auto d : dependants[v])
            if (--pending[d] == 0) ready.emplace(generation_[d], d);
    }
    // Cycles among declared tasks were refused earlier, so every node is placed.
    out_.task_count = position;
    out_.nodes.reserve(n);
    out_.node_starts.reserve(n);
    for (auto v : sequence) {
        plan_task& node = nodes_[v];
        for (auto& d : node.needs) d = start[d];
        out_.node_starts.push_back(start[v]);
        out_.nodes.push_back(std::move(node));
    }
    for (std::size_t e = 0; e < expansion_nodes_.size(); ++e) {
        const auto [child, aggregate] = expansion_nodes_[e];
        plan_expansion& x = out_.expansions[e];
        x.node = slot[child];
        x.first_child = start[child];
        x.aggregate = start[aggregate];
        out_.nodes[slot[child]].first_child = start[child];
        out_.nodes[slot[aggregate]].first_child = start[child];
    }
    for (std::uint32_t k = 0; k < out_.nodes.size(); ++k)
        if (out_.nodes[k].kind != plan_task::kind_t::child)
            out_.index.emplace(out_.nodes[k].id, out_.node_starts[k]);
    nodes_.clear();
}

// Which outputs are read later in the run, so the engine may drop the others once recorded.
// Task templates name declared tasks (they must be in needs); spec.outputs may name any plan
// task. Reading an expanded task's output reads its aggregate, which holds every child's.
void compiler::mark_referenced_outputs() {
    std::vector<bool> declared(wf_.tasks.size(), false);
    auto mark_declared = [&](const std::vector<site>& sites) {
        for (const auto& s : sites) {
            if (s.ref.root != template_root::tasks) continue;
            if (auto it = declared_ids_.find(std::string(s.ref.task_id())); it != declared_ids_.end())
                declared[it->second] = true;
        }
    };
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const declared_task& t = tasks_[i];
        if (t.skip) continue;
        mark_declared(t.with_sites);
        mark_declared(t.when_sites);
        mark_declared(t.select_sites);
        if (t.action && actions_[*t.action].templated) mark_declared(actions_[*t.action].sites);
    }
    // A router's decision is read by the tasks it guards when they are admitted; a
    // sub-workflow's boundary and aggregate are its data flow (and the aggregate its result).
    for (auto& n : out_.nodes)
        if (n.kind != plan_task::kind_t::child && (declared[n.declared_index] || n.route || n.subworkflow))
            n.output_referenced = true;
    for (const auto& id : output_refs_) {
        auto i = out_.find(id);
        if (!i) continue;
        plan_task& n = out_.nodes[out_.node_of(*i)];
        if (n.kind != plan_task::kind_t::child) {
            n.output_referenced = true;
            continue;
        }
        plan_expansion& e = out_.expansions[n.expansion_slot];
        e.referenced.push_back(*i - e.first_child);
    }
    for (auto& e : out_.expansions) {
        std::sort(e.referenced.begin(), e.referenced.end());
        e.referenced.erase(std::unique(e.referenced.begin(), e.referenced.end()), e.referenced.end());
        // A loop's iterations are read by the next one (loopPrevious) and by the aggregate's bound.
        if (e.loop || out_.nodes[out_.node_of(e.aggregate)].output_referenced)
            out_.nodes[e.node].output_referenced = true;
    }
}

}  // namespace agentctl::plan_compiler
