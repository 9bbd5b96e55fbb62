// A launch as a task result: the state, the error, the redacted streams, the shell output.
#include "runner/launcher.hpp"

#include "exec/redactor.hpp"

#include <agentctl/json.hpp>
#include <agentctl/process.hpp>

#include <boost/json/object.hpp>

#include <cstring>

namespace json = boost::json;

namespace agentctl {
namespace {

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The workflow key (of a task or an action) that sets the limit a stream passed.
std::string limit_key(std::string_view stream) {
    if (stream == "stdout") return "stdoutLimitBytes";
    if (stream == "stderr") return "stderrLimitBytes";
    return "combinedOutputLimitBytes";
}

}  // namespace

task_result to_task_result(launch_result r, const resolved_environment& env, std::int64_t timeout_ms,
                           bool streams_once) {
    task_result t;
    process_result& p = r.process;
    t.isolation = r.isolation;
    t.engine = r.engine;
    t.command = r.command;
    t.containment = r.containment;
    t.backend = r.backend;
    t.slurm_job_id = r.slurm_job_id;
    t.slurm_node = r.slurm_node;
    t.slurm_worker = r.slurm_worker;
    t.slurm_state = r.slurm_state;
    t.exit_code = p.exit_code;
    t.signal = p.signal;
    t.usage = p.usage;
    t.descendants_killed = p.descendants_killed;
    t.output_passed_through = r.output_passed;
    t.output_bytes = p.stdout_bytes.size() + p.stderr_bytes.size();
    t.duration_ms = static_cast<std::uint64_t>(p.duration.count() / 1000);
    // A capture is whole when the program ended by itself with a status it chose (0-128) and
    // left nothing to kill. Any other end (a cap, a timeout, a cancel, a signal, a status above
    // 128 that a shell or an engine reports for a signal, a backend failure) may have cut a
    // secret short as it was written: a tail that starts a secret is redacted too
    // (docs/SECRETS.md).
    const secret_matcher secrets(env.secrets);
    bool whole = p.outcome == process_outcome::exited && !p.signal && p.exit_code && *p.exit_code <= 128 &&
                 !r.error && !r.oom_killed && p.descendants_killed == 0;
    redact_capture(p.stdout_bytes, secrets, {.ends_early = !whole});
    redact_capture(p.stderr_bytes, secrets, {.ends_early = !whole});
    make_utf8_lossy(p.stdout_bytes, t.stdout_lossy);
    make_utf8_lossy(p.stderr_bytes, t.stderr_lossy);
    switch (p.outcome) {
        case process_outcome::exited:
            if (p.exit_code == 0) {
                t.state = task_state::succeeded;
            } else {
                t.state = task_state::failed;
                t.error = p.signal
                              ? task_error{error_code::signaled, "killed by " + signal_name(*p.signal) +
                                                                     (p.core_dumped ? " (core dumped)" : "")}
                              : task_error{error_code::exit_nonzero,
                                           "exited with status " + std::to_string(*p.exit_code)};
                if (r.oom_killed)
                    t.error = task_error{error_code::oom_killed, "killed by the container's memory limit"};
            }
            break;
        case process_outcome::timed_out:
            t.state = task_state::timed_out;
            t.error = task_error{error_code::timeout,
                                 "timed out after " + seconds_text(timeout_ms) + " and was terminated"};
            break;
        case process_outcome::cancelled:
            t.state = task_state::cancelled;
            t.error = task_error{error_code::cancelled, "cancelled; the process tree was terminated"};
            break;
        case process_outcome::output_limit_exceeded:
            t.state = task_state::output_limit_exceeded;
            t.limit_stream = p.limit_stream;
            t.limit_bytes = p.limit_bytes;
            t.error = task_error{error_code::output_limit_exceeded,
                                 p.limit_stream + " exceeded its limit of " + std::to_string(p.limit_bytes) +
                                     " bytes; the process tree was killed (raise the limit with " +
                                     limit_key(p.limit_stream) + " on the task or its action, up to " +
                                     std::to_string(limits::max_stream_limit_bytes) + ")"};
            break;
        case process_outcome::spawn_failed:
            t.state = task_state::spawn_failed;
            t.error = task_error{p.error.value_or(error_code::spawn_failed), p.error_message};
            break;
    }
    if (r.error) {
        // Nothing ran (retryable as a spawn error) unless the reason is one a retry cannot
        // fix: policy, or isolation that is not available here.
        bool spawn = p.outcome == process_outcome::spawn_failed;
        if (!spawn || is_permanent(r.error->code)) t.state = task_state::failed;
        t.error = r.error;
    }
    if (t.error) redact_capture(t.error->message, secrets);

    json::object out;
    out.reserve(6);  // its members below: no rehash as it grows
    out["status"] = t.state == task_state::succeeded ? "changed" : "failed";
    out["changed"] = t.state == task_state::succeeded;
    if (t.exit_code)
        out["exitCode"] = *t.exit_code;
    else
        out["exitCode"] = nullptr;
    if (t.signal) out["signal"] = signal_name(*t.signal);
    if (streams_once) {
        // The capture buffers become output.stdout and output.stderr (moved, not copied): a
        // 1 MiB stdout costs 1 MiB for the rest of the run, and its bytes were written once,
        // by read() (docs/CAPTURE.md).
        t.streams_in_output = true;
    } else {
        t.stdout_text.assign(p.stdout_bytes.data(), p.stdout_bytes.size());
        t.stderr_text.assign(p.stderr_bytes.data(), p.stderr_bytes.size());
    }
    out["stdout"] = std::move(p.stdout_bytes);
    out["stderr"] = std::move(p.stderr_bytes);
    t.output = std::move(out);
    return t;
}

}  // namespace agentctl
