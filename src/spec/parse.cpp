// YAML text -> tree (the only use of the YAML library in the project) -> workflow.
//
// yaml-cpp's event API (YAML::Parser + YAML::EventHandler, a mark per event) feeds a tree of
// our own (spec/yaml_tree.hpp). Before yaml-cpp sees the text, the bytes and the nesting are
// checked (yaml-cpp recurses once per level); while it parses, the adapter below refuses
// what yaml-cpp would accept silently (an unterminated quoted scalar at the end of the text,
// a line without `:` in a block mapping, text after the document). yaml-cpp throws on syntax
// errors: every exception stops here and becomes a located `yaml_syntax` with our words.
// docs/DESIGN.md, "Parser", lists these choices.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <istream>
#include <streambuf>

namespace agentctl {
namespace {

using tag_t = yaml::tree_builder::tag_t;

// yaml-cpp reads from a std::istream; this one reads the caller's bytes in place.
class memory_buffer : public std::streambuf {
public:
    explicit memory_buffer(std::string_view bytes) {
        char* begin = const_cast<char*>(bytes.data());  // never written: get area only
        setg(begin, begin, begin + bytes.size());
    }
};

// Thrown by the handler to stop yaml-cpp once the tree has an error; caught below.
struct stop_parsing {};

// `?` is yaml-cpp's tag of a plain node without a tag, `!` of a quoted one.
tag_t classify_tag(const std::string& tag) {
    if (tag.empty() || tag == "?") return tag_t::none;
    if (tag == "!") return tag_t::non_specific;
    if (tag == "tag:yaml.org,2002:str") return tag_t::string;
    return tag_t::other;
}

/// Converts yaml-cpp marks (0-based, byte columns, offsets after a byte order mark) to ours
/// (1-based, code point columns, as the byte checks count them).
class mark_converter {
public:
    mark_converter(std::string_view source, bool ascii) : source_(source), ascii_(ascii) {
        if (source.substr(0, 3) == "\xEF\xBB\xBF") bom_ = 3;
    }

    int line(const YAML::Mark& m) const { return m.line < 0 ? 0 : m.line + 1; }

    int column(const YAML::Mark& m) {
        if (m.pos < 0 || m.column < 0) return 0;
        if (ascii_) return m.column + 1;
        std::size_t pos = std::min(source_.size(), static_cast<std::size_t>(m.pos) + bom_);
        std::size_t line_start = pos - std::min(pos, static_cast<std::size_t>(m.column));
        // Marks mostly move forward along a line: count from the last one, not the line start.
        if (line_start != line_start_ || pos < pos_) {
            line_start_ = pos_ = line_start;
            columns_ = 1;
        }
        columns_ += yaml::column_of(source_, pos_, pos) - 1;
        pos_ = pos;
        return columns_;
    }

    std::size_t offset(const YAML::Mark& m) const {
        return m.pos < 0 ? source_.size() : std::min(source_.size(), static_cast<std::size_t>(m.pos) + bom_);
    }

private:
    std::string_view source_;
    bool ascii_;
    std::size_t bom_ = 0;
    std::size_t line_start_ = 0, pos_ = 0;
    int columns_ = 1;
};

/// yaml-cpp events -> tree_builder, with the checks yaml-cpp does not make.
class tree_events final : public YAML::EventHandler {
public:
    tree_events(yaml::tree_builder& builder, std::string_view source, bool ascii)
        : builder_(builder), source_(source), marks_(source, ascii) {}

    void OnDocumentStart(const YAML::Mark& mark) override {
        std::size_t at = marks_.offset(mark);
        bool marker = source_.compare(at, 3, "---") == 0;
        builder_.start_document(marks_.line(mark), marks_.column(mark), marker);
        check();
    }
    void OnDocumentEnd() override {}

    void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        // yaml-cpp reads a line without `:` in a block mapping as a key with no value, whose
        // mark is the key's own; a real empty value (`key:`) is marked after the colon.
        if (!open_.empty() && open_.back().block_mapping && open_.back().items % 2 == 1 &&
            mark.pos == open_.back().key_pos && !explicit_key(mark))
            fail("expected `:` after this key", mark,
                 "write `key: value`, or check the indentation of this line");
        item(mark);
        builder_.null_value(marks_.line(mark), marks_.column(mark), anchor);
        check();
    }

    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        item(mark);
        builder_.alias(marks_.line(mark), marks_.column(mark), anchor);
        check();
    }

    void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  const std::string& value) override {
        item(mark);
        tag_t kind = classify_tag(tag);
        if (kind != tag_t::none) check_quoted(mark, value);
        int line = marks_.line(mark), column = marks_.column(mark);
        if (kind == tag_t::none && resolve_plain(value) == scalar_type::null)
            builder_.null_value(line, column, anchor);
        else
            builder_.scalar(line, column, anchor, kind, tag, value);
        check();
    }

    void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value) override {
        item(mark);
        open_.push_back({false, 0, -1});
        builder_.start_collection(yaml::node::kind_t::sequence, marks_.line(mark), marks_.column(mark),
                                  anchor, classify_tag(tag), tag);
        check();
    }
    void OnSequenceEnd() override { end(); }

    void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value style) override {
        item(mark);
        open_.push_back({style == YAML::EmitterStyle::Block, 0, -1});
        builder_.start_collection(yaml::node::kind_t::mapping, marks_.line(mark), marks_.column(mark), anchor,
                                  classify_tag(tag), tag);
        check();
    }
    void OnMapEnd() override { end(); }

    mark_converter& marks() { return marks_; }

private:
    struct frame {
        bool block_mapping = false;
        std::size_t items = 0;  // nodes so far: keys and values alternate in a mapping
        int key_pos = -1;       // mapping: mark of the current key
    };

    void item(const YAML::Mark& mark) {
        if (open_.empty()) return;
        frame& f = open_.back();
        if (f.items % 2 == 0) f.key_pos = mark.pos;
        ++f.items;
    }
    void end() {
        if (!open_.empty()) open_.pop_back();
        builder_.end_collection();
        check();
    }
    void check() {
        if (builder_.failed()) throw stop_parsing{};
    }
    void fail(const std::string& message, const YAML::Mark& mark, const std::string& help) {
        builder_.fail("yaml_syntax", message, marks_.line(mark), marks_.column(mark), help);
        throw stop_parsing{};
    }
    bool explicit_key(const YAML::Mark& mark) const {
        std::size_t at = marks_.offset(mark);
        return at < source_.size() && source_[at] == '?';
    }

    // A quoted scalar must be closed: yaml-cpp accepts `key: "text` at the end of the text.
    // Double-quoted escapes can also produce what UTF-8 cannot hold.
    void check_quoted(const YAML::Mark& mark, const std::string& value) {
        std::size_t i = marks_.offset(mark);
        // Skip a tag or anchor written before the scalar.
        while (i < source_.size() && (source_[i] == '!' || source_[i] == '&')) {
            while (i < source_.size() && source_[i] != ' ' && source_[i] != '\t' && source_[i] != '\n') ++i;
            while (i < source_.size() && (source_[i] == ' ' || source_[i] == '\t')) ++i;
        }
        if (i >= source_.size() || (source_[i] != '"' && source_[i] != '\'')) return;
        const char quote = source_[i];
        bool closed = false;
        for (std::size_t k = i + 1; k < source_.size(); ++k) {
            if (quote == '"' && source_[k] == '\\') {
                ++k;
            } else if (source_[k] == quote) {
                if (quote == '\'' && k + 1 < source_.size() && source_[k + 1] == '\'') {
                    ++k;
                    continue;
                }
                closed = true;
                break;
            }
        }
        if (!closed)
            fail(std::string("this ") + (quote == '"' ? "double" : "single") +
                     "-quoted string is never closed",
                 mark, std::string("add the closing ") + quote);
        if (quote == '"' && !is_valid_utf8(value))
            fail("an escape in this string is not a Unicode character", mark,
                 "write code points up to \\U0010FFFF, and no surrogates (\\uD800-\\uDFFF)");
    }

    yaml::tree_builder& builder_;
    std::string_view source_;
    mark_converter marks_;
    std::vector<frame> open_;
};

// yaml-cpp's messages are terse and name its internals; users get ours.
struct syntax_text {
    std::string message;
    std::string help;
};

bool starts_with(const std::string& text, const char* prefix) {
    return text.rfind(prefix, 0) == 0;
}

syntax_text describe(const std::string& msg) {
    namespace m = YAML::ErrorMsg;
    const std::string indentation = "check the indentation of this line and the one before";
    if (msg == m::END_OF_MAP)
        return {"this does not continue the mapping above",
                indentation + "; quote a value that contains `: `"};
    if (msg == m::END_OF_SEQ)
        return {"this does not continue the list above", "list items start with `- `; " + indentation};
    if (msg == m::END_OF_MAP_FLOW)
        return {"a `{` mapping is not closed", "separate entries with `,` and end with `}`"};
    if (msg == m::END_OF_SEQ_FLOW)
        return {"a `[` list is not closed", "separate items with `,` and end with `]`"};
    if (msg == m::FLOW_END)
        return {"this `]` or `}` closes nothing", "remove it, or add the opening bracket"};
    if (msg == m::MAP_VALUE)
        return {"a `:` mapping value is not allowed here",
                "quote a value that contains `: `; " + indentation};
    if (msg == m::BLOCK_ENTRY) return {"a `- ` list item is not allowed here", indentation};
    if (msg == m::MAP_KEY) return {"a `?` key is not allowed here", indentation};
    if (msg == m::TAB_IN_INDENTATION) return {"a tab in the indentation", "indent with spaces only"};
    if (msg == m::UNKNOWN_TOKEN)
        return {"no YAML value can start with this character",
                "quote the value (`@` and backquote are reserved)"};
    if (starts_with(msg, m::INVALID_ESCAPE))
        return {"an unknown escape in a double-quoted string",
                "write `\\\\` for a backslash, or use single quotes, which have no escapes"};
    if (starts_with(msg, m::INVALID_UNICODE) || msg == m::INVALID_HEX)
        return {"an escape in this string is not a Unicode character",
                "write code points up to \\U0010FFFF, and no surrogates (\\uD800-\\uDFFF)"};
    if (msg == m::EOF_IN_SCALAR || msg == m::DOC_IN_SCALAR || msg == m::CHAR_IN_SCALAR ||
        msg == m::SINGLE_QUOTED_CHAR)
        return {"a quoted string is not closed properly", "close the string before the end of the document"};
    if (msg == m::CHAR_IN_BLOCK || msg == m::ZERO_INDENT_IN_BLOCK)
        return {"an invalid block scalar header",
                "after `|` or `>` only `-`, `+` and an indentation digit 1-9 may follow"};
    if (msg == m::MULTIPLE_TAGS || msg == m::MULTIPLE_ANCHORS || msg == m::MULTIPLE_ALIASES ||
        msg == m::ALIAS_CONTENT)
        return {"a node may have one tag and one anchor; an alias has neither",
                "remove the extra tag or anchor"};
    if (msg == m::ALIAS_NOT_FOUND || msg == m::ANCHOR_NOT_FOUND || msg == m::CHAR_IN_ALIAS ||
        msg == m::CHAR_IN_ANCHOR)
        return {"an anchor or alias without a valid name",
                "write `&name` and `*name` with letters, digits, `-` or `_`"};
    if (msg == m::CHAR_IN_TAG_HANDLE || msg == m::TAG_WITH_NO_SUFFIX || msg == m::END_OF_VERBATIM_TAG)
        return {"an invalid tag", "remove the tag; quote the value to make it a string"};
    if (msg == m::YAML_DIRECTIVE_ARGS || starts_with(msg, m::YAML_VERSION) || msg == m::YAML_MAJOR_VERSION ||
        msg == m::REPEATED_YAML_DIRECTIVE || msg == m::TAG_DIRECTIVE_ARGS || msg == m::REPEATED_TAG_DIRECTIVE)
        return {"an invalid %YAML or %TAG directive", "remove the directive; workflows need none"};
    if (msg == m::BAD_FILE)
        return {"the document nests deeper than " + std::to_string(yaml::max_depth) + " levels",
                "flatten the data, or move it into an inputs file"};
    return {"invalid YAML", "check the syntax near this position"};
}

// Only whole-file problems have no path; the rest are located by the readers.
void report(diagnostics& diags, const std::string& file, const yaml::tree_error& e) {
    std::string help = e.help;
    if (help.empty() && e.code == "yaml_alias_limit")
        help = "write the repeated content out, or use fewer nested aliases";
    else if (help.empty() && e.code == "nul_byte")
        help = "remove the NUL byte; is this a UTF-16 or binary file?";
    diags.error(e.code, "", e.message, std::move(help), {file, e.line, e.column});
}

// The name after `*` at `offset`, for the message about an unknown alias.
std::string alias_name(std::string_view source, std::size_t offset) {
    if (offset >= source.size() || source[offset] != '*') return {};
    std::size_t end = offset + 1;
    while (end < source.size() &&
           std::string_view(" \t\r\n,[]{}").find(source[end]) == std::string_view::npos)
        ++end;
    return std::string(utf8_prefix(source.substr(offset + 1, end - offset - 1), 64));
}

}  // namespace

std::optional<yaml::tree> read_yaml_tree(std::string_view source, const std::string& file, diagnostics& diags,
                                         bool library_only) {
    yaml::tree_error bad;
    bool ascii = false;
    if (!yaml::check_bytes(source, bad, &ascii)) {
        report(diags, file, bad);
        return std::nullopt;
    }
    // Typical workflows have about one node per 8 bytes, dense ones (flow lists of short
    // scalars) one per 4 or 5: reserving for one per 4 costs only address space (pages are
    // touched as nodes arrive), while a hint too small moves every node once, at the end.
    const std::size_t node_hint = source.size() / 4 + 16;
    if (ascii && !library_only) {
        yaml::tree_builder simple;
        simple.reserve(node_hint);
        if (yaml::build_simple_tree(source, simple) && simple.finish()) return std::move(simple.result());
    }
    // Only yaml-cpp recurses per level: the fast path refuses deep documents by itself.
    if (!yaml::check_nesting(source, bad)) {
        report(diags, file, bad);
        return std::nullopt;
    }
    yaml::tree_builder builder;
    builder.reserve(node_hint);
    tree_events events(builder, source, ascii);
    try {
        memory_buffer buffer(source);
        std::istream in(&buffer);
        YAML::Parser parser(in);
        while (parser.HandleNextDocument(events)) {
        }
    } catch (const stop_parsing&) {
        // The builder holds the error.
    } catch (const YAML::Exception& e) {
        int line = events.marks().line(e.mark), column = events.marks().column(e.mark);
        if (e.msg == YAML::ErrorMsg::UNKNOWN_ANCHOR) {
            std::string name = alias_name(source, events.marks().offset(e.mark));
            diags.error("yaml_syntax", "", "unknown alias *" + name,
                        "define the anchor (`&" + (name.empty() ? std::string("name") : name) +
                            "`) before the alias that uses it",
                        {file, line, column});
        } else {
            syntax_text text = describe(e.msg);
            diags.error("yaml_syntax", "", "invalid YAML: " + text.message, text.help, {file, line, column});
        }
        return std::nullopt;
    } catch (const std::exception& e) {
        // Allocation failure: nothing escapes the front end.
        diags.error("yaml_syntax", "", std::string("the document could not be parsed: ") + e.what(), "",
                    {file, 0, 0});
        return std::nullopt;
    }
    if (!builder.finish()) {
        for (const auto& e : builder.errors()) report(diags, file, e);
        return std::nullopt;
    }
    return std::move(builder.result());
}

parse_result parse_workflow(std::string_view source, std::string_view file_name) {
    parse_result result;
    std::string file(file_name);
    if (source.size() > limits::max_document_bytes) {
        result.diags.error("file_too_large", "",
                           "the document is " + std::to_string(source.size()) +
                               " bytes, more than the limit of " + std::to_string(limits::max_document_bytes),
                           "split the workflow, or move large data into an inputs file", {file, 0, 0});
        return result;
    }
    auto tree = read_yaml_tree(source, file, result.diags);
    if (!tree) return result;

    workflow wf;
    wf.locations.set_file(file);
    wf.locations.reserve(tree->nodes.size(), source.size() * 2);
    tree_reader reader(*tree, file, result.diags, &wf.locations);
    read_workflow(reader, wf);
    // Readers go field by field; users read top to bottom.
    std::stable_sort(result.diags.items().begin(), result.diags.items().end(),
                     [](const diagnostic& a, const diagnostic& b) {
                         return std::pair(a.location.line, a.location.column) <
                                std::pair(b.location.line, b.location.column);
                     });
    if (result.diags.has_errors()) {
        result.partial = std::move(wf);
        return result;
    }
    wf.source_digest = sha256_digest(source);
    result.document = std::move(wf);
    return result;
}

}  // namespace agentctl
