// Task outputSchemas at run time (docs/DESIGN.md, "Output schemas").
#include "engine/output_contract.hpp"

#include "plan/schema.hpp"

#include <agentctl/plan.hpp>

namespace agentctl {

output_contracts::output_contracts(const plan& p) : plan_(p) {}
output_contracts::~output_contracts() = default;

void output_contracts::check(std::uint32_t index, task_result& r) {
    if (r.state != task_state::succeeded || r.reused) return;
    const std::uint32_t node = plan_.node_of(index);
    const plan_task& t = plan_.nodes[node];
    if (!t.output_schema) return;
    auto& schema = compiled_[node];
    if (!schema) {
        std::string error, pointer;
        schema = json_schema::compile(*t.output_schema, error, pointer);
        // check compiled it already: a plan made otherwise may still hold a broken one.
        if (!schema) {
            r.state = task_state::failed;
            r.error =
                task_error{error_code::invalid_schema, "the task's outputSchema does not compile: " + error};
            return;
        }
    }
    auto errors = schema->validate(r.output);
    if (errors.empty()) return;
    r.state = task_state::failed;
    r.error = task_error{error_code::output_invalid,
                         "the task's output does not match its outputSchema: " + schema_errors_text(errors)};
}

}  // namespace agentctl
