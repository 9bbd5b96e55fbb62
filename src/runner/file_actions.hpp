// builtin.read and builtin.write: one attempt's file effect, beneath the workspace root the
// preflight opened (docs/DESIGN.md, "Files"). The paths are checked here, the files touched
// through src/exec.
#pragma once

#include "runner/launcher.hpp"

#include <agentctl/attempt.hpp>
#include <agentctl/task_result.hpp>

#include <cstdint>

namespace agentctl {

/// The reference's bounds: the largest file builtin.read returns (and builtin.write reads back
/// as its `before`), and the largest file builtin.write writes.
inline constexpr std::uint64_t max_read_file_bytes = 1024 * 1024;
inline constexpr std::uint64_t max_written_file_bytes = 16 * 1024 * 1024;

/// Bytes builtin.write wrote in this run, against budgets.maxArtifactBytes. One per run,
/// owned by the runner; attempts run on one executor, so checking and counting never race.
struct artifact_ledger {
    std::uint64_t written = 0;
};

/// builtin.read: `with.path` (relative to the workspace root, or absolute beneath it) read
/// whole, at most max_read_file_bytes of UTF-8 text: `{status: unchanged, changed: false,
/// content}`. Fails with input_invalid, path_not_allowed or file_error.
task_result run_read(const launch_context& ctx, const attempt_request& request);

/// builtin.write: `with.content` written to `with.path`, which must lie beneath a
/// policy.writableRoots entry (relative ones beneath the workspace root, made when missing),
/// replacing the file whole (exec/file_write.hpp). The result is the reference's `{status,
/// changed, before, after, diff, path, predictability}`; `diff` is text with settings.diff,
/// else null. Nothing is written when the content is already there, nor with settings.check.
/// Fails with input_invalid, path_not_allowed, file_error or budget_exceeded (the write would
/// pass budgets.maxArtifactBytes), writing nothing.
task_result run_write(const launch_context& ctx, const attempt_request& request, artifact_ledger& ledger);

/// The reference's diff of a write: "" when nothing changes, else `--- before`, `+++ after`,
/// then every line of `before` prefixed by "-" and every line of `after` by "+" (a missing
/// file is empty).
std::string write_diff(const std::optional<std::string>& before, std::string_view after);

}  // namespace agentctl
