// extension.process: not supported yet; fail the task without starting anything.
#include "engine/extension.hpp"
#include "engine/post_result.hpp"

namespace agentctl {

void async_run_extension(run_context& ctx, launcher&, const attempt_request&,
                         boost::asio::any_completion_handler<void(task_result)> handler) {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{"unsupported_action", "extension.process is not supported by this build"};
    post_result(ctx.ex, std::move(handler), std::move(r));
}

}  // namespace agentctl
