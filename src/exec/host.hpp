// Facts about this host and this process that the engine needs: identity (host name, pid,
// start time) for owner labels and dead-owner checks, file checks for the preflight, and
// the descriptor limit that bounds how many tasks can run at once.
#pragma once

#include <agentctl/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::exec {

/// This host's name (gethostname).
std::string host_name();

/// This process's id.
long own_pid();

/// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks since boot).
/// nullopt: no such process. Empty: it exists but its start time cannot be read (another
/// user's process under hidepid, say), which counts as live.
std::optional<std::string> process_start_time(long pid);

/// A variable of this process's environment.
std::optional<std::string> environment_variable(std::string_view name);

/// `digits` random hexadecimal digits from the system's entropy (run ids, container names).
std::string random_hex(int digits);

/// Whether `path` is a regular file this process may execute.
bool is_executable_file(const std::string& path);

/// The canonical absolute path of an existing `path` (realpath), or why not (the errno's text).
expected<std::string> canonical_path(const std::string& path);

/// The SHA-256 of this process's executable file (/proc/self/exe), 32 raw bytes: what says
/// that a worker and its driver are the same build (docs/WORKER.md, "Handshake"). Read once
/// per process, in 1 MiB pieces; later calls return the first answer. The error
/// (internal_error) says why the file could not be read.
const expected<std::string>& build_digest();

/// Raising RLIMIT_NOFILE for `jobs` tasks at once (each holds a few descriptors).
struct fd_budget {
    int jobs = 1;              ///< what fits: `jobs`, or fewer when the hard limit is too low
    std::uint64_t needed = 0;  ///< descriptors `jobs` needs
    std::uint64_t hard_limit = 0;
};
/// Raises the soft limit as far as needed (never above the hard limit) and says what fits.
fd_budget fit_jobs_to_fd_limit(int jobs);

}  // namespace agentctl::exec
