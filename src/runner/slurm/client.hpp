// Talking to Slurm from the runner: finding its commands, bounded calls of them, the batched
// squeue listings and the cancel-then-confirm of jobs. The argument vectors and the parsing
// are pure (job, command, classify); what Slurm does with them is measured in docs/SLURM.md.
#pragma once

#include "runner/slurm/job.hpp"

#include <agentctl/error.hpp>
#include <agentctl/process_types.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::slurm {

/// The Slurm commands a run uses, resolved in agentctl's PATH (absolute paths).
struct tools {
    std::string srun, squeue, scancel, scontrol, sinfo;
};

/// Every call's bound: a hung controller answers no client within its MessageTimeout (10 s
/// by default), a stopped one makes srun, squeue and scancel retry for 9 s.
inline constexpr std::chrono::seconds call_timeout{15};
/// Per stream, for a call that expects a line or two.
inline constexpr std::uint64_t default_output_limit = 64 * 1024;

/// The names of the commands, in the order tools lists them.
inline constexpr std::string_view tool_names[] = {"srun", "squeue", "scancel", "scontrol", "sinfo"};

/// Resolves one command in `search_path` (a bare name, as for a host executable).
expected<std::string> find_tool(std::string_view name, std::string_view search_path);

/// Runs `argv` (argv[0] absolute) with exactly `env`, bounded by `timeout` and
/// `output_limit` per stream, in its own process group. Not cancellable unless `cancellable`.
boost::asio::awaitable<process_result> call(std::vector<std::string> argv, std::vector<std::string> env,
                                            bool cancellable = false,
                                            std::uint64_t output_limit = default_output_limit,
                                            std::chrono::milliseconds timeout = call_timeout);

/// "exit status 1", "no answer within 15 s", ... for a call with `output_limit`.
std::string describe(const process_result& r, std::uint64_t output_limit = default_output_limit);
/// One line of `text` for a message (newlines folded, at most 512 bytes).
std::string excerpt(std::string_view text);

/// A listing: the entries, or why there are none.
struct listing {
    bool ok = false;
    std::vector<queue_entry> entries;
    std::string error;  ///< when !ok: the command and what it said
};

/// `squeue --states=all` of these names (one call per chunk; one failed chunk fails it all).
boost::asio::awaitable<listing> list_by_names(const std::string& squeue,
                                              const std::vector<std::string>& names,
                                              const std::vector<std::string>& env);

/// `squeue --me`: this user's jobs that are not final.
boost::asio::awaitable<listing> list_mine(const std::string& squeue, const std::vector<std::string>& env);

/// What cancel_and_confirm achieved.
struct removal {
    std::vector<queue_entry> gone;  ///< cancelled and no longer pending, running or completing
    std::vector<queue_entry> left;  ///< still listed as active when the bound passed
    std::string error;              ///< a listing failed (then `left` is what was last seen)
};

/// Cancels `jobs` (SIGKILL to each step, then scancel of the jobs) and lists this user's jobs
/// until none of them is active any more, or `bound` passes; the cancellation is repeated
/// every few seconds meanwhile. Not cancellable.
boost::asio::awaitable<removal> cancel_and_confirm(const tools& t, const std::vector<std::string>& env,
                                                   std::vector<queue_entry> jobs,
                                                   std::chrono::milliseconds bound);

/// "ID NAME" of a job, for reports.
std::string job_text(const queue_entry& e);

}  // namespace agentctl::slurm
