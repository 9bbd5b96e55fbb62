// A bounded, blocking run of a helper program (an engine client, scancel) for the watchdog,
// which is a process of its own with nothing else to do meanwhile. Private to src/exec.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace agentctl::exec {

struct blocking_result {
    bool started = false;  ///< false: posix_spawn failed (error says why)
    bool timed_out = false;
    int exit_code = -1;  ///< when it exited normally
    int signal = 0;      ///< when it died of a signal
    std::string out;     ///< stdout, at most 64 KiB
    std::string err;     ///< stderr, at most 64 KiB
    std::string error;
    bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
    std::string describe() const;  ///< "exit status 1: <stderr excerpt>", "timed out after N ms", ...
};

/// Runs `path` with `argv` (argv[0] included) and exactly `env`, in a new session, stdin
/// /dev/null, default signal dispositions and an empty mask. Kills its process group when
/// `timeout` passes. Not for the library's own runs: those go through async_run_process.
blocking_result run_blocking(const std::string& path, const std::vector<std::string>& argv,
                             const std::vector<std::string>& env, std::chrono::milliseconds timeout);

}  // namespace agentctl::exec
