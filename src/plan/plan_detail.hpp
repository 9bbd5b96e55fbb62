// Internals shared by the plan compiler, the plan's accessors and the plan writers.
#pragma once

#include <agentctl/plan.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <cstdint>
#include <memory>
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

/// The reference's digest of a child's bindings: the sha256 of `bindings` as compact JSON,
/// its top-level keys sorted; its first 6 bytes (12 hex digits) are kept.
std::array<std::uint8_t, 6> binding_digest(const boost::json::object& bindings);

/// `PARENT--NNNN-DIGEST`, the reference's child id (docs/DESIGN.md, "Plan").
std::string child_id(std::string_view parent, std::size_t index, std::size_t width,
                     const std::array<std::uint8_t, 6>& digest);

/// The id of child `k` of `e`, whose parent is `parent`.
std::string child_id(const plan_expansion& e, std::string_view parent, std::uint64_t k);

/// The same ids appended to `out`: the plan writers name 100 000 children each pass, into one
/// reused string instead of a new one per id.
void append_child_id(std::string& out, std::string_view parent, std::size_t index, std::size_t width,
                     const std::uint8_t* digest);
void append_child_id(std::string& out, const plan_expansion& e, std::string_view parent, std::uint64_t k);

/// A child id split into its parent's id, its index digits and its digest:
/// `fan--0012-0123456789ab` -> {"fan", "0012", "0123456789ab"}; nullopt when `id` does not
/// have that shape.
struct child_id_parts {
    std::string_view parent;
    std::string_view digits;
    std::string_view digest;
};
std::optional<child_id_parts> split_child_id(std::string_view id);

/// Item `k`'s bindings: `{AS: item, foreachIndex: k}` or `{matrix: {axis: value, ...},
/// matrixIndex: k}` (mixed radix over the axes by name, the last fastest).
boost::json::object expansion_bindings(const plan_expansion& e, std::uint64_t k);
/// Iteration `k`'s bindings of a loop whose iterations' `loopPrevious` are `previous`:
/// `{loopIndex: k, loopPrevious: previous[k]}`.
boost::json::object loop_bindings(const boost::json::array& previous, std::uint64_t k);
/// The same from the parts of an expansion (`items` for a foreach; `axes` by name for a matrix).
boost::json::object expansion_bindings(
    std::string_view as, const boost::json::array* items,
    const std::vector<std::pair<std::string, const boost::json::array*>>& axes, std::uint64_t k);

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

/// The children of one expansion, with its templates parsed once: render_child() and
/// plan::task() for many children of the same expansion (writing a plan of 100 000 children
/// would otherwise parse the same templates 100 000 times, and copy the template node each time).
class child_renderer {
public:
    child_renderer(const plan& p, const plan_expansion& e);
    ~child_renderer();
    child_renderer(const child_renderer&) = delete;
    child_renderer& operator=(const child_renderer&) = delete;

    child_parts render(std::uint32_t k) const;
    /// Child `k` as plan::task() returns it; overwritten by the next call (and not to be
    /// moved from unless it is the last).
    plan_task& task(std::uint32_t k);

private:
    struct templates;
    const plan& plan_;
    const plan_expansion& expansion_;
    std::unique_ptr<const templates> templates_;
    std::optional<plan_task> task_;  // the template node, each child's own fields written over it
};

}  // namespace agentctl::detail
