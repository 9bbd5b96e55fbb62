// A test-only way to run the Slurm commands src/runner/slurm builds: posix_spawn with an explicit
// environment, stdout and stderr captured through pipes, a hard bound on every wait. Not
// the engine's executor on purpose: these tests pin Slurm's behaviour, not ours.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace slurm_test {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

/// How a finished command ended.
struct outcome {
    bool exited = false;     ///< false: killed by a signal
    int code = -1;           ///< exit status when exited
    int signal = 0;          ///< the signal otherwise
    bool timed_out = false;  ///< the bound passed; the process group was killed
    std::string out, err;
    milliseconds wall{0};
};

/// A running command, leader of its own process group. Reads its pipes while waiting.
class child {
public:
    child(const std::vector<std::string>& argv, const std::vector<std::string>& env);
    ~child();  ///< kills the group if still running
    child(const child&) = delete;
    child& operator=(const child&) = delete;

    pid_t pid() const { return pid_; }
    /// Drains output until the child exits or `bound` passes (then SIGKILL to the group).
    outcome wait(milliseconds bound);
    /// True while the leader has not been reaped and exists.
    bool running() const;

private:
    pid_t pid_ = -1;
    int out_ = -1, err_ = -1;
    bool reaped_ = false;
    std::chrono::steady_clock::time_point started_;
};

/// Runs a command to its end within `bound`.
outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
            milliseconds bound = 30s);

/// Environment for Slurm clients: SLURM_CONF only (client_environment of src/runner/slurm).
std::vector<std::string> client_env(const std::vector<std::string>& extra = {});

/// A variable of this process's environment, or empty.
std::string env_or_empty(const char* name);

/// Absolute path of a Slurm client (srun, squeue, ...) from PATH, /usr/bin or /usr/sbin.
std::string tool(const std::string& name);

/// The whole /proc/PID/cmdline with NULs, or nullopt when it cannot be read.
std::optional<std::string> cmdline_of(pid_t pid);

/// Every pid in /proc.
std::vector<pid_t> all_pids();

/// Writes `text` to a short description of `o` for failure messages.
std::string describe(const outcome& o);

/// Sleeps; only between polls of Slurm's own state, which has no event to wait on.
void pause(milliseconds d);

}  // namespace slurm_test
