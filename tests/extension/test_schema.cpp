// The JSON Schema layer (src/plan/schema.hpp): the official JSON-Schema-Test-Suite (draft 7),
// error pointers, and `check` diagnostics located in the YAML.
#include "plan/schema.hpp"

#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace agentctl;

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Cases of the suite that are refused or not implemented, by "file / group" or
/// "file / group / test", each with the reason. Every entry must match a case that fails.
/// The same groups of draft 7 and draft 4 (whose names are the same).
const std::map<std::string, std::string> known_failures = {
    {"definitions.json / valid definition",
     "$ref to the metaschema (http://json-schema.org/draft-0N/schema): references outside the schema are "
     "refused"},
    {"definitions.json / invalid definition",
     "$ref to the metaschema (http://json-schema.org/draft-0N/schema): references outside the schema are "
     "refused"},
    {"ref.json / remote ref, containing refs itself",
     "$ref to the metaschema (http://json-schema.org/draft-0N/schema): references outside the schema are "
     "refused"},
    {"ref.json / Recursive references between schemas",
     "$ref by id-relative URIs (\"node\", \"tree\") and a nested id: valijson resolves every \"#\" against "
     "the "
     "root and treats other URIs as remote documents, so both are refused"},
};

struct suite_counts {
    int passed = 0;
    int skipped = 0;
};

// Runs every case of one draft directory (optional/ and refRemote.json left out).
void run_draft(const fs::path& dir, const std::map<std::string, std::string>& known, suite_counts& counts,
               const char* declared = nullptr) {
    std::set<std::string> used;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".json" && e.path().filename() != "refRemote.json")
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    BOOST_TEST_REQUIRE(files.size() >= 25u);

    for (const auto& file : files) {
        json::value groups = json::parse(read_file(file));
        for (const auto& g : groups.as_array()) {
            std::string group =
                file.filename().string() + " / " + std::string(g.at("description").as_string());
            std::string error, pointer;
            json::value document = g.at("schema");
            if (declared && document.is_object() && !document.as_object().contains("$schema"))
                document.as_object()["$schema"] = declared;
            auto schema = json_schema::compile(document, error, pointer);
            bool group_known = known.count(group) > 0;
            if (!schema) {
                if (group_known) {
                    used.insert(group);
                    counts.skipped += static_cast<int>(g.at("tests").as_array().size());
                    continue;
                }
                BOOST_ERROR(group << ": the schema does not compile: " << error << " at " << pointer);
                continue;
            }
            for (const auto& t : g.at("tests").as_array()) {
                std::string name = group + " / " + std::string(t.at("description").as_string());
                bool expected = t.at("valid").as_bool();
                bool valid = schema->validate(t.at("data")).empty();
                if (known.count(name) || group_known) {
                    if (valid != expected) {
                        used.insert(known.count(name) ? name : group);
                    }
                    ++counts.skipped;
                    continue;
                }
                BOOST_TEST(valid == expected, name << ": expected " << (expected ? "valid" : "invalid")
                                                   << " for " << json::serialize(t.at("data")));
                if (valid == expected) ++counts.passed;
            }
        }
    }
    for (const auto& [name, reason] : known)
        BOOST_TEST(used.count(name) == 1u,
                   "listed as unsupported but passes (remove it from the list): " << name);
}

std::string schema_dir() {
    std::string dir = env_or_empty("AGENTCTL_SCHEMA_SUITE");
    return dir.empty() ? "/usr/share/json-schema-test-suite/tests" : dir;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schema)

BOOST_AUTO_TEST_CASE(json_schema_test_suite_draft7) {
    fs::path dir = fs::path(schema_dir()) / "draft7";
    BOOST_TEST_REQUIRE(fs::is_directory(dir),
                       dir << " is missing: install json-schema-test-suite (tools/bootstrap)");
    suite_counts counts;
    run_draft(dir, known_failures, counts);
    BOOST_TEST_MESSAGE("draft7: " << counts.passed << " cases passed, " << counts.skipped
                                  << " skipped as unsupported");
    BOOST_TEST(counts.passed >= 400);
}

BOOST_AUTO_TEST_CASE(json_schema_test_suite_draft4) {
    fs::path dir = fs::path(schema_dir()) / "draft4";
    BOOST_TEST_REQUIRE(fs::is_directory(dir));
    suite_counts counts;
    run_draft(dir, known_failures, counts, "http://json-schema.org/draft-04/schema#");
    BOOST_TEST(counts.passed >= 290);
    BOOST_TEST_MESSAGE("draft4: " << counts.passed << " cases passed, " << counts.skipped
                                  << " skipped as unsupported");
}

BOOST_AUTO_TEST_CASE(errors_are_json_pointers) {
    std::string error, pointer;
    auto schema = json_schema::compile(json::parse(R"({
        "type": "object", "required": ["a", "z"], "additionalProperties": false,
        "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}},
                       "c/d": {"type": "string"}, "e~f": {"type": "string"}, "z": {}}})"),
                                       error, pointer);
    BOOST_TEST_REQUIRE(schema != nullptr, error);
    auto errors = schema->validate(json::parse(R"({"a": "x", "b": ["s", 1], "c/d": 1, "e~f": 2, "q": 0})"));
    std::set<std::string> pointers;
    for (const auto& e : errors) pointers.insert(e.pointer);
    BOOST_TEST(pointers.count("/a") == 1u);
    BOOST_TEST(pointers.count("/b/1") == 1u);
    BOOST_TEST(pointers.count("/c~1d") == 1u);
    BOOST_TEST(pointers.count("/e~0f") == 1u);
    BOOST_TEST(pointers.count("") == 1u);  // the missing "z" and the extra "q" are the root's
    // Errors that only repeat a deeper one ("failed to validate item #1") are left out.
    for (const auto& e : errors) BOOST_TEST(e.message.find("Failed to validate item") == std::string::npos);
    BOOST_TEST(schema->validate(json::parse(R"({"a": 1, "z": null})")).empty());
    std::string text = schema_errors_text(errors, 2);
    BOOST_TEST(text.find("at /a: ") != std::string::npos, text);
    BOOST_TEST(text.find("more)") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(bad_schemas_are_refused_with_the_place) {
    struct row {
        const char* schema;
        const char* pointer;
        const char* says;
    };
    const row rows[] = {
        {R"({"properties": {"a": {"allOf": 3}}})", "/properties/a", "allOf"},
        {R"({"items": [{"type": "strin"}]})", "/items/0", "strin"},
        {R"({"properties": {"p": {"pattern": "(("}}})", "/properties/p/pattern", "regular expression"},
        {R"({"patternProperties": {"[a-": {}}})", "/patternProperties/[a-", "regular expression"},
        {R"({"properties": {"r": {"$ref": "https://example.com/s.json"}}})", "/properties/r/$ref",
         "outside the schema"},
        {R"({"$schema": "https://json-schema.org/draft/2020-12/schema"})", "/$schema", "draft 7"},
        {R"("object")", "", "object or a boolean"},
    };
    for (const auto& r : rows) {
        std::string error, pointer;
        auto schema = json_schema::compile(json::parse(r.schema), error, pointer);
        BOOST_TEST(schema == nullptr, r.schema);
        BOOST_TEST(pointer == r.pointer, r.schema << ": " << pointer);
        BOOST_TEST(error.find(r.says) != std::string::npos, r.schema << ": " << error);
    }
    // Internal references, booleans and draft 4 compile.
    for (const char* good :
         {R"({"definitions": {"n": {"type": "integer"}}, "items": {"$ref": "#/definitions/n"}})", "true",
          R"({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3,
                                         "exclusiveMaximum": true})"}) {
        std::string error, pointer;
        BOOST_TEST(json_schema::compile(json::parse(good), error, pointer) != nullptr, good << ": " << error);
    }
}

// valijson recurses without end on these; they must be refused, not crash `check`.
BOOST_AUTO_TEST_CASE(self_applying_schemas_are_refused) {
    struct row {
        const char* schema;
        const char* pointer;
    };
    const row rows[] = {
        {R"({"$ref": "#"})", "/$ref"},
        {R"({"allOf": [{"$ref": "#"}]})", "/allOf/0/$ref"},
        {R"({"not": {"$ref": "#"}})", "/not/$ref"},
        {R"({"anyOf": [{"$ref": "#/anyOf/0"}]})", "/anyOf/0/$ref"},
        {R"({"properties": {"a": {"$ref": "#/properties/a"}}})", "/properties/a/$ref"},
        {R"({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"if": {"$ref": "#/definitions/a"}}},
             "properties": {"x": {"$ref": "#/definitions/a"}}})",
         "/definitions/b/if/$ref"},
        {R"({"definitions": {"a%": {"$ref": "#"}}, "$ref": "#/definitions/a%25"})", "/definitions/a%/$ref"},
        {R"({"definitions": {"a": {"$id": "http://x/a.json", "$ref": "#"}}})", "/definitions/a/$id"},
        {R"({"$id": "http://x/root.json", "$ref": "root.json"})", "/$ref"},
    };
    for (const auto& r : rows) {
        std::string error, pointer;
        BOOST_TEST(json_schema::compile(json::parse(r.schema), error, pointer) == nullptr, r.schema);
        BOOST_TEST(pointer == r.pointer, r.schema << ": " << pointer << ": " << error);
    }
    // Recursion that descends into the value is fine.
    std::string error, pointer;
    auto tree = json_schema::compile(
        json::parse(
            R"({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}})"),
        error, pointer);
    BOOST_TEST_REQUIRE(tree != nullptr, error);
    BOOST_TEST(tree->validate(json::parse(R"({"kids": [{"kids": []}, {"kids": [{}]}]})")).empty());
    BOOST_TEST(!tree->validate(json::parse(R"({"kids": [{"kids": 1}]})")).empty());
}

// libstdc++'s recursive regex executor overflows the stack on long inputs: `pattern` uses the
// polynomial executor, and what valijson matches with the recursive one is bounded first.
BOOST_AUTO_TEST_CASE(long_strings_do_not_overflow_the_regex_stack) {
    std::string error, pointer;
    auto pattern = json_schema::compile(json::parse(R"({"pattern": "^(a|b)+$"})"), error, pointer);
    BOOST_TEST_REQUIRE(pattern != nullptr, error);
    BOOST_TEST(pattern->validate(json::value(std::string(1 << 20, 'a'))).empty());
    BOOST_TEST(!pattern->validate(json::value(std::string(1 << 20, 'a') + "c")).empty());

    auto names = json_schema::compile(json::parse(R"({"patternProperties": {"^a+$": {"type": "integer"}}})"),
                                      error, pointer);
    BOOST_TEST_REQUIRE(names != nullptr, error);
    json::object long_key{{std::string(200000, 'a'), 1}};
    auto errors = names->validate(long_key);
    BOOST_TEST_REQUIRE(errors.size() == 1u);
    BOOST_TEST(errors[0].message.find("too long to match against patternProperties") != std::string::npos);
    BOOST_TEST(names->validate(json::object{{std::string(1000, 'a'), 1}}).empty());

    auto date =
        json_schema::compile(json::parse(R"({"properties": {"d": {"format": "date"}}})"), error, pointer);
    BOOST_TEST_REQUIRE(date != nullptr, error);
    errors = date->validate(json::object{{"d", std::string(200000, '1') + "-01-01"}});
    BOOST_TEST_REQUIRE(errors.size() == 1u);
    BOOST_TEST(errors[0].pointer == "/d");
    BOOST_TEST(date->validate(json::object{{"d", "2026-01-31"}}).empty());
    BOOST_TEST(!date->validate(json::object{{"d", "2026-13-01"}}).empty());

    // Back-references need the recursive executor: refused when the schema compiles.
    BOOST_TEST(json_schema::compile(json::parse(R"({"pattern": "(a)\\1"})"), error, pointer) == nullptr);
    BOOST_TEST(pointer == "/pattern");
}

BOOST_AUTO_TEST_CASE(check_reports_invalid_schemas_in_the_yaml) {
    const std::string yaml = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: schemas}
spec:
  policy: {processAllowlist: [ext], approval: never}
  actions:
    ext:
      kind: extension.process
      command: /usr/bin/ext
      protocolVersion: agentctl.dev/process-extension/v1
      idempotency: pure
      inputSchema:
        type: object
        properties:
          n:
            type: integr
      outputSchema:
        properties:
          s: {pattern: "(("}
  tasks:
    - {id: a, uses: "action:ext"}
)";
    parse_result parsed = parse_workflow(yaml, "wf.yaml");
    BOOST_TEST_REQUIRE(parsed.document.has_value());
    compile_result r = check_document(parsed, {});
    BOOST_TEST(!r.compiled.has_value());
    std::vector<const diagnostic*> found;
    for (const auto& d : r.diags.items())
        if (d.code == "invalid_schema") found.push_back(&d);
    BOOST_TEST_REQUIRE(found.size() == 2u);
    BOOST_TEST(found[0]->path == "spec.actions.ext.inputSchema.properties.n");
    BOOST_TEST(found[0]->location.line == 15);
    BOOST_TEST(found[0]->message.find("integr") != std::string::npos, found[0]->message);
    BOOST_TEST(found[1]->path == "spec.actions.ext.outputSchema.properties.s.pattern");
    BOOST_TEST(found[1]->location.line == 19);
    BOOST_TEST(found[1]->location.file == "wf.yaml");
}

BOOST_AUTO_TEST_SUITE_END()
