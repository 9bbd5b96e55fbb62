#include "spec/yaml_tree.hpp"

#include <algorithm>
#include <cstdio>

namespace agentctl::yaml {
namespace {

// Weights only need to be compared with a limit far below this; saturating keeps them exact
// up to it without overflow however deep the aliases go.
constexpr std::uint64_t weight_cap = std::uint64_t{1} << 48;

std::uint64_t add_weight(std::uint64_t a, std::uint64_t b) {
    return std::min(weight_cap, a + b);
}

// Length of the UTF-8 sequence starting at s[i], or 0 when it is invalid (overlong forms,
// surrogates and code points above U+10FFFF included).
std::size_t utf8_length(std::string_view s, std::size_t i) {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    return n;
}

}  // namespace

std::string_view tree::tag_of(std::uint32_t index) const {
    for (const auto& [i, tag] : tags)
        if (i == index) return tag;
    return {};
}

bool check_bytes(std::string_view source, tree_error& error, bool* ascii) {
    int line = 1, column = 1;
    bool all_ascii = true;
    for (std::size_t i = 0; i < source.size();) {
        auto c = static_cast<unsigned char>(source[i]);
        std::size_t length = 1;
        if (c == '\n') {
            ++line;
            column = 1;
            ++i;
            continue;
        }
        if (c == 0) {
            error = {"nul_byte", "the document contains a NUL byte", line, column, {}};
            return false;
        }
        // A lone CR ends a line for some YAML parsers and is text for others: refused, so
        // that no file means two things.
        if (c == '\r' && (i + 1 == source.size() || source[i + 1] != '\n')) {
            error = {"yaml_syntax", "a carriage return (U+000D) that is not followed by a line feed", line,
                     column, "end lines with LF or CRLF"};
            return false;
        }
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "U+%04X", c);
            error = {"yaml_syntax",
                     std::string("control character ") + hex + " is not allowed in YAML",
                     line,
                     column,
                     {}};
            return false;
        }
        if (c >= 0x80) {
            all_ascii = false;
            length = utf8_length(source, i);
            if (length == 0) {
                error = {"yaml_syntax", "the document is not valid UTF-8", line, column, {}};
                return false;
            }
        }
        i += length;
        ++column;
    }
    if (ascii) *ascii = all_ascii;
    return true;
}

int column_of(std::string_view source, std::size_t line_start, std::size_t offset) {
    int column = 1;
    offset = std::min(offset, source.size());
    for (std::size_t i = line_start; i < offset; ++i)
        if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) ++column;
    return column;
}

namespace {

// The scanner behind check_nesting. Positions are bytes; columns of the block stack are
// byte columns too, which is exact for indentation (spaces) and for the indicators that
// follow it on a line.
class nesting_scanner {
public:
    explicit nesting_scanner(std::string_view s) : s_(s) {}

    bool run(tree_error& error);

private:
    bool at_blank(std::size_t i) const {
        return i >= s_.size() || s_[i] == ' ' || s_[i] == '\t' || s_[i] == '\n' || s_[i] == '\r';
    }
    bool is_flow_indicator(std::size_t i) const {
        return i < s_.size() &&
               (s_[i] == ',' || s_[i] == '[' || s_[i] == ']' || s_[i] == '{' || s_[i] == '}');
    }
    void newline() {
        ++line_;
        line_start_ = i_;
    }
    // Moves past a quoted scalar starting at i_ (its quote). False at the end of the text:
    // the scalar is unterminated, which the parser's adapter reports.
    bool skip_quoted();
    // Moves past a tag, anchor or alias token.
    void skip_token() {
        while (i_ < s_.size() && !at_blank(i_) && !(flow_ > 0 && is_flow_indicator(i_))) ++i_;
    }
    void skip_to_line_end() {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
    }
    // Moves past the content lines of a block scalar whose header is on the current line.
    void skip_block_scalar();
    std::size_t depth() const { return block_.size() + static_cast<std::size_t>(flow_); }
    // A block collection entry (`- `, `? ` or an implicit key) at byte column `col`.
    void open_block(std::size_t col) {
        while (!block_.empty() && block_.back() > col) block_.pop_back();
        if (block_.empty() || block_.back() < col) block_.push_back(col);
    }
    bool too_deep(std::size_t at, tree_error& error) const {
        error = {"yaml_syntax", "the document nests deeper than " + std::to_string(max_depth) + " levels",
                 line_, column_of(s_, line_start_, at), "flatten the data, or move it into an inputs file"};
        return false;
    }

    std::string_view s_;
    std::size_t i_ = 0;
    int line_ = 1;
    std::size_t line_start_ = 0;
    int flow_ = 0;
    std::vector<std::size_t> block_;  // byte columns of open block collections, increasing
};

bool nesting_scanner::skip_quoted() {
    const char quote = s_[i_++];
    while (i_ < s_.size()) {
        char c = s_[i_++];
        if (c == '\n') {
            newline();
        } else if (quote == '"' && c == '\\') {
            if (i_ < s_.size() && s_[i_] != '\n') ++i_;
        } else if (c == quote) {
            if (quote == '\'' && i_ < s_.size() && s_[i_] == '\'') {
                ++i_;
                continue;
            }
            return true;
        }
    }
    return false;
}

void nesting_scanner::skip_block_scalar() {
    // Content lines are blank or indented more than the collection holding the scalar.
    const std::size_t parent = block_.empty() ? 0 : block_.back();
    const bool top_level = block_.empty();
    skip_to_line_end();
    while (i_ < s_.size()) {
        std::size_t j = i_ + 1, indent = 0;
        while (j < s_.size() && s_[j] == ' ') ++j, ++indent;
        bool blank =
            j >= s_.size() || s_[j] == '\n' || (s_[j] == '\r' && j + 1 < s_.size() && s_[j + 1] == '\n');
        if (!blank && (top_level ? indent == 0 : indent <= parent)) return;  // i_ at that line's '\n'
        ++i_;
        newline();
        skip_to_line_end();
    }
}

bool nesting_scanner::run(tree_error& error) {
    const std::size_t n = s_.size();
    bool plain_open = false;  // the last content line ended inside a plain scalar (block context)
    std::size_t last_indent = 0;
    while (i_ < n) {
        // Start of a line.
        std::size_t indent = 0;
        while (i_ < n && s_[i_] == ' ') ++i_, ++indent;
        if (i_ >= n) break;
        if (s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '#') {
            skip_to_line_end();
            if (i_ < n) ++i_, newline();
            continue;
        }
        bool node_start = true;
        if (flow_ == 0) {
            if (indent == 0 && s_[i_] == '%') {
                skip_to_line_end();
                if (i_ < n) ++i_, newline();
                continue;
            }
            if (indent == 0 && n - i_ >= 3 &&
                (s_.compare(i_, 3, "---") == 0 || s_.compare(i_, 3, "...") == 0) && at_blank(i_ + 3)) {
                block_.clear();
                i_ += 3;
            } else if (plain_open && indent > last_indent) {
                node_start = false;  // a plain scalar continued on a more indented line
            } else {
                while (!block_.empty() && block_.back() > indent) block_.pop_back();
            }
            last_indent = indent;
        }
        std::size_t key_col = i_ - line_start_;  // where the node that may turn out a key began
        bool plain = !node_start;
        while (i_ < n && s_[i_] != '\n') {
            const char c = s_[i_];
            if (c == ' ' || c == '\t' || c == '\r') {
                ++i_;
                continue;
            }
            if (c == '#' && (i_ == line_start_ || s_[i_ - 1] == ' ' || s_[i_ - 1] == '\t')) {
                skip_to_line_end();
                break;
            }
            const std::size_t col = i_ - line_start_;
            if (flow_ > 0) {
                if (c == '[' || c == '{') {
                    ++flow_;
                    if (depth() > static_cast<std::size_t>(max_depth)) return too_deep(i_, error);
                    node_start = true;
                    plain = false;
                } else if (c == ']' || c == '}') {
                    --flow_;
                    node_start = plain = false;
                } else if (c == ',') {
                    node_start = true;
                    plain = false;
                } else if (node_start && (c == '"' || c == '\'')) {
                    if (!skip_quoted()) return true;
                    node_start = false;
                    continue;
                } else if (node_start && (c == '!' || c == '&' || c == '*')) {
                    skip_token();
                    node_start = c != '*';
                    continue;
                } else if (c == ':' && (!plain || at_blank(i_ + 1) || is_flow_indicator(i_ + 1))) {
                    node_start = true;
                    plain = false;
                } else if (node_start && (c == '?' || c == '-') && at_blank(i_ + 1)) {
                    // an indicator; a node may still start after it
                } else {
                    node_start = false;
                    plain = true;
                }
                ++i_;
                continue;
            }
            if (node_start) {
                if ((c == '-' || c == '?') && at_blank(i_ + 1)) {
                    open_block(col);
                    if (depth() > static_cast<std::size_t>(max_depth)) return too_deep(i_, error);
                    ++i_;
                    continue;
                }
                if (c == ':' && at_blank(i_ + 1)) {  // the value of an explicit `? key`
                    ++i_;
                    continue;
                }
                if (c == '!' || c == '&') {
                    skip_token();
                    continue;
                }
                key_col = col;
                node_start = false;
                if (c == '[' || c == '{') {
                    flow_ = 1;
                    if (depth() > static_cast<std::size_t>(max_depth)) return too_deep(i_, error);
                    node_start = true;
                } else if (c == '"' || c == '\'') {
                    if (!skip_quoted()) return true;
                    continue;
                } else if (c == '|' || c == '>') {
                    skip_block_scalar();
                    plain = false;
                    break;
                } else if (c == '*') {
                    skip_token();
                    continue;
                } else {
                    plain = true;
                }
                ++i_;
                continue;
            }
            if (c == ':' && at_blank(i_ + 1)) {  // the node that began at key_col was a key
                open_block(key_col);
                if (depth() > static_cast<std::size_t>(max_depth))
                    return too_deep(line_start_ + key_col, error);
                node_start = true;
                plain = false;
            }
            ++i_;
        }
        plain_open = flow_ == 0 && plain;
        if (i_ < n) ++i_, newline();
    }
    return true;
}

}  // namespace

bool check_nesting(std::string_view source, tree_error& error) {
    return nesting_scanner(source).run(error);
}

void tree_builder::fail(std::string code, std::string message, int line, int column, std::string help) {
    errors_.push_back({std::move(code), std::move(message), line, column, std::move(help)});
}

std::uint32_t tree_builder::add(node n, std::size_t anchor, tag_t tag, std::string_view tag_text) {
    auto index = static_cast<std::uint32_t>(tree_.nodes.size());
    if (tag == tag_t::other) {
        n.bad_tag = true;
        tree_.tags.emplace_back(index, std::string(tag_text));
    }
    if (!open_.empty()) {
        open_items_.push_back(index);
    } else if (!tree_.has_root) {
        tree_.root = index;
        tree_.has_root = true;
    }
    if (anchor != 0) {
        if (anchors_.size() <= anchor) anchors_.resize(anchor + 1, 0);
        anchors_[anchor] = index;
    }
    tree_.nodes.push_back(std::move(n));
    ++written_nodes_;
    return index;
}

void tree_builder::start_document(int line, int column, bool marker) {
    if (++documents_ == 1) return;
    if (marker)
        fail("yaml_syntax", "a workflow file holds one YAML document, but a second one starts here", line,
             column);
    else
        fail("yaml_syntax", "this line does not continue the document above", line, column);
}

void tree_builder::null_value(int line, int column, std::size_t anchor) {
    node n;
    n.line = line;
    n.column = column;
    add(std::move(n), anchor, tag_t::none, {});
}

void tree_builder::scalar(int line, int column, std::size_t anchor, tag_t tag, std::string_view tag_text,
                          std::string value) {
    node n;
    n.kind = node::kind_t::scalar;
    // An unsupported tag is reported by the readers; the text is still resolved as written.
    n.plain = tag == tag_t::none || tag == tag_t::other;
    n.line = line;
    n.column = column;
    n.text = std::move(value);
    add(std::move(n), anchor, tag, tag_text);
}

void tree_builder::alias(int line, int column, std::size_t anchor) {
    if (anchor == 0 || anchor >= anchors_.size()) {
        fail("yaml_syntax", "alias to an unknown anchor", line, column);
        return;
    }
    std::uint32_t target = anchors_[anchor];
    if (std::any_of(open_.begin(), open_.end(),
                    [&](const open_collection& c) { return c.index == target; })) {
        fail("yaml_alias_limit", "this alias refers to a node that contains it (infinite expansion)", line,
             column);
        return;
    }
    node n;
    n.kind = node::kind_t::alias;
    n.line = line;
    n.column = column;
    n.target = target;
    n.weight = tree_.nodes[target].weight;
    n.height = tree_.nodes[target].height;
    add(std::move(n), 0, tag_t::none, {});
}

void tree_builder::start_collection(node::kind_t kind, int line, int column, std::size_t anchor, tag_t tag,
                                    std::string_view tag_text) {
    if (static_cast<int>(open_.size()) >= max_depth) {
        fail("yaml_syntax", "the document nests deeper than " + std::to_string(max_depth) + " levels", line,
             column);
        return;
    }
    node n;
    n.kind = kind;
    n.line = line;
    n.column = column;
    std::uint32_t index = add(std::move(n), anchor, tag, tag_text);
    open_.push_back({index, open_items_.size()});
}

void tree_builder::end_collection() {
    const open_collection c = open_.back();
    open_.pop_back();
    node& n = tree_.nodes[c.index];
    n.items.assign(open_items_.begin() + static_cast<std::ptrdiff_t>(c.first_item), open_items_.end());
    open_items_.resize(c.first_item);
    std::uint64_t weight = 1;
    int height = 0;
    for (std::uint32_t item : n.items) {
        weight = add_weight(weight, tree_.nodes[item].weight);
        height = std::max(height, tree_.nodes[item].height);
    }
    n.weight = weight;
    n.height = height + 1;
    if (n.height > max_depth)
        fail(
            "yaml_alias_limit",
            "with its aliases expanded, this node nests deeper than " + std::to_string(max_depth) + " levels",
            n.line, n.column);
}

bool tree_builder::finish() {
    if (failed()) return false;
    if (!tree_.has_root) return true;
    const node& root = tree_.nodes[tree_.root];
    if (root.weight > written_nodes_ + max_alias_expansion) {
        auto first_alias = std::find_if(tree_.nodes.begin(), tree_.nodes.end(),
                                        [](const node& n) { return n.kind == node::kind_t::alias; });
        fail("yaml_alias_limit",
             "aliases expand the document by more than " + std::to_string(max_alias_expansion) + " nodes",
             first_alias->line, first_alias->column);
        return false;
    }
    return true;
}

}  // namespace agentctl::yaml
