// isolation: container. Until the engine integration lands, fail closed: never run on the host.
#include "engine/launch.hpp"
#include "engine/post_result.hpp"

namespace agentctl {
namespace {

class container_launcher final : public launcher {
public:
    explicit container_launcher(run_context& ctx) : launcher(ctx) {}

    void async_launch(const launch_request&, boost::asio::any_completion_handler<void(launch_result)> handler) override {
        launch_result r;
        r.isolation = "container";
        r.process.outcome = process_outcome::spawn_failed;
        r.error = task_error{"isolation_unavailable",
                             "requested process isolation is unavailable: container mode is not supported by this "
                             "build; the task was not run on the host"};
        post_result(ctx_.ex, std::move(handler), std::move(r));
    }
};

}  // namespace

std::unique_ptr<launcher> make_container_launcher(run_context& ctx) {
    return std::make_unique<container_launcher>(ctx);
}

}  // namespace agentctl
