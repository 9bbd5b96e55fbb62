// A light YAML tree built from parser events, independent of the YAML library.
//
// Nodes live in one vector and refer to each other by index. Aliases stay nodes of their
// own (with their own mark) that point at the anchored node, so expansion costs nothing
// here; `weight` and `height` say how large and deep a node is once aliases are expanded,
// which is what the readers walk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::yaml {

/// Deepest nesting accepted, counted in collections, aliases expanded.
inline constexpr int max_depth = 100;
/// Nodes that alias expansion may add beyond those written in the document.
inline constexpr std::uint64_t max_alias_expansion = 100000;

struct node {
    enum class kind_t : std::uint8_t { null, scalar, sequence, mapping, alias };
    kind_t kind = kind_t::null;
    /// A scalar written without quotes or `!!str`: its type is resolved from its text.
    bool plain = false;
    /// The node carries a tag this parser does not understand (in `tree::tags`).
    bool bad_tag = false;
    int line = 0;                      ///< 1-based
    int column = 0;                    ///< 1-based
    std::uint32_t target = 0;          ///< alias: index of the anchored node, never itself an alias
    std::uint64_t weight = 1;          ///< nodes after alias expansion, this one included
    int height = 0;                    ///< collection nesting after alias expansion
    std::string text;                  ///< scalar value
    std::vector<std::uint32_t> items;  ///< sequence: items; mapping: key, value, key, value...
};

/// A problem found while building the tree, already located.
struct tree_error {
    std::string code;
    std::string message;
    int line = 0;
    int column = 0;
    std::string help;  ///< empty: the caller chooses one by code
};

struct tree {
    std::vector<node> nodes;
    std::uint32_t root = 0;
    bool has_root = false;
    std::vector<std::pair<std::uint32_t, std::string>> tags;  ///< bad_tag nodes and their tag

    /// The node itself, or for an alias the anchored node.
    const node& resolve(std::uint32_t index) const {
        const node& n = nodes[index];
        return n.kind == node::kind_t::alias ? nodes[n.target] : n;
    }
    std::string_view tag_of(std::uint32_t index) const;
};

/// Receives parser events (1-based marks) and builds a `tree`. Limits on depth and alias
/// expansion are enforced here; after the first error the caller should stop parsing.
class tree_builder {
public:
    /// How the YAML library reports a tag: `?` none (plain), `!` non-specific (quoted).
    enum class tag_t { none, non_specific, string, other };

    /// `marker`: the document starts with `---` (a second document without one is text
    /// that does not continue the first, and is reported as such).
    void start_document(int line, int column, bool marker = true);
    void null_value(int line, int column, std::size_t anchor);
    void scalar(int line, int column, std::size_t anchor, tag_t tag, std::string_view tag_text,
                std::string value);
    void alias(int line, int column, std::size_t anchor);
    void start_collection(node::kind_t kind, int line, int column, std::size_t anchor, tag_t tag,
                          std::string_view tag_text);
    void end_collection();

    /// Checks the whole-tree limits; returns the tree or records an error.
    bool finish();
    /// Errors so far; a non-empty list means the tree is unusable.
    const std::vector<tree_error>& errors() const { return errors_; }
    bool failed() const { return !errors_.empty(); }
    tree& result() { return tree_; }

    /// Hint for the number of nodes, to size storage once.
    void reserve(std::size_t nodes) { tree_.nodes.reserve(nodes); }

    /// Records an error found by the caller (the tree is then unusable).
    void fail(std::string code, std::string message, int line, int column, std::string help = {});

private:
    std::uint32_t add(node n, std::size_t anchor, tag_t tag, std::string_view tag_text);

    tree tree_;
    struct open_collection {
        std::uint32_t index;     // its node
        std::size_t first_item;  // its first item in open_items_
    };
    std::vector<open_collection> open_;  // collections being built, innermost last
    // Items of the open collections, innermost last: each collection gets its list once, at
    // its end, in one allocation of the right size instead of one per doubling.
    std::vector<std::uint32_t> open_items_;
    std::vector<std::uint32_t> anchors_;  // anchor id -> node index
    std::vector<tree_error> errors_;
    int documents_ = 0;
    std::size_t written_nodes_ = 0;
};

/// Checks raw bytes before parsing: NUL bytes (`nul_byte`), other control characters, a
/// carriage return not followed by a line feed, and invalid UTF-8 (`yaml_syntax`). Returns
/// the first problem, if any. `ascii`, when given, is set when no byte is above 0x7F.
bool check_bytes(std::string_view source, tree_error& error, bool* ascii = nullptr);

/// A linear look at the text before the YAML library parses it: refuses nesting deeper than
/// max_depth (flow `[`/`{` and block collections together), so that a parser that recurses
/// per level is never handed more levels than the tree accepts. It counts only openings it
/// is sure of (outside quotes, comments and block scalars), so a document it passes may
/// still be refused by the tree builder, never the other way round.
bool check_nesting(std::string_view source, tree_error& error);

/// The 1-based column of byte `offset` on the line starting at byte `line_start`, counted in
/// code points (as the byte checks count them).
int column_of(std::string_view source, std::size_t line_start, std::size_t offset);

}  // namespace agentctl::yaml
