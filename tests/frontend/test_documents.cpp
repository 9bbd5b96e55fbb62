// Data-driven front-end tests: every tests/frontend/invalid/*.yaml starts with comment lines
// `# expect: <code> <line>`, and each expected (code, line) must be among the diagnostics of
// load_workflow followed, when that succeeds, by compile().
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct expectation {
    std::string code;
    int line = 0;
};

fs::path invalid_dir() {
    const char* root = std::getenv("AGENTCTL_TEST_DATA");
    return fs::path(root ? root : "tests/frontend") / "invalid";
}

std::vector<fs::path> invalid_documents() {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(invalid_dir(), ec))
        if (entry.path().extension() == ".yaml") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

// The `# expect:` lines at the top of the file; reading stops at the first other line.
std::vector<expectation> expectations(const fs::path& file) {
    std::ifstream in(file);
    std::vector<expectation> out;
    std::string line;
    const std::string prefix = "# expect: ";
    while (std::getline(in, line) && line.rfind(prefix, 0) == 0) {
        std::istringstream fields(line.substr(prefix.size()));
        expectation e;
        if (fields >> e.code >> e.line) out.push_back(e);
    }
    return out;
}

agentctl::diagnostics front_end(const fs::path& file) {
    // The same path as `agentctl check`: parse and semantic problems together.
    return agentctl::check_document(agentctl::load_workflow(file.string())).diags;
}

std::string listing(const agentctl::diagnostics& diags) {
    std::string out;
    for (const auto& d : diags.items())
        out +=
            "\n  " + d.code + " line " + std::to_string(d.location.line) + " [" + d.path + "] " + d.message;
    return out.empty() ? " (none)" : out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_invalid_document_has_expectations) {
    auto files = invalid_documents();
    BOOST_TEST_REQUIRE(!files.empty(), "no documents found under " << invalid_dir());
    for (const auto& file : files) {
        BOOST_TEST_CONTEXT(file.filename().string()) {
            BOOST_TEST(!expectations(file).empty());
        }
    }
}

BOOST_AUTO_TEST_CASE(invalid_documents_report_expected_diagnostics) {
    for (const auto& file : invalid_documents()) {
        auto diags = front_end(file);
        BOOST_TEST_CONTEXT(file.filename().string() << ", diagnostics:" << listing(diags)) {
            BOOST_TEST(diags.has_errors());
            for (const auto& e : expectations(file)) {
                bool found = std::any_of(diags.items().begin(), diags.items().end(), [&](const auto& d) {
                    return d.code == e.code && d.location.line == e.line;
                });
                BOOST_TEST(found, "expected " << e.code << " at line " << e.line);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(parse_diagnostics_are_located) {
    // Parse-level diagnostics point into the file; all but whole-document ones have a path.
    for (const auto& file : invalid_documents()) {
        auto parsed = agentctl::load_workflow(file.string());
        for (const auto& d : parsed.diags.items()) {
            BOOST_TEST_CONTEXT(file.filename().string() << ": " << d.code << " " << d.message) {
                BOOST_TEST(d.location.file == file.string());
                BOOST_TEST(d.location.line > 0);
                BOOST_TEST(d.location.column > 0);
                BOOST_TEST(!d.message.empty());
                bool whole_document =
                    d.code == "yaml_syntax" || d.code == "yaml_alias_limit" || d.code == "not_a_mapping";
                if (!whole_document) BOOST_TEST(!d.path.empty());
            }
        }
    }
}
