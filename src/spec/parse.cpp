// YAML text -> tree (the only use of the YAML library in the project) -> workflow.
//
// libyaml's event parser feeds a tree of our own (spec/yaml_tree.hpp). We started with
// yaml-cpp, as SPEC section 8 suggests, but its scanner reads about 4 MB/s here: 230 ms of a
// 1 MiB document before any of our code runs, against a 100 ms budget for `check`. libyaml
// reads the same document in about 30 ms and gives the same marks.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <yaml.h>

#include <algorithm>
#include <unordered_map>

namespace agentctl {
namespace {

using tag_t = yaml::tree_builder::tag_t;

std::string_view text_of(const yaml_char_t* s) {
    return s ? std::string_view(reinterpret_cast<const char*>(s)) : std::string_view();
}

tag_t classify_tag(const yaml_char_t* tag, bool quoted) {
    std::string_view t = text_of(tag);
    if (t.empty()) return quoted ? tag_t::non_specific : tag_t::none;
    if (t == "!") return tag_t::non_specific;
    if (t == "tag:yaml.org,2002:str") return tag_t::string;
    return tag_t::other;
}

/// Owns a libyaml parser and its current event.
class event_reader {
public:
    explicit event_reader(std::string_view source) {
        yaml_parser_initialize(&parser_);
        yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(source.data()), source.size());
    }
    ~event_reader() {
        if (has_event_) yaml_event_delete(&event_);
        yaml_parser_delete(&parser_);
    }
    event_reader(const event_reader&) = delete;
    event_reader& operator=(const event_reader&) = delete;

    /// The next event, or nullptr on a syntax error (see problem()).
    const yaml_event_t* next() {
        if (has_event_) yaml_event_delete(&event_);
        has_event_ = yaml_parser_parse(&parser_, &event_) != 0;
        return has_event_ ? &event_ : nullptr;
    }
    std::string problem() const {
        std::string p = parser_.problem ? parser_.problem : "invalid YAML";
        if (parser_.context) p = std::string(parser_.context) + ": " + p;
        return p;
    }
    yaml_mark_t problem_mark() const { return parser_.problem_mark; }

private:
    yaml_parser_t parser_;
    yaml_event_t event_;
    bool has_event_ = false;
};

// Only whole-file problems have no path; the rest are located by the readers.
void report(diagnostics& diags, const std::string& file, const yaml::tree_error& e) {
    std::string help;
    if (e.code == "yaml_alias_limit")
        help = "write the repeated content out, or use fewer nested aliases";
    else if (e.code == "nul_byte")
        help = "remove the NUL byte; is this a UTF-16 or binary file?";
    diags.error(e.code, "", e.message, std::move(help), {file, e.line, e.column});
}

}  // namespace

std::optional<yaml::tree> read_yaml_tree(std::string_view source, const std::string& file,
                                         diagnostics& diags) {
    yaml::tree_error bad;
    if (!yaml::check_bytes(source, bad)) {
        report(diags, file, bad);
        return std::nullopt;
    }
    yaml::tree_builder builder;
    // About one node per 8 bytes in typical workflows; a hint, not a limit.
    builder.reserve(source.size() / 8 + 16);
    std::unordered_map<std::string, std::size_t> anchors;  // name -> id of its latest definition
    std::size_t next_anchor = 1;
    auto define = [&](const yaml_char_t* name) -> std::size_t {
        if (!name) return 0;
        anchors[std::string(text_of(name))] = next_anchor;
        return next_anchor++;
    };

    event_reader reader(source);
    for (bool done = false; !done && !builder.failed();) {
        const yaml_event_t* e = reader.next();
        if (!e) {
            yaml_mark_t m = reader.problem_mark();
            diags.error("yaml_syntax", "", reader.problem(), "", {file, int(m.line) + 1, int(m.column) + 1});
            return std::nullopt;
        }
        int line = int(e->start_mark.line) + 1, column = int(e->start_mark.column) + 1;
        switch (e->type) {
        case YAML_DOCUMENT_START_EVENT:
            builder.start_document(line, column);
            break;
        case YAML_ALIAS_EVENT: {
            auto it = anchors.find(std::string(text_of(e->data.alias.anchor)));
            if (it == anchors.end()) {
                diags.error("yaml_syntax", "", "unknown alias *" + std::string(text_of(e->data.alias.anchor)), "",
                            {file, line, column});
                return std::nullopt;
            }
            builder.alias(line, column, it->second);
            break;
        }
        case YAML_SCALAR_EVENT: {
            const auto& s = e->data.scalar;
            std::string_view value(reinterpret_cast<const char*>(s.value), s.length);
            tag_t tag = classify_tag(s.tag, s.style != YAML_PLAIN_SCALAR_STYLE);
            std::size_t anchor = define(s.anchor);
            if (tag == tag_t::none && resolve_plain(value) == scalar_type::null)
                builder.null_value(line, column, anchor);
            else
                builder.scalar(line, column, anchor, tag, text_of(s.tag), std::string(value));
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
            builder.start_collection(yaml::node::kind_t::sequence, line, column,
                                     define(e->data.sequence_start.anchor),
                                     classify_tag(e->data.sequence_start.tag, false),
                                     text_of(e->data.sequence_start.tag));
            break;
        case YAML_MAPPING_START_EVENT:
            builder.start_collection(yaml::node::kind_t::mapping, line, column,
                                     define(e->data.mapping_start.anchor),
                                     classify_tag(e->data.mapping_start.tag, false),
                                     text_of(e->data.mapping_start.tag));
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            builder.end_collection();
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
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
