// The journal's side of a run (docs/JOURNAL.md, "Commit order"): what the scheduler records
// about the run, each attempt and each task, and where it waits for a commit. The scheduler
// asks; without a journal there is no recorder.
#pragma once

#include <agentctl/attempt.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/task_result.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

struct plan;
struct resume_state;

class run_recorder {
public:
    /// `journal` records into one run; `resume`: that run is an earlier one, taken over.
    /// `pass_output`: run_settings::pass_output (each shell attempt's intent says so).
    run_recorder(journal_writer& journal, const plan& p, const resume_state* resume,
                 bool pass_output = false);

    /// The run's record, committed before any effect (a resumed run is recorded already).
    boost::asio::awaitable<std::optional<journal_error>> start_run(journal_run record,
                                                                   const std::string& run_id);
    /// The run's end, and everything queued before it, committed before the run completes.
    boost::asio::awaitable<std::optional<journal_error>> end_run(journal_run_end end);

    /// An attempt's intent, committed before the attempt starts: after a crash, an intent
    /// without an end is an attempt that may have had its effect. Afterwards the request
    /// reports its handle here (attempt_request::on_started).
    boost::asio::awaitable<std::optional<journal_error>> start_attempt(attempt_request& request);
    /// A failed attempt that will be retried: its end goes to the journal now, with its
    /// streams. Returns the result without them (the last attempt's end is recorded with the
    /// task's final result).
    task_result retried(const attempt_request& request, task_result result);
    /// The retry's next attempt starts: its end is not recorded yet.
    void next_attempt(std::uint32_t index) { ended_[index] = false; }

    /// A task reached its final state: its final result, with the end of its last attempt when
    /// that holds the streams (`ran`: it comes from attempts). A reused one (resume) is recorded
    /// only when the crash lost its final after its end was committed.
    void final_result(std::uint32_t index, bool ran, task_result&& r);

    /// The tasks left unstarted, one record whatever their count (journal_writer::record_unstarted).
    void unstarted(unstarted_tasks tasks) { behind_ |= journal_.record_unstarted(std::move(tasks)); }

    /// Once the journal's queue passed its high-water mark, waits for it to commit before
    /// more is recorded; nothing to wait for otherwise.
    boost::asio::awaitable<std::optional<journal_error>> catch_up();

private:
    attempt_intent intent_of(const attempt_request& request) const;
    void record_handle(std::uint32_t index, std::uint32_t attempt, const attempt_started& s);

    journal_writer& journal_;
    const plan& plan_;
    const resume_state* resume_;
    std::vector<bool> ended_;  // the journal has the end of the task's last attempt already
    bool behind_ = false;      // the journal's queue passed its high-water mark
    bool pass_output_ = false;
};

}  // namespace agentctl
