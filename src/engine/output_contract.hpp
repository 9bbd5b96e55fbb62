// A task's outputSchema, checked against what it produced (docs/DESIGN.md, "Output schemas").
// Pure: the scheduler asks once per succeeded task; schemas compile once per plan node.
#pragma once

#include <agentctl/task_result.hpp>

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace agentctl {

struct plan;
class json_schema;

/// The compiled outputSchemas of one run's plan, made as their tasks first succeed.
class output_contracts {
public:
    explicit output_contracts(const plan& p);
    ~output_contracts();
    output_contracts(const output_contracts&) = delete;
    output_contracts& operator=(const output_contracts&) = delete;

    /// Fails `r`, the result of task `index`, with output_invalid (its output kept, the
    /// schema's errors in the message) when it succeeded with an output that its task's
    /// outputSchema does not accept; otherwise leaves it as it was. In place: a result is not
    /// moved twice for the tasks that have no schema.
    void check(std::uint32_t index, task_result& r);

private:
    const plan& plan_;
    std::unordered_map<std::uint32_t, std::unique_ptr<json_schema>> compiled_;  // by plan node
};

}  // namespace agentctl
