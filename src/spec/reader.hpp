// Strict, typed reading of a YAML tree: every problem becomes a located diagnostic and
// reading goes on, so one pass reports everything.
#pragma once

#include "spec/yaml_tree.hpp"

#include <agentctl/diagnostic.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentctl {

/// Parses YAML text into a tree (implemented with the YAML library in parse.cpp). Byte
/// checks, syntax errors and alias limits become diagnostics; nothing when any occurred.
/// `library_only`: skip the fast path for plain documents (simple_yaml.cpp), for tests.
std::optional<yaml::tree> read_yaml_tree(std::string_view source, const std::string& file, diagnostics& diags,
                                         bool library_only = false);

namespace yaml {
/// Builds the tree of a document written in a plain subset of YAML (simple_yaml.cpp), the
/// same tree, marks included, as yaml-cpp's events give. False for anything outside the
/// subset, the builder then unusable: the caller parses with yaml-cpp.
bool build_simple_tree(std::string_view source, tree_builder& builder);
}  // namespace yaml

/// A value in the tree and where diagnostics about it point: the key of a mapping entry,
/// the item of a sequence.
struct place {
    std::uint32_t node = 0;
    std::string path;  ///< dotted, e.g. spec.tasks[2].needs[0]; empty for the root
    int line = 0;
    int column = 0;
};

/// The YAML 1.2 core-schema type of a plain scalar, as this parser resolves it.
enum class scalar_type { null, boolean, integer, floating, string };
scalar_type resolve_plain(std::string_view text);

class tree_reader {
public:
    /// `locations` (optional) receives the place of every mapping key and sequence item read.
    tree_reader(const yaml::tree& t, std::string file, diagnostics& diags, source_map* locations)
        : tree_(t), file_(std::move(file)), diags_(diags), locations_(locations) {}

    place root() const;
    bool has_root() const { return tree_.has_root; }

    /// The node at `p` (aliases followed). Reports an unsupported tag (once per node).
    const yaml::node& node(const place& p);
    /// "mapping", "sequence", "string", "integer", ... for messages.
    std::string describe(const place& p);

    void error(const place& p, std::string code, std::string message, std::string help = {});
    void error_at(const place& p, std::string_view sub, std::string code, std::string message,
                  std::string help = {});

    bool is_null(const place& p) { return node(p).kind == yaml::node::kind_t::null; }
    /// The text of the scalar under `key` in the mapping at `p`, reporting nothing (nothing
    /// when `p` is no mapping or has no such scalar): lets a reader choose how to read the rest.
    std::optional<std::string> peek(const place& p, std::string_view key) const;

    /// A string: quoted, or any plain scalar but null, as written (`true` is "true"). Reports
    /// invalid_type, nul_byte, and empty_value unless `allow_empty`.
    std::optional<std::string> string(const place& p, bool allow_empty = false);
    /// `true` or `false` (plain); reports invalid_type for anything else.
    std::optional<bool> boolean(const place& p);
    std::optional<std::int64_t> integer(const place& p, std::int64_t min, std::int64_t max);
    std::optional<std::uint64_t> unsigned_integer(const place& p, std::uint64_t min, std::uint64_t max);
    /// Seconds written as a whole or decimal number with at most three decimals (`10`,
    /// `0.2`), returned in milliseconds and checked against [min_ms, max_ms].
    std::optional<std::int64_t> duration_ms(const place& p, std::int64_t min_ms, std::int64_t max_ms);

    /// One of `names` (the written text); reports invalid_value listing them.
    std::optional<std::size_t> choice(const place& p, std::initializer_list<std::string_view> names);

    /// Items of a sequence (null = none). Reports invalid_type for anything else.
    std::optional<std::vector<place>> sequence(const place& p);
    /// Whether to keep an item of a string list; it reports why not.
    using item_check = std::function<bool(const place& item, const std::string& value)>;
    /// A list of strings; each bad item is reported and skipped, and so is each that `keep`
    /// (if given) refuses.
    std::vector<std::string> string_list(const place& p, bool allow_empty_items = false,
                                         const item_check& keep = {});

    /// Entries of a mapping (null = none), in document order, without duplicates. Reports
    /// invalid_type, duplicate keys (`duplicate_code`) and keys that are not strings.
    std::optional<std::vector<std::pair<std::string, place>>> entries(
        const place& p, std::string_view duplicate_code = "duplicate_key");

    /// Any value as JSON (objects keep their order). Problems are reported and the value
    /// is replaced by null.
    boost::json::value json(const place& p);
    /// A mapping as a JSON object (null = empty).
    boost::json::object json_object(const place& p);

private:
    place child(const place& parent, std::string_view key, const yaml::node& key_node);
    place item(const place& parent, std::size_t index, std::uint32_t node);
    std::optional<std::string> key_text(const place& key_place);
    std::optional<std::string> scalar_text(const place& p, std::string_view expected);

    const yaml::tree& tree_;
    std::string file_;
    diagnostics& diags_;
    source_map* locations_;
    std::vector<std::uint32_t> reported_tags_;
};

/// The fields of one mapping with a fixed set of known keys. Unknown keys are reported
/// (with the nearest known one as help), duplicates too; fields are then fetched by name.
class fields {
public:
    fields(tree_reader& r, const place& mapping, std::initializer_list<std::string_view> known);

    /// False when the value was not a mapping (already reported).
    bool ok() const { return ok_; }
    std::optional<place> get(std::string_view key) const;
    /// Like get, reporting missing_field when absent.
    std::optional<place> require(std::string_view key);
    bool has(std::string_view key) const { return get(key).has_value(); }
    const place& where() const { return where_; }

private:
    tree_reader& reader_;
    place where_;
    bool ok_ = false;
    std::vector<std::pair<std::string, place>> entries_;
};

/// Fills `wf` from the tree; problems go to the reader's diagnostics.
void read_workflow(tree_reader& r, workflow& wf);

}  // namespace agentctl
