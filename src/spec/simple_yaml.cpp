// A fast path in front of the YAML library: documents written in a plain subset of YAML are
// turned into the tree directly, with the same nodes and marks as yaml-cpp's events give.
//
// yaml-cpp's scanner matches a small regular expression per character and costs about four
// fifths of `agentctl check` on a large workflow (docs/DESIGN.md, "Parser"). The subset here
// is what workflows are mostly made of: block mappings and lists, one-line flow collections,
// plain scalars on one line, quoted scalars without escapes, comments, ASCII only. Anything
// else (and any doubt: tabs, CR, anchors, tags, block scalars, empty values, multi-line
// scalars, document markers, long keys, text yaml-cpp would refuse) gives up, and the caller
// parses the whole text with yaml-cpp, so diagnostics keep yaml-cpp's reading of the text.
// The rules follow yaml-cpp 0.7's scanner (exp.h, scantoken.cpp, scanner.cpp); a test
// compares both trees on every YAML file of the repository.
#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <limits>
#include <string_view>

namespace agentctl::yaml {
namespace {

using kind_t = node::kind_t;
using tag_t = tree_builder::tag_t;

// Thrown to leave the subset; the builder is then dropped.
struct not_simple {};

// Below yaml-cpp's own limit of 1024 bytes for a key on one line.
constexpr std::size_t max_key_bytes = 1000;
// Well below max_depth: deep documents are rare and go through the library, after the
// nesting check that guards its recursion (which passes any document this path takes).
constexpr int max_simple_depth = 40;
constexpr int no_limit = std::numeric_limits<int>::max();

class simple_parser {
public:
    simple_parser(std::string_view source, tree_builder& builder) : s_(source), builder_(builder) {}

    void run() {
        unsigned char bits = 0;  // a loop the compiler vectorizes
        for (char c : s_) bits |= static_cast<unsigned char>(c);
        if (bits >= 0x80 || s_.find('\t') != s_.npos || s_.find('\r') != s_.npos || s_.find('\0') != s_.npos)
            throw not_simple{};
        builder_.start_document(1, 1, false);
        next_line(no_limit);
        if (indent_ < 0) throw not_simple{};  // no content: yaml-cpp's reading is kept
        block_collection(indent_);
        if (indent_ >= 0) throw not_simple{};  // text after the root
    }

private:
    // A scalar scanned but not yet given to the builder (a key is known only after it).
    struct scalar_token {
        std::size_t start = 0;  // first byte (the quote of a quoted scalar)
        std::string_view text;
        bool plain = true;
    };

    // NUL bytes are refused (here and by check_bytes), so '\0' marks the end of the text.
    char at(std::size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
    bool blank_or_end(std::size_t k) const {
        char c = at(k);
        return c == ' ' || c == '\n' || c == '\0';
    }
    int column() const { return static_cast<int>(i_ - line_start_); }  // 0-based, as yaml-cpp
    void skip_spaces() {
        while (at(i_) == ' ') ++i_;
    }
    // yaml-cpp's BlockEntry: `-` followed by a blank, a line break or the end.
    bool at_entry() const { return at(i_) == '-' && blank_or_end(i_ + 1); }

    void enter() {
        if (++depth_ > max_simple_depth) throw not_simple{};
    }
    void leave() { --depth_; }

    // Moves to the first character of the next line with content, past blank lines and
    // comment lines; indent_ is its column, or -1 at the end. A plain scalar that ended the
    // last line continues on a line indented more than `limit` (the enclosing collection's
    // column): such a document is left to yaml-cpp.
    void next_line(int limit) {
        indent_ = -1;
        while (i_ < s_.size()) {
            line_start_ = i_;
            skip_spaces();
            char c = at(i_);
            if (c == '\n') {
                ++i_;
                ++line_;
                continue;
            }
            if (c == '\0') return;
            if (column() > limit) throw not_simple{};
            limit = no_limit;
            if (c == '#') {
                while (at(i_) != '\n' && at(i_) != '\0') ++i_;
                continue;
            }
            // Directives and document markers.
            if (column() == 0 && (c == '%' || s_.compare(i_, 3, "---") == 0 || s_.compare(i_, 3, "...") == 0))
                throw not_simple{};
            indent_ = column();
            return;
        }
    }

    // After a node that ends its line: spaces, perhaps a comment, the line break.
    void end_line(int limit) {
        std::size_t before = i_;
        skip_spaces();
        if (at(i_) == '#' && i_ > before) {
            while (at(i_) != '\n' && at(i_) != '\0') ++i_;
        }
        if (at(i_) == '\n') {
            ++i_;
            ++line_;
        } else if (at(i_) != '\0') {
            throw not_simple{};
        }
        next_line(limit);
    }

    // A block mapping or list whose first line starts at i_, at `col`.
    void block_collection(int col) {
        if (at_entry())
            block_sequence(col);
        else
            block_mapping(col);
    }

    void block_sequence(int col) {
        enter();
        builder_.start_collection(kind_t::sequence, line_, col + 1, 0, tag_t::none, {});
        while (indent_ == col && at_entry()) {
            ++i_;
            skip_spaces();
            char c = at(i_);
            // An item on the next lines, an empty item or `- - x`.
            if (c == '\n' || c == '\0' || c == '#' || at_entry()) throw not_simple{};
            inline_node(col);
        }
        if (indent_ > col) throw not_simple{};
        builder_.end_collection();
        leave();
    }

    // What follows `- ` on its line: a compact mapping (`- key: value`) or one value.
    void inline_node(int parent) {
        char c = at(i_);
        if (c == '[' || c == '{' || !starts_scalar(false)) {
            line_value(parent);
            return;
        }
        std::size_t at_start = i_;
        int line = line_;
        scalar_token token = scan_block_scalar();
        if (at(i_) == ':' && blank_or_end(i_ + 1)) {
            i_ = at_start;  // the mapping scans its first key again
            line_ = line;
            block_mapping(column());
            return;
        }
        emit(token);
        end_line(token.plain ? parent : no_limit);
    }

    void block_mapping(int col) {
        enter();
        builder_.start_collection(kind_t::mapping, line_, col + 1, 0, tag_t::none, {});
        for (;;) {
            if (!starts_scalar(false)) throw not_simple{};
            scalar_token key = scan_block_scalar();
            if (at(i_) != ':' || !blank_or_end(i_ + 1) || i_ - key.start > max_key_bytes) throw not_simple{};
            // `key :` : yaml-cpp trims the space, but keep to what is certain.
            if (key.plain && at(i_ - 1) == ' ') throw not_simple{};
            emit(key);
            ++i_;
            skip_spaces();
            char c = at(i_);
            if (c == '\n' || c == '\0' || c == '#') {
                end_line(no_limit);
                if (indent_ > col)
                    block_collection(indent_);
                else if (indent_ == col && at_entry())
                    block_sequence(col);  // a list at the key's own column
                else
                    throw not_simple{};  // an empty value: yaml-cpp's null marks are its own
            } else {
                line_value(col);
            }
            if (indent_ != col) break;
            if (at_entry()) throw not_simple{};
        }
        if (indent_ > col) throw not_simple{};
        builder_.end_collection();
        leave();
    }

    // A value that starts and ends on this line, in a block collection at `parent`.
    void line_value(int parent) {
        char c = at(i_);
        if (c == '[' || c == '{') {
            flow_collection();
            end_line(no_limit);
            return;
        }
        if (!starts_scalar(false)) throw not_simple{};
        scalar_token token = scan_block_scalar();
        emit(token);
        end_line(token.plain ? parent : no_limit);
    }

    // yaml-cpp's PlainScalar / PlainScalarInFlow, and the quotes.
    bool starts_scalar(bool flow) const {
        char c = at(i_);
        if (c == '"' || c == '\'') return true;
        if (c == '\0' || c == ' ' || c == '\n') return false;
        if (std::string_view(",[]{}#&*!|>'\"%@`").find(c) != std::string_view::npos) return false;
        if (flow) {
            if (c == '?') return false;
            if (c == '-' || c == ':')
                return std::string_view(" \n,[]{}:?#").find(at(i_ + 1)) == std::string_view::npos &&
                       at(i_ + 1) != '\0';
            return true;
        }
        if (c == '-' || c == '?' || c == ':') return !blank_or_end(i_ + 1);
        return true;
    }

    scalar_token scan_block_scalar() {
        if (at(i_) == '"' || at(i_) == '\'') return scan_quoted();
        scalar_token token{i_, {}, true};
        // Ends at `: `, `:` at the end of a line, ` #` and the line break (ScanScalarEnd).
        for (;;) {
            char c = at(i_);
            if (c == '\n' || c == '\0') break;
            if (c == ':' && blank_or_end(i_ + 1)) break;
            if (c == ' ' && at(i_ + 1) == '#') break;
            ++i_;
        }
        token.text = trimmed(token.start, i_);
        return token;
    }

    scalar_token scan_flow_scalar() {
        if (at(i_) == '"' || at(i_) == '\'') return scan_quoted();
        scalar_token token{i_, {}, true};
        // Ends at `,`, `]`, `}` and `: ` (ScanScalarEndInFlow); the rest of its ends are left
        // to yaml-cpp, as is a flow collection over more than one line. A colon before
        // anything else belongs to the scalar, as `uses: action:x` in a flow mapping.
        for (;;) {
            char c = at(i_);
            if (c == ',' || c == ']' || c == '}') break;
            if (c == ':') {
                char next = at(i_ + 1);
                if (next == ' ') break;
                if (std::string_view(",]}\n").find(next) != std::string_view::npos || next == '\0')
                    throw not_simple{};
            }
            if (c == '\n' || c == '\0' || c == '[' || c == '{' || c == '?' || c == '#') throw not_simple{};
            ++i_;
        }
        token.text = trimmed(token.start, i_);
        return token;
    }

    // One line, no escapes: the text between the quotes is the value.
    scalar_token scan_quoted() {
        const char quote = at(i_);
        scalar_token token{i_, {}, false};
        std::size_t begin = ++i_;
        for (;;) {
            char c = at(i_);
            if (c == '\n' || c == '\0' || (quote == '"' && c == '\\')) throw not_simple{};
            if (c == quote) {
                if (quote == '\'' && at(i_ + 1) == '\'') throw not_simple{};
                break;
            }
            ++i_;
        }
        token.text = s_.substr(begin, i_ - begin);
        ++i_;
        return token;
    }

    std::string_view trimmed(std::size_t begin, std::size_t end) const {
        while (end > begin && s_[end - 1] == ' ') --end;
        return s_.substr(begin, end - begin);
    }

    // `[...]` or `{...}` closed on its own line.
    void flow_collection() {
        enter();
        const bool mapping = at(i_) == '{';
        const char close = mapping ? '}' : ']';
        builder_.start_collection(mapping ? kind_t::mapping : kind_t::sequence, line_, column() + 1, 0,
                                  tag_t::none, {});
        ++i_;
        skip_spaces();
        if (at(i_) == close) {
            ++i_;
        } else {
            for (;;) {
                if (mapping) {
                    if (!starts_scalar(true)) throw not_simple{};
                    scalar_token key = scan_flow_scalar();
                    // `key: value` only: no empty value, no space before the colon.
                    if (at(i_) != ':' || at(i_ + 1) != ' ' || at(i_ - 1) == ' ') throw not_simple{};
                    emit(key);
                    ++i_;
                    skip_spaces();
                }
                flow_item();
                skip_spaces();
                if (at(i_) == close) {
                    ++i_;
                    break;
                }
                if (at(i_) != ',') throw not_simple{};
                ++i_;
                skip_spaces();
                if (at(i_) == close || at(i_) == ',') throw not_simple{};  // a trailing or empty entry
            }
        }
        builder_.end_collection();
        leave();
    }

    void flow_item() {
        char c = at(i_);
        if (c == '[' || c == '{') {
            flow_collection();
            return;
        }
        if (!starts_scalar(true)) throw not_simple{};
        emit(scan_flow_scalar());
    }

    // As parse.cpp's adapter does: plain scalars that resolve to null are null nodes.
    void emit(const scalar_token& token) {
        int col = static_cast<int>(token.start - line_start_) + 1;
        if (!token.plain)
            builder_.scalar(line_, col, 0, tag_t::non_specific, {}, std::string(token.text));
        else if (resolve_plain(token.text) == scalar_type::null)
            builder_.null_value(line_, col, 0);
        else
            builder_.scalar(line_, col, 0, tag_t::none, {}, std::string(token.text));
        if (builder_.failed()) throw not_simple{};
    }

    std::string_view s_;
    tree_builder& builder_;
    std::size_t i_ = 0;
    std::size_t line_start_ = 0;
    int line_ = 1;
    int indent_ = -1;  // column of the current content line, -1 at the end
    int depth_ = 0;
};

}  // namespace

bool build_simple_tree(std::string_view source, tree_builder& builder) {
    try {
        simple_parser(source, builder).run();
        return true;
    } catch (const not_simple&) {
        return false;
    }
}

}  // namespace agentctl::yaml
