// What `agentctl parallel` prints while its jobs run (parallel_display.hpp).
#include "parallel_display.hpp"

#include "run_display.hpp"

#include <boost/asio/post.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace asio = boost::asio;

namespace agentctl::cli {

namespace {

// Every line of `text` after `tag` (a last line without a newline too), as parallel --tag does.
std::string tagged(std::string_view text, const std::string& tag) {
    if (tag.empty()) return std::string(text);
    std::string out;
    out.reserve(text.size() + 16);
    while (!text.empty()) {
        auto nl = text.find('\n');
        out += tag;
        out += text.substr(0, nl == std::string_view::npos ? text.size() : nl + 1);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    }
    return out;
}

bool same_file(int a, int b) {
    struct stat sa {
    }, sb{};
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// The job's exit value and signal as parallel's joblog has them: a timeout is -1 and the
// signal that ended it; a failure to run at all is -1.
std::pair<int, int> exit_and_signal(const task_result& r) {
    if (r.state == task_state::timed_out) return {-1, r.signal.value_or(0)};
    if (r.exit_code) return {*r.exit_code, 0};
    if (r.signal) return {0, *r.signal};
    return {-1, 0};
}

std::string halt_text(const parallel_halt& h) {
    return h.why == parallel_halt::why_t::fail      ? "This job failed:"
           : h.why == parallel_halt::why_t::success ? "This job succeeded:"
                                                    : "This job finished:";
}

}  // namespace

parallel_display::parallel_display(asio::io_context& io, const command_line& cl,
                                   const parallel_translation& t, const plan& p,
                                   parallel_display_options options, output_queue* joblog,
                                   std::function<void(const std::string&)> cancel)
    : io_(io),
      cl_(cl),
      t_(t),
      options_(std::move(options)),
      joblog_(joblog),
      cancel_(std::move(cancel)),
      merged_(same_file(STDOUT_FILENO, STDERR_FILENO)),
      outcome_(options_.halt, t.jobs.size()),
      timer_(io),
      timeout_timer_(io) {
    if (auto agg = p.find("job")) first_child_ = p.node(*agg).first_child;
    if (options_.progress) tick();
    if (options_.timeout_percent) check_timeouts();
}

void parallel_display::on_event(const run_event& e) {
    if (e.kind == run_event::kind_t::warning) {
        diagnostics d;
        d.add(*e.warning);
        print_diagnostics_human(cl_, d);
        return;
    }
    // As the task_finished events it stands for: --keep-order waits for every job in turn.
    if (e.kind == run_event::kind_t::tasks_not_started)
        return each_task_finished(e, [this](const run_event& one) { on_event(one); });
    if (e.task_index < first_child_ || e.task_index >= first_child_ + t_.jobs.size()) return;
    const std::uint32_t job = e.task_index - first_child_;
    in_flight_ = e.running;
    if (e.kind == run_event::kind_t::task_started) {
        running_[job] = {std::chrono::system_clock::now(), std::chrono::steady_clock::now(),
                         e.job_slot ? e.job_slot : 1};
        if (options_.pass_output && options_.verbose)
            print({t_.line.fill(t_.jobs[job], running_[job].slot) + "\n", "", ""});
        return;
    }
    // A retried attempt that timed out is said as parallel says each kill.
    if (e.kind == run_event::kind_t::attempt_failed && e.result && e.result->state == task_state::timed_out)
        timed_out(job);
    if (e.kind == run_event::kind_t::task_finished) finished(job, *e.result, e.running);
}

// parallel's warning, at once (not held with the job's output under -k): parallel prints it
// when it kills the job.
void parallel_display::timed_out(std::uint32_t job) {
    auto it = running_.find(job);
    if (it == running_.end()) return;
    const std::string command = t_.line.fill(t_.jobs[job], it->second.slot);
    print(
        {"",
         "agentctl: Warning: This job was killed because it timed out:\nagentctl: Warning: " + command + "\n",
         ""});
}

void parallel_display::finished(std::uint32_t job, const task_result& r, std::uint32_t running) {
    blocks b;
    auto it = running_.find(job);
    // A job the run never started (cancelled, or --halt) prints and logs nothing.
    if (it != running_.end() && r.attempts > 0) {
        const std::uint32_t slot = it->second.slot;
        const std::string command = t_.line.fill(t_.jobs[job], slot);
        const std::string tag = t_.tag ? t_.tag->fill(t_.jobs[job], slot) + "\t" : "";
        const bool failed = r.state != task_state::succeeded;
        auto [exit_value, signal] = exit_and_signal(r);
        if (!failed && options_.timeout_percent)
            succeeded_in(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.began).count());
        ++done_;
        failed_ += failed;
        if (options_.print_output) {
            if (options_.verbose && !options_.pass_output)
                b.out = tagged(command + "\n", tag);  // tagged too, as parallel does
            b.out += tagged(stdout_of(r), tag);
            b.err = tagged(stderr_of(r), tag);
        }
        // What parallel would say itself, and why agentctl could not run the job at all.
        if (r.state == task_state::timed_out)
            timed_out(job);
        else if (failed && !r.exit_code && !r.signal && r.error)
            b.err += "agentctl: job " + std::to_string(t_.jobs[job].seq) + ": " + r.error->message + "\n";
        if (joblog_ || options_.joblog_on_stdout) {
            double started = std::chrono::duration<double>(it->second.started.time_since_epoch()).count();
            double runtime =
                std::chrono::duration<double>(std::chrono::system_clock::now() - it->second.started).count();
            b.log = parallel_joblog_line(t_.jobs[job].seq, started, runtime, stdout_of(r).size(), exit_value,
                                         signal, command);
        }
        bool was_halted = outcome_.halted();
        parallel_outcome::action act = outcome_.job_ended(failed, exit_value < 0 ? 0 : exit_value, signal);
        using why = parallel_halt::why_t;
        if (options_.halt.when != parallel_halt::when_t::never && !was_halted &&
            ((options_.halt.why == why::fail && failed) || (options_.halt.why == why::success && !failed) ||
             options_.halt.why == why::done))
            b.err += "agentctl: " + halt_text(options_.halt) + "\n" + command + "\n";
        if (act != parallel_outcome::action::none) {
            halted_ = true;
            if (act == parallel_outcome::action::soon && running > 0)
                b.err += "agentctl: Starting no more jobs. Waiting for " + std::to_string(running) +
                         " jobs to finish.\n";
        }
    }
    if (it != running_.end()) running_.erase(it);
    if (!options_.keep_order) {
        print(b);
    } else {
        held_.emplace(job, std::move(b));
        for (auto h = held_.find(next_); h != held_.end(); h = held_.find(++next_)) {
            print(h->second);
            held_.erase(h);
        }
    }
    // --halt: now at once; soon once the jobs still running have ended. Posted: the run's loop
    // is the caller.
    if (halted_ && !cancelled_ && (running == 0 || options_.halt.when == parallel_halt::when_t::now)) {
        cancelled_ = true;
        asio::post(io_, [this] { cancel_("--halt " + options_.halt_text); });
    }
}

void parallel_display::print(const blocks& b) {
    if (b.out.empty() && b.err.empty() && b.log.empty()) return;
    if (drawn_) {
        standard_error().write("\r\x1b[2K");
        drawn_ = false;
    }
    standard_output().write(b.out);
    (merged_ ? standard_output() : standard_error()).write(b.err);
    if (b.log.empty()) return;
    if (joblog_)
        joblog_->write(b.log);
    else
        standard_output().write(b.log);
}

void parallel_display::tick() {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count();
    standard_error().write(progress_line(done_, t_.jobs.size(), in_flight_, failed_, elapsed));
    drawn_ = true;
    timer_.expires_after(std::chrono::milliseconds(200));
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) tick();
    });
}

// --timeout N%: parallel's TimeoutQueue: N% of the median runtime of the jobs that succeeded
// is every running job's limit, from the moment the first one succeeded (docs/PARALLEL.md).
void parallel_display::check_timeouts() {
    if (!lower_.empty()) {
        const double limit = *options_.timeout_percent / 100 * lower_.top();
        const auto now = std::chrono::steady_clock::now();
        std::vector<std::uint32_t> due;
        for (auto& [job, r] : running_)
            if (!r.expired && std::chrono::duration<double>(now - r.began).count() > limit) {
                r.expired = true;
                due.push_back(job);
            }
        char percent[32];
        std::snprintf(percent, sizeof percent, "%g%%", *options_.timeout_percent);
        for (auto job : due)
            expiry_.expire(first_child_ + job, "timed out after " + seconds_text(limit) + " (--timeout " +
                                                   percent + " of the median runtime, " +
                                                   seconds_text(lower_.top()) + ") and was terminated");
    }
    timeout_timer_.expires_after(std::chrono::milliseconds(50));
    timeout_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) check_timeouts();
    });
}

// One more runtime into the two halves; the lower half holds the middle one (of an even count,
// the lower of the two), as parallel's `(sort @list)[$#list/2]` picks it.
void parallel_display::succeeded_in(double seconds) {
    if (lower_.empty() || seconds <= lower_.top())
        lower_.push(seconds);
    else
        upper_.push(seconds);
    if (lower_.size() > upper_.size() + 1) {
        upper_.push(lower_.top());
        lower_.pop();
    } else if (upper_.size() > lower_.size()) {
        lower_.push(upper_.top());
        upper_.pop();
    }
}

void parallel_display::stop() {
    timer_.cancel();
    timeout_timer_.cancel();
    if (drawn_) standard_error().write("\r\x1b[2K");
    drawn_ = false;
}

std::string write_parallel_results(const parallel_translation& t, const plan& p, const run_report& report,
                                   result_source* results) {
    auto agg = p.find("job");
    if (!agg || !t.results) return "";
    const std::uint32_t first = p.node(*agg).first_child;
    std::string failure;
    auto write = [&](std::uint32_t index, const task_result& r) {
        if (index < first || index - first >= t.jobs.size() || r.attempts == 0) return true;
        const std::uint32_t job = index - first;
        std::filesystem::path dir(t.results_dir(job));
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        auto put = [&](const char* name, std::string_view text) {
            std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
            f.write(text.data(), static_cast<std::streamsize>(text.size()));
            if (!f && failure.empty()) failure = "--results: cannot write " + (dir / name).string();
        };
        put("seq", std::to_string(t.jobs[job].seq));
        put("stdout", stdout_of(r));
        put("stderr", stderr_of(r));
        return failure.empty();
    };
    if (results) {
        results->each(first, first + static_cast<std::uint32_t>(t.jobs.size()), true,
                      [&](std::uint32_t index, task_result& r) { return write(index, r); });
    } else {
        for (std::uint32_t i = first; i < report.tasks.size() && i < first + t.jobs.size(); ++i)
            if (!write(i, report.tasks[i])) break;
    }
    return failure;
}

}  // namespace agentctl::cli
