// What `agentctl parallel` prints while its jobs run, as GNU parallel prints it: each job's
// output whole when it ends (in completion order, or input order with -k), tagged with --tag;
// its joblog line; --halt; the progress line on a terminal (docs/PARALLEL.md, "Output").
#pragma once

#include "cli.hpp"
#include "output_queue.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/events.hpp>
#include <agentctl/parallel.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>

namespace agentctl::cli {

struct parallel_display_options {
    bool keep_order = false;   ///< -k
    bool verbose = false;      ///< -v: each job's command line before its output
    bool print_output = true;  ///< false with --results: parallel prints nothing then
    /// -u: the jobs write to agentctl's stdout and stderr themselves; -v's command line is
    /// printed as a job starts, before what it writes.
    bool pass_output = false;
    bool progress = false;     ///< draw the progress line (stderr is a terminal)
    parallel_halt halt;
    std::string halt_text;  ///< --halt as given, for the cancellation's reason
    /// `--timeout N%`: a job is timed out after N% of the median runtime of the jobs that
    /// succeeded so far (none yet: no limit), as parallel's TimeoutQueue does.
    std::optional<double> timeout_percent;
    bool joblog_on_stdout = false;  ///< `--joblog -`: joblog lines go to stdout
};

/// The run's events → GNU parallel's output. Also the run's gate: closed once --halt says to
/// start no more jobs.
class parallel_display final : public event_sink, public dispatch_gate {
public:
    /// `joblog`: where joblog lines go (nullptr: none, or stdout with options.joblog_on_stdout). `cancel`:
    /// ends the run (as a SIGINT does), called from the run's loop once --halt says so.
    parallel_display(boost::asio::io_context& io, const command_line& cl, const parallel_translation& t,
                     const plan& p, parallel_display_options options, output_queue* joblog,
                     std::function<void(const std::string&)> cancel);

    void on_event(const run_event& e) override;
    bool open() override { return !halted_; }

    /// The progress line cleared and the --timeout N% checks ended, for good.
    void stop();

    /// What the run binds, for --timeout N%.
    task_expiry* expiry() { return &expiry_; }

    const parallel_outcome& outcome() const { return outcome_; }

private:
    // What one job prints: its stdout, its stderr and its joblog line, in that order (parallel's
    // Job::print()), held together under -k.
    struct blocks {
        std::string out, err, log;
    };
    void finished(std::uint32_t job, const task_result& r, std::uint32_t running);
    void timed_out(std::uint32_t job);
    void print(const blocks& b);
    void tick();
    void check_timeouts();
    void succeeded_in(double seconds);

    boost::asio::io_context& io_;
    const command_line& cl_;
    const parallel_translation& t_;
    parallel_display_options options_;
    output_queue* joblog_;
    std::function<void(const std::string&)> cancel_;
    std::uint32_t first_child_ = 0;
    bool merged_ = false;  // stdout and stderr are one file: both go through stdout, in order
    parallel_outcome outcome_;
    bool halted_ = false, cancelled_ = false;
    // Jobs running: when (the last attempt) started, and in which slot.
    struct running {
        std::chrono::system_clock::time_point started;
        std::chrono::steady_clock::time_point began;  // for --timeout N%
        std::uint32_t slot = 1;
        bool expired = false;  // --timeout N% ended this attempt
    };
    std::unordered_map<std::uint32_t, running> running_;
    // -k: what ended before an earlier job did, by job.
    std::map<std::uint32_t, blocks> held_;
    std::uint32_t next_ = 0;
    // The progress line.
    boost::asio::steady_timer timer_;
    std::size_t done_ = 0, failed_ = 0;
    std::uint32_t in_flight_ = 0;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point begun_ = std::chrono::steady_clock::now();
    // --timeout N%: the runtimes of the jobs that succeeded, the lower half in a max-heap and
    // the upper half in a min-heap (their median at the lower top), and the check's timer.
    std::priority_queue<double> lower_;
    std::priority_queue<double, std::vector<double>, std::greater<>> upper_;
    task_expiry expiry_;
    boost::asio::steady_timer timeout_timer_;
};

/// --results: each job that ran gets DIR/.../seq, stdout and stderr, as parallel writes them,
/// read from `results` (the journal) or `report.tasks`. Returns the first failure to write, or "".
std::string write_parallel_results(const parallel_translation& t, const plan& p, const run_report& report,
                                   result_source* results);

}  // namespace agentctl::cli
