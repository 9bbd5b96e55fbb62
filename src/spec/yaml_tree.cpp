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

bool check_bytes(std::string_view source, tree_error& error) {
    int line = 1, column = 1;
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
            error = {"nul_byte", "the document contains a NUL byte", line, column};
            return false;
        }
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "U+%04X", c);
            error = {"yaml_syntax", std::string("control character ") + hex + " is not allowed in YAML", line,
                     column};
            return false;
        }
        if (c >= 0x80) {
            length = utf8_length(source, i);
            if (length == 0) {
                error = {"yaml_syntax", "the document is not valid UTF-8", line, column};
                return false;
            }
        }
        i += length;
        ++column;
    }
    return true;
}

void tree_builder::fail(std::string code, std::string message, int line, int column) {
    errors_.push_back({std::move(code), std::move(message), line, column});
}

std::uint32_t tree_builder::add(node n, std::size_t anchor, tag_t tag, std::string_view tag_text) {
    auto index = static_cast<std::uint32_t>(tree_.nodes.size());
    if (tag == tag_t::other) {
        n.bad_tag = true;
        tree_.tags.emplace_back(index, std::string(tag_text));
    }
    if (!open_.empty()) {
        tree_.nodes[open_.back()].items.push_back(index);
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

void tree_builder::start_document(int line, int column) {
    if (++documents_ > 1)
        fail("yaml_syntax", "a workflow file holds one YAML document, but a second one starts here", line,
             column);
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
    if (std::find(open_.begin(), open_.end(), target) != open_.end()) {
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
    open_.push_back(add(std::move(n), anchor, tag, tag_text));
}

void tree_builder::end_collection() {
    std::uint32_t index = open_.back();
    open_.pop_back();
    node& n = tree_.nodes[index];
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
