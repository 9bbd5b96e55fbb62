#include "targets.hpp"

#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/template.hpp>

#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace agentctl::fuzz {
namespace {

bool same_node(const yaml::node& a, const yaml::node& b) {
    return a.kind == b.kind && a.plain == b.plain && a.bad_tag == b.bad_tag && a.line == b.line &&
           a.column == b.column && a.target == b.target && a.weight == b.weight && a.height == b.height &&
           a.text == b.text && a.items == b.items;
}

// Where the fast path for plain YAML (src/spec/simple_yaml.cpp) takes a document, yaml-cpp
// must read the same tree from it.
std::string check_fast_yaml(std::string_view data) {
    yaml::tree_error bad;
    yaml::tree_builder simple;
    if (!yaml::check_bytes(data, bad) || !yaml::build_simple_tree(data, simple) || !simple.finish())
        return {};
    diagnostics diags;
    auto library = read_yaml_tree(data, "fuzz.yaml", diags, /*library_only=*/true);
    if (!library) return "the fast YAML path took a document yaml-cpp refuses";
    const yaml::tree& fast = simple.result();
    bool same = fast.root == library->root && fast.has_root == library->has_root &&
                fast.tags == library->tags && fast.nodes.size() == library->nodes.size();
    for (std::size_t i = 0; same && i < fast.nodes.size(); ++i)
        same = same_node(fast.nodes[i], library->nodes[i]);
    return same ? "" : "the fast YAML path and yaml-cpp read different trees";
}

std::string check_diagnostics(const diagnostics& ds, std::string_view stage) {
    for (const auto& d : ds.items()) {
        if (d.code.empty() || d.message.empty())
            return std::string(stage) + ": a diagnostic without code or message (" + d.code + ")";
        if (!is_valid_utf8(d.message) || !is_valid_utf8(d.help) || !is_valid_utf8(d.path))
            return std::string(stage) + ": diagnostic " + d.code + " is not valid UTF-8";
        if (d.location.line < 0 || d.location.column < 0)
            return std::string(stage) + ": diagnostic " + d.code + " has a negative location";
    }
    return {};
}

std::string items_text(const items_result& r) {
    return r.items ? boost::json::serialize(*r.items) : "error " + std::to_string(r.diags.size());
}

}  // namespace

std::string workflow(std::string_view data) {
    if (auto p = check_fast_yaml(data); !p.empty()) return p;
    parse_result parsed = parse_workflow(data, "fuzz.yaml");
    if (auto p = check_diagnostics(parsed.diags, "parse"); !p.empty()) return p;
    if (parsed.document && parsed.diags.has_errors()) return "a document was returned with errors";
    compile_result r = check_document(parsed);
    if (auto p = check_diagnostics(r.diags, "check"); !p.empty()) return p;
    if (r.compiled) {
        std::string json = plan_json(*r.compiled);
        std::string text = plan_text(*r.compiled);
        boost::system::error_code ec;
        boost::json::parse(json, ec);
        if (ec) return "the plan JSON does not parse: " + ec.message();
        if (!is_valid_utf8(text)) return "the plan text is not valid UTF-8";
        compile_result again = compile(*parsed.document);
        if (!again.compiled || plan_json(*again.compiled) != json)
            return "compiling twice gave different plans";
    }
    for (const char* name : {"fuzz.json", "fuzz.yaml"}) {
        inputs_result in = parse_inputs(data, name);
        if (auto p = check_diagnostics(in.diags, "inputs"); !p.empty()) return p;
        if (in.inputs && in.diags.has_errors()) return "inputs were returned with errors";
    }
    for (auto separator : {item_separator::line, item_separator::nul}) {
        items_splitter whole("fuzz", separator);
        whole.feed(data);
        items_splitter halves("fuzz", separator);
        std::size_t cut = data.empty() ? 0 : static_cast<unsigned char>(data[0]) % (data.size() + 1);
        halves.feed(data.substr(0, cut));
        halves.feed(data.substr(cut));
        items_result a = whole.finish(), b = halves.finish();
        if (items_text(a) != items_text(b)) return "items depend on how the input was cut";
        if (a.items)
            for (const auto& item : *a.items)
                if (!is_valid_utf8(std::string_view(item.as_string().data(), item.as_string().size())))
                    return "an item is not valid UTF-8";
    }
    return {};
}

std::string templates(std::string_view data) {
    // Inputs and bindings the text may refer to; tasks answer for `a` only.
    static const boost::json::value inputs = boost::json::parse(
        R"({"s": "text", "n": 3, "d": 1.5, "b": true, "z": null, "list": [1, "two", [3]], "obj": {"k": {"x": "y"}}})");
    static const boost::json::value vars = boost::json::parse(R"({"item": "f.txt", "foreachIndex": 2})");
    static const boost::json::value with = boost::json::parse(R"({"name": "w", "nested": {"a": [1, 2]}})");
    static const boost::json::value output = boost::json::parse(R"({"exitCode": 0, "stdout": "ok\n"})");
    render_context ctx;
    ctx.inputs = &inputs;
    ctx.vars = &vars;
    ctx.with = &with;
    ctx.task_output = [](std::string_view id) -> const boost::json::value* {
        return id == "a" ? &output : nullptr;
    };

    std::string error;
    if (auto ts = parse_template(data, error)) {
        for (const auto& part : ts->parts)
            if (part.ref) resolve(*part.ref, ctx, error);
        if (auto text = render_text(data, ctx, error); text && !looks_templated(data) && *text != data)
            return "text without templates rendered differently";
    }
    boost::json::value as_value = boost::json::string(data);
    render(as_value, ctx, error);
    std::vector<template_ref> refs;
    std::string error_path;
    collect_refs(as_value, refs, error, error_path);
    if (auto c = parse_condition(data, error)) evaluate(*c, ctx, error);
    return {};
}

std::string json(std::string_view data) {
    bool lossy = false;
    std::string repaired = to_utf8_lossy(data, lossy);
    if (!is_valid_utf8(repaired)) return "repaired text is not valid UTF-8";
    if (lossy == is_valid_utf8(data)) return "lossy disagrees with is_valid_utf8";
    if (!lossy && repaired != data) return "valid text was changed";
    std::string in_place(data);
    bool lossy2 = false;
    make_utf8_lossy(in_place, lossy2);
    if (in_place != repaired || lossy2 != lossy) return "make_utf8_lossy differs from to_utf8_lossy";

    // A string, written and read back.
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_object();
        w.member("s", repaired);
        w.key("list");
        w.begin_array();
        w.string(repaired);
        w.number(static_cast<std::int64_t>(data.size()));
        w.end_array();
        w.end_object();
    }
    boost::system::error_code ec;
    boost::json::value back = boost::json::parse(sink.text, ec);
    if (ec) return "written JSON does not parse: " + ec.message();
    if (back.at("s").as_string() != repaired) return "a string did not survive the writer";

    // A JSON document, written by our writer, read back (both reads with exact numbers).
    json_read_result doc = read_json(data);
    if (doc.value) {
        std::string again = to_json(*doc.value);
        json_read_result reread = read_json(again);
        if (!reread.value) return "our JSON of a parsed document does not read back: " + again.substr(0, 200);
        if (*reread.value != *doc.value)
            return "a document changed through the writer: " + again.substr(0, 200);
    }
    return {};
}

}  // namespace agentctl::fuzz
