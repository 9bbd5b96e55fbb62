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
        task_finished,   ///< the task reached its final state (also skipped; not tasks_not_started's)
        warning,         ///< something the user should know before the run goes on (`warning`)
        attempt_failed,  ///< an attempt failed and the task will be retried (`result`: that attempt's)
        /// The tasks [task_index, end_index) never started and never will (the run was
        /// cancelled, stopped or failed first): each one's final result is `result`. One event
        /// for the stretch instead of a task_finished each, however many (a run timeout may
        /// leave a million).
        tasks_not_started,
    };
    kind_t kind = kind_t::task_started;
    std::uint32_t task_index = 0;
    std::uint32_t end_index = 0;  ///< tasks_not_started: one past its last task
    std::uint32_t attempt = 0;
    const task_result* result = nullptr;  ///< task_finished, attempt_failed and tasks_not_started
    std::uint32_t retry_in_ms = 0;        ///< attempt_failed: the backoff before the next attempt
    std::uint32_t job_slot = 0;           ///< task_started: its slot, 1..jobs (`vars.jobSlot`)
    const diagnostic* warning = nullptr;  ///< warning only
    std::chrono::steady_clock::duration elapsed{};  ///< since the run started
    std::uint32_t running = 0;   ///< attempts in flight after this event
    std::uint32_t finished = 0;  ///< tasks in a final state after this event
};

/// A tasks_not_started event as the task_finished events it stands for, one per task and in
/// order, to `fn`: for a sink that shows every task (`--output jsonl` writes a line each).
template <typename Fn>
void each_task_finished(const run_event& stretch, Fn&& fn) {
    run_event one = stretch;
    one.kind = run_event::kind_t::task_finished;
    one.end_index = 0;
    one.attempt = stretch.result->attempts;
    for (std::uint32_t i = stretch.task_index; i < stretch.end_index; ++i) {
        one.task_index = i;
        fn(one);
    }
}

/// Receives events on the run's executor, in order. Must not block.
class event_sink {
public:
    virtual ~event_sink() = default;
    virtual void on_event(const run_event& event) = 0;
};

}  // namespace agentctl
