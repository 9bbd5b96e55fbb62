// Internals shared by the plan compiler and the plan writers.
#pragma once

#include <agentctl/plan.hpp>

#include <string>

namespace agentctl::detail {

/// "sha256:<hex>" of the canonical plan JSON without the planDigest member, computed by
/// streaming the JSON through the hash (no copy of the document is kept).
std::string compute_plan_digest(const plan& p);

/// Width of the zero-padded index in child ids: at least 4, and enough for `count - 1`.
std::size_t child_index_width(std::size_t count);

/// `PARENT--NNNN`.
std::string child_id(const std::string& parent, std::size_t index, std::size_t width);

}  // namespace agentctl::detail
