// Internals shared by the plan compiler, the plan's accessors and the plan writers.
#pragma once

#include <agentctl/plan.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::detail {

/// "sha256:<hex>" of the canonical plan JSON without the planDigest member, computed by
/// streaming the JSON through the hash (no copy of the document is kept).
std::string compute_plan_digest(const plan& p);

/// Width of the zero-padded index in child ids: at least 4, and enough for `count - 1`.
std::size_t child_index_width(std::size_t count);

/// `PARENT--NNNN`.
std::string child_id(const std::string& parent, std::size_t index, std::size_t width);

/// A child id split into its parent's id and its index digits: `fan--0012` -> {"fan", "0012"};
/// nullopt when `id` does not have that shape.
struct child_id_parts {
    std::string_view parent;
    std::string_view digits;
};
std::optional<child_id_parts> split_child_id(std::string_view id);

/// Item `k`'s bindings: `{AS: item, foreachIndex: k}` or `{matrix: {axis: value, ...},
/// matrixIndex: k}` (mixed radix over the axes by name, the last fastest).
boost::json::object expansion_bindings(const plan_expansion& e, std::uint64_t k);

/// What makes child `k` of an expansion itself: rendered from its template (`p.nodes[e.node]`)
/// and its bindings as the compiler rendered it when it checked the plan.
struct child_parts {
    std::string id;
    boost::json::object vars;
    boost::json::value with;                       ///< rendered, or the template when with_deferred
    std::optional<std::vector<std::string>> args;  ///< rendered when the action's args or cwd are templated
    std::optional<std::string> cwd;
};
child_parts render_child(const plan& p, const plan_expansion& e, std::uint32_t k);

}  // namespace agentctl::detail
