// Telling the program's own end from Slurm's: docs/SLURM.md, section 5.
#include "runner/slurm/classify.hpp"

#include "runner/lines.hpp"

#include <charconv>

namespace agentctl::slurm {

namespace {

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

// Lines srun and slurmstepd write: "srun: ...", "slurmstepd: ...", "slurmstepd-NODE: ...".
bool from_slurm(std::string_view line) {
    return starts_with(line, "srun: ") || starts_with(line, "slurmstepd");
}

// "srun: error: NODE: task 0: WHAT" -> WHAT, or empty.
std::string_view task_report(std::string_view line) {
    if (!starts_with(line, "srun: error: ")) return {};
    auto at = line.find(": task ");
    if (at == std::string_view::npos) return {};
    auto colon = line.find(": ", at + 7);
    if (colon == std::string_view::npos) return {};
    return line.substr(colon + 2);
}

std::string signal_text(int signal) {
    return "signal " + std::to_string(signal);
}

}  // namespace

stderr_markers scan_stderr(std::string_view tail) {
    stderr_markers m;
    std::string_view telling;
    auto note = [&](std::string_view line) {
        if (telling.empty()) telling = line;
    };
    while (!tail.empty()) {
        std::string_view line = next_line(tail);
        if (!from_slurm(line)) continue;
        if (contains(line, "*** ") && contains(line, " CANCELLED AT ")) {
            if (contains(line, "DUE TO TIME LIMIT")) {
                m.time_limit = true;
                note(line);
            } else if (contains(line, "DUE TO NODE FAILURE")) {
                m.node_failure = true;
                note(line);
            } else if (contains(line, "DUE TO PREEMPTION")) {
                m.preempted = true;
                note(line);
            } else if (!contains(line, "DUE TO")) {
                m.cancelled = true;
            }
        }
        if (starts_with(line, "srun: error: Node failure on ")) {
            m.node_failure = true;
            note(line);
        }
        if (contains(line, "oom-kill event")) {
            m.out_of_memory = true;
            note(line);
        }
        if (contains(line, "couldn't chdir to ") && contains(line, "going to /tmp instead")) {
            m.chdir_failed = true;
            note(line);
        }
        if (contains(line, ": error: execve(): ")) {
            if (line.size() >= 27 && line.substr(line.size() - 27) == ": No such file or directory")
                m.exec_not_found = true;
            if (line.size() >= 19 && line.substr(line.size() - 19) == ": Permission denied")
                m.exec_denied = true;
            note(line);
        }
        if (contains(line, "srun: error: Unable to allocate resources") ||
            contains(line, "srun: error: Application launch failed") ||
            (starts_with(line, "srun: error: Task launch for ") && contains(line, " failed on node ")) ||
            starts_with(line, "srun: unrecognized option") || starts_with(line, "srun: fatal: ") ||
            contains(line, "srun: error: Unable to create step")) {
            m.launch_failed = true;
            note(line);
        }
        std::string_view what = task_report(line);
        if (what.empty()) continue;
        constexpr std::string_view exited = "Exited with exit code ";
        if (starts_with(what, exited)) {
            std::string_view digits = what.substr(exited.size());
            int code = 0;
            auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), code);
            if (ec == std::errc() && end == digits.data() + digits.size()) m.task_exit_code = code;
        } else if (what == "Out Of Memory") {
            m.out_of_memory = true;
            note(line);
        } else if (what != "Completed") {
            m.task_signal_line = true;  // strsignal(): "Killed", "Terminated", "Segmentation fault", ...
        }
    }
    m.line = std::string(telling);
    return m;
}

std::string_view error_code(end_kind kind) {
    switch (kind) {
        case end_kind::succeeded:
        case end_kind::stopped:
            return "";
        case end_kind::exit_nonzero:
            return "exit_nonzero";
        case end_kind::signaled:
            return "signaled";
        case end_kind::time_limit:
            return "slurm_time_limit";
        case end_kind::node_failure:
            return "slurm_node_failure";
        case end_kind::out_of_memory:
            return "oom_killed";
        case end_kind::preempted:
            return "slurm_preempted";
        case end_kind::cancelled:
            return "slurm_cancelled";
        case end_kind::boot_failure:
            return "slurm_boot_failure";
        case end_kind::deadline:
            return "slurm_deadline";
        case end_kind::executable_not_found:
            return "executable_not_found";
        case end_kind::permission_denied:
            return "permission_denied";
        case end_kind::cwd_unavailable:
            return "cwd_unavailable";
        case end_kind::launch_failed:
            return "slurm_launch_failed";
        case end_kind::unknown:
            return "slurm_unknown_end";
    }
    return "slurm_unknown_end";
}

attempt_end classify_end(const end_evidence& e) {
    const stderr_markers m = scan_stderr(e.stderr_tail);
    attempt_end out;
    auto with_line = [&](std::string text) {
        if (!m.line.empty()) text += " (" + m.line + ")";
        return text;
    };
    auto done = [&](end_kind kind, std::string message) {
        out.kind = kind;
        out.message = std::move(message);
        return out;
    };
    // What srun's status says about the program, when srun reported it consistently.
    if (e.srun_exit) {
        if (m.task_exit_code && *m.task_exit_code == *e.srun_exit)
            out.exit_code = *e.srun_exit;
        else if (*e.srun_exit > 128 && *e.srun_exit < 160 && m.task_signal_line)
            out.signal = *e.srun_exit - 128;
        else if (*e.srun_exit == 0 && !m.task_exit_code && !m.task_signal_line)
            out.exit_code = 0;
    }
    if (e.job_exit) {  // the controller's record beats srun's output
        out.exit_code.reset();
        out.signal.reset();
        if (e.job_exit->signal != 0)
            out.signal = e.job_exit->signal;
        else
            out.exit_code = e.job_exit->status;
    }

    if (e.stopped_by_agentctl) return done(end_kind::stopped, "stopped by agentctl");

    const bool final_state = e.state && !is_active(*e.state);
    if (final_state) {
        out.from_job_state = true;
        switch (*e.state) {
            case job_state::timeout:
                return done(end_kind::time_limit, "Slurm ended the job at its time limit (--time)");
            case job_state::node_fail:
                return done(end_kind::node_failure, with_line("the node running the job failed (NODE_FAIL)"));
            case job_state::out_of_memory:
                return done(end_kind::out_of_memory,
                            "the job exceeded its memory limit (--mem) and was killed");
            case job_state::preempted:
                return done(end_kind::preempted, "Slurm preempted the job");
            case job_state::boot_fail:
                return done(end_kind::boot_failure, "the node for the job failed to boot");
            case job_state::deadline:
                return done(end_kind::deadline, "Slurm ended the job at its deadline");
            case job_state::cancelled:
                return done(end_kind::cancelled,
                            "the job was cancelled outside agentctl (scancel or an administrator)");
            default:
                break;  // completed, failed, revoked, special_exit: the program's end, below
        }
    } else {
        // No final state: srun's own lines, which the program could have forged.
        if (m.launch_failed && !m.task_exit_code && !m.task_signal_line)
            return done(end_kind::launch_failed, with_line("srun could not start the job"));
        if (m.time_limit)
            return done(end_kind::time_limit, with_line("Slurm ended the job at its time limit (--time)"));
        if (m.node_failure) return done(end_kind::node_failure, with_line("the node running the job failed"));
        if (m.out_of_memory)
            return done(end_kind::out_of_memory,
                        with_line("the job exceeded its memory limit (--mem) and was killed"));
        if (m.preempted) return done(end_kind::preempted, with_line("Slurm preempted the job"));
        if (m.cancelled)
            return done(end_kind::cancelled,
                        "the job was cancelled outside agentctl (scancel or an administrator)");
    }

    // The program's own end.
    if (m.chdir_failed)
        return done(
            end_kind::cwd_unavailable,
            with_line("the working directory does not exist on the node; Slurm ran the program in /tmp"));
    // slurmstepd reports a failed execve() as an exit status equal to errno.
    if (m.exec_not_found && out.exit_code == 2)
        return done(end_kind::executable_not_found, with_line("the executable was not found on the node"));
    if (m.exec_denied && out.exit_code == 13)
        return done(end_kind::permission_denied, with_line("the node refused to execute the program"));
    if (out.signal) return done(end_kind::signaled, "killed by " + signal_text(*out.signal));
    if (out.exit_code && *out.exit_code != 0)
        return done(end_kind::exit_nonzero, "exit status " + std::to_string(*out.exit_code));
    if (out.exit_code) {
        // Status 0 is a success only if the controller does not say otherwise.
        if (!final_state || *e.state == job_state::completed) return done(end_kind::succeeded, "");
        if (m.launch_failed) return done(end_kind::launch_failed, with_line("srun could not start the job"));
        return done(end_kind::unknown, with_line("the job ended " + std::string(to_string(*e.state)) +
                                                 " although its exit status was 0"));
    }
    if (final_state && m.launch_failed)
        return done(end_kind::launch_failed, with_line("srun could not start the job"));
    if (e.srun_signal) return done(end_kind::unknown, "srun was killed by " + signal_text(*e.srun_signal));
    std::string what =
        e.srun_exit ? "srun exited with status " + std::to_string(*e.srun_exit) : "srun's end is unknown";
    if (e.state) what += ", job state " + std::string(to_string(*e.state));
    return done(end_kind::unknown, with_line(what));
}

}  // namespace agentctl::slurm
