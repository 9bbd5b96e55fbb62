// Progress events of a run, for live output and logs.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/task_result.hpp>

#include <chrono>
#include <cstdint>

namespace agentctl {

/// One thing that happened in a run. Pointers are valid only during the call.
struct run_event {
    enum class kind_t {
        task_started,    ///< an attempt was dispatched (attempt > 1 means a retry)
        task_finished,   ///< the task reached its final state (also for skipped tasks)
        warning,         ///< something the user should know before the run goes on (`warning`)
        attempt_failed,  ///< an attempt failed and the task will be retried (`result`: that attempt's)
    };
    kind_t kind = kind_t::task_started;
    std::uint32_t task_index = 0;
    std::uint32_t attempt = 0;
    const task_result* result = nullptr;  ///< task_finished and attempt_failed
    std::uint32_t retry_in_ms = 0;        ///< attempt_failed: the backoff before the next attempt
    std::uint32_t job_slot = 0;           ///< task_started: its slot, 1..jobs (`vars.jobSlot`)
    const diagnostic* warning = nullptr;  ///< warning only
    std::chrono::steady_clock::duration elapsed{};  ///< since the run started
    std::uint32_t running = 0;   ///< attempts in flight after this event
    std::uint32_t finished = 0;  ///< tasks in a final state after this event
};

/// Receives events on the run's executor, in order. Must not block.
class event_sink {
public:
    virtual ~event_sink() = default;
    virtual void on_event(const run_event& event) = 0;
};

}  // namespace agentctl
