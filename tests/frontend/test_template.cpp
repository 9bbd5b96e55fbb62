// Templates and conditions: syntax, roots, type keeping, embedding, missing paths, no
// re-expansion, conditions.
#include <agentctl/json.hpp>
#include <agentctl/template.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

namespace json = boost::json;
using namespace agentctl;

namespace {

struct fixture {
    json::value inputs = json::parse(R"({"name":"world","n":3,"pi":1.5,"on":true,"none":null,
        "files":["a.txt","b.txt"],"obj":{"k":"v"},"tricky":"${{ inputs.name }}","empty":""})");
    json::value vars = json::parse(R"({"item":"x","foreachIndex":7})");
    json::value with = json::parse(R"({"path":"src/main.cpp","level":2})");
    json::value build_output = json::parse(R"({"exitCode":0,"stdout":"ok\n"})");
    render_context ctx;

    fixture() {
        ctx.inputs = &inputs;
        ctx.vars = &vars;
        ctx.with = &with;
        ctx.task_output = [this](std::string_view id) -> const json::value* {
            return id == "build" ? &build_output : nullptr;
        };
    }

    json::value rendered(std::string_view text) {
        std::string error;
        auto r = render(json::value(json::string(text)), ctx, error);
        BOOST_TEST_REQUIRE(r.has_value(), "render failed: " << error);
        return *r;
    }

    std::string failure(std::string_view text) {
        std::string error;
        auto r = render(json::value(json::string(text)), ctx, error);
        BOOST_TEST(!r.has_value());
        return error;
    }
};

std::string parse_error(std::string_view text) {
    std::string error;
    BOOST_TEST(!parse_template(text, error).has_value(), text);
    return error;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(templates)

BOOST_AUTO_TEST_CASE(parses_literals_single_refs_and_embedded_refs) {
    std::string error;
    auto plain = parse_template("no templates here }} {", error);
    BOOST_TEST_REQUIRE(plain.has_value());
    BOOST_TEST(!plain->has_refs());
    BOOST_TEST(plain->parts.size() == 1u);

    auto single = parse_template("${{  inputs.files.0 }}", error);
    BOOST_TEST_REQUIRE(single.has_value());
    BOOST_TEST(single->is_single_ref());
    BOOST_TEST((single->parts[0].ref->root == template_root::inputs));
    BOOST_TEST(single->parts[0].ref->path == (std::vector<std::string>{"files", "0"}));
    BOOST_TEST(single->parts[0].ref->text == "inputs.files.0");

    auto embedded = parse_template("a ${{vars.item}} b ${{ tasks.build.output.stdout }}", error);
    BOOST_TEST_REQUIRE(embedded.has_value());
    BOOST_TEST(!embedded->is_single_ref());
    BOOST_TEST(embedded->parts.size() == 4u);
    BOOST_TEST(embedded->parts[3].ref->task_id() == "build");
    BOOST_TEST(embedded->parts[1].ref->task_id() == "");

    // Text around a single template makes it embedded.
    auto spaced = parse_template(" ${{ inputs.n }}", error);
    BOOST_TEST_REQUIRE(spaced.has_value());
    BOOST_TEST(!spaced->is_single_ref());
}

BOOST_AUTO_TEST_CASE(reports_syntax_errors_and_unknown_roots) {
    BOOST_TEST(parse_error("${{ inputs.x").find("unclosed") != std::string::npos);
    BOOST_TEST(parse_error("${{ }}").find("empty") != std::string::npos);
    BOOST_TEST(parse_error("${{ inputs.a + 1 }}").find("not a path") != std::string::npos);
    BOOST_TEST(parse_error("${{ inputs..a }}").find("empty path segment") != std::string::npos);
    BOOST_TEST(parse_error("${{ inputs }}").find("needs a path") != std::string::npos);
    BOOST_TEST(parse_error("${{ tasks.build.stdout }}").find("tasks.<id>.output") != std::string::npos);
    BOOST_TEST(parse_error("${{ tasks.build }}").find("tasks.<id>.output") != std::string::npos);
    std::string unknown = parse_error("${{ input.name }}");
    BOOST_TEST(unknown.find("unknown root") != std::string::npos);
    BOOST_TEST(unknown.find("did you mean `inputs`") != std::string::npos);
    BOOST_TEST(parse_error("${{ env.HOME }}").find("unknown root") != std::string::npos);
    BOOST_TEST(looks_templated("x ${{ y"));
    BOOST_TEST(!looks_templated("x $ {{ y }}"));
}

BOOST_FIXTURE_TEST_CASE(single_templates_keep_the_json_type, fixture) {
    BOOST_TEST(rendered("${{ inputs.n }}") == json::value(3));
    BOOST_TEST(rendered("${{ inputs.pi }}") == json::value(1.5));
    BOOST_TEST(rendered("${{ inputs.on }}") == json::value(true));
    BOOST_TEST(rendered("${{ inputs.none }}").is_null());
    BOOST_TEST(rendered("${{ inputs.files }}") == json::parse(R"(["a.txt","b.txt"])"));
    BOOST_TEST(rendered("${{ inputs.obj }}") == json::parse(R"({"k":"v"})"));
    BOOST_TEST(rendered("${{ inputs.files.1 }}") == json::value("b.txt"));
    BOOST_TEST(rendered("${{ vars.foreachIndex }}") == json::value(7));
    BOOST_TEST(rendered("${{ with.level }}") == json::value(2));
    BOOST_TEST(rendered("${{ tasks.build.output.exitCode }}") == json::value(0));
    BOOST_TEST(rendered("${{ tasks.build.output }}") == build_output);
}

BOOST_FIXTURE_TEST_CASE(embedded_templates_take_scalars_only, fixture) {
    BOOST_TEST(rendered("hello ${{ inputs.name }}!") == json::value("hello world!"));
    BOOST_TEST(rendered("${{ inputs.n }}/${{ inputs.pi }}/${{ inputs.on }}/${{ inputs.none }}") ==
               json::value("3/1.5/true/null"));
    BOOST_TEST(rendered("[${{ inputs.empty }}]") == json::value("[]"));
    BOOST_TEST(failure("files: ${{ inputs.files }}").find("an array") != std::string::npos);
    BOOST_TEST(failure("obj: ${{ inputs.obj }}").find("an object") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(missing_paths_are_errors, fixture) {
    std::string e = failure("${{ inputs.nope }}");
    BOOST_TEST(e.find("inputs.nope") != std::string::npos);
    BOOST_TEST(e.find("no member `nope`") != std::string::npos);
    BOOST_TEST(failure("${{ inputs.files.2 }}").find("no item `2`") != std::string::npos);
    BOOST_TEST(failure("${{ inputs.files.x }}").find("no item `x`") != std::string::npos);
    BOOST_TEST(failure("${{ inputs.name.length }}").find("no member `length`") != std::string::npos);
    BOOST_TEST(failure("${{ tasks.other.output }}").find("not available") != std::string::npos);
    render_context empty;
    std::string error;
    BOOST_TEST(!render(json::value("${{ vars.item }}"), empty, error).has_value());
    BOOST_TEST(error.find("nothing is bound") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(rendered_values_are_never_expanded_again, fixture) {
    // inputs.tricky holds template text: it is data and stays literal.
    BOOST_TEST(rendered("${{ inputs.tricky }}") == json::value("${{ inputs.name }}"));
    BOOST_TEST(rendered("x${{ inputs.tricky }}y") == json::value("x${{ inputs.name }}y"));
    std::string error;
    auto text = render_text("--name=${{ inputs.tricky }}", ctx, error);
    BOOST_TEST_REQUIRE(text.has_value());
    BOOST_TEST(*text == "--name=${{ inputs.name }}");
}

BOOST_FIXTURE_TEST_CASE(renders_nested_values_and_leaves_keys_alone, fixture) {
    std::string error;
    auto v = json::parse(R"({"${{ inputs.name }}":["${{ vars.item }}",{"n":"${{ inputs.n }}"}],"lit":5})");
    auto r = render(v, ctx, error);
    BOOST_TEST_REQUIRE(r.has_value(), error);
    BOOST_TEST(*r == json::parse(R"({"${{ inputs.name }}":["x",{"n":3}],"lit":5})"));
}

BOOST_FIXTURE_TEST_CASE(render_text_converts_scalars_and_refuses_containers, fixture) {
    std::string error;
    BOOST_TEST(render_text("${{ inputs.n }}", ctx, error).value_or("?") == "3");
    BOOST_TEST(render_text("${{ inputs.on }}", ctx, error).value_or("?") == "true");
    BOOST_TEST(render_text("${{ with.path }}", ctx, error).value_or("?") == "src/main.cpp");
    BOOST_TEST(render_text("plain", ctx, error).value_or("?") == "plain");
    BOOST_TEST(!render_text("${{ inputs.obj }}", ctx, error).has_value());
    BOOST_TEST(error.find("an object") != std::string::npos);
    BOOST_TEST(!render_text("${{ inputs.files }}", ctx, error).has_value());
    BOOST_TEST(error.find("an array") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(collect_refs_walks_values_and_names_the_bad_path) {
    std::vector<template_ref> refs;
    std::string error, path;
    auto v = json::parse(R"({"a":"${{ inputs.x }}","b":["k","${{ vars.y }} ${{ tasks.t.output.z }}"]})");
    BOOST_TEST(collect_refs(v, refs, error, path));
    BOOST_TEST_REQUIRE(refs.size() == 3u);
    BOOST_TEST(refs[0].text == "inputs.x");
    BOOST_TEST(refs[2].task_id() == "t");

    refs.clear();
    auto bad = json::parse(R"({"a":"${{ inputs.x }}","b":[1,"${{ nope.y }}"]})");
    BOOST_TEST(!collect_refs(bad, refs, error, path));
    BOOST_TEST(path == ".b[1]");
    BOOST_TEST(error.find("unknown root") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conditions)

BOOST_AUTO_TEST_CASE(parses_the_three_forms) {
    std::string error;
    auto truthy = parse_condition("inputs.on", error);
    BOOST_TEST_REQUIRE(truthy.has_value(), error);
    BOOST_TEST((truthy->op == condition::op_t::truthy));

    auto falsy = parse_condition("${{ not vars.item }}", error);
    BOOST_TEST_REQUIRE(falsy.has_value(), error);
    BOOST_TEST((falsy->op == condition::op_t::falsy));
    BOOST_TEST(falsy->left.text == "vars.item");

    auto cmp = parse_condition("tasks.build.output.exitCode == 0", error);
    BOOST_TEST_REQUIRE(cmp.has_value(), error);
    BOOST_TEST((cmp->op == condition::op_t::eq));
    BOOST_TEST(cmp->right == json::value(0));
    BOOST_TEST(cmp->expression == "tasks.build.output.exitCode == 0");

    auto word = parse_condition("inputs.name != world", error);
    BOOST_TEST_REQUIRE(word.has_value(), error);
    BOOST_TEST(word->right == json::value("world"));
    auto quoted = parse_condition("inputs.name == 'a b'", error);
    BOOST_TEST_REQUIRE(quoted.has_value(), error);
    BOOST_TEST(quoted->right == json::value("a b"));
    auto string = parse_condition(R"(inputs.n == "3")", error);
    BOOST_TEST_REQUIRE(string.has_value(), error);
    BOOST_TEST(string->right == json::value("3"));
}

BOOST_AUTO_TEST_CASE(refuses_malformed_conditions) {
    std::string error;
    BOOST_TEST(!parse_condition("", error).has_value());
    BOOST_TEST(!parse_condition("== 3", error).has_value());
    BOOST_TEST(!parse_condition("inputs.n ==", error).has_value());
    BOOST_TEST(!parse_condition("inputs.n ~ 3", error).has_value());
    BOOST_TEST(!parse_condition("not inputs.n == 3", error).has_value());
    BOOST_TEST(!parse_condition("inputs.n < abc", error).has_value());
    BOOST_TEST(error.find("compare numbers") != std::string::npos);
    BOOST_TEST(!parse_condition("secrets.x", error).has_value());
    BOOST_TEST(error.find("unknown root") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(evaluates_with_types, fixture) {
    auto eval = [&](std::string_view text) {
        std::string error;
        auto c = parse_condition(text, error);
        BOOST_TEST_REQUIRE(c.has_value(), error);
        auto r = evaluate(*c, ctx, error);
        BOOST_TEST_REQUIRE(r.has_value(), error);
        return *r;
    };
    BOOST_TEST(eval("inputs.on"));
    BOOST_TEST(!eval("inputs.none"));
    BOOST_TEST(!eval("inputs.empty"));
    BOOST_TEST(eval("not inputs.empty"));
    BOOST_TEST(eval("inputs.files"));
    BOOST_TEST(eval("tasks.build.output.exitCode == 0"));
    BOOST_TEST(!eval("tasks.build.output.exitCode != 0"));
    BOOST_TEST(eval("inputs.n == 3"));
    BOOST_TEST(eval("inputs.n == 3.0"));
    BOOST_TEST(!eval(R"(inputs.n == "3")"));  // type-sensitive
    BOOST_TEST(eval("inputs.name == world"));
    BOOST_TEST(eval("inputs.n > 2"));
    BOOST_TEST(!eval("inputs.n < 3"));
    BOOST_TEST(eval("inputs.n <= 3"));
    BOOST_TEST(eval("inputs.pi >= 1.5"));
    BOOST_TEST(eval("vars.foreachIndex > -1"));
    BOOST_TEST(eval(R"(inputs.files == ["a.txt","b.txt"])"));
}

BOOST_FIXTURE_TEST_CASE(missing_paths_and_non_numbers_are_errors_not_false, fixture) {
    std::string error;
    auto missing = parse_condition("inputs.nope == 1", error);
    BOOST_TEST_REQUIRE(missing.has_value());
    BOOST_TEST(!evaluate(*missing, ctx, error).has_value());
    BOOST_TEST(error.find("inputs.nope") != std::string::npos);

    auto text = parse_condition("inputs.name > 1", error);
    BOOST_TEST_REQUIRE(text.has_value());
    BOOST_TEST(!evaluate(*text, ctx, error).has_value());
    BOOST_TEST(error.find("not a number") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
