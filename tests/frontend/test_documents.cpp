// Data-driven front-end tests: every tests/frontend/invalid/*.yaml starts with comment lines
// `# expect: <code> <line>[:<column>] [<path>]`, and the diagnostics of
// check_document (parse and semantic problems together, as `agentctl check` reports them)
// are exactly those: no expected one missing, no other one present.
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
    int column = 0;    ///< 0: any column
    std::string path;  ///< empty: any path

    bool matches(const agentctl::diagnostic& d) const {
        return d.code == code && d.location.line == line && (column == 0 || d.location.column == column) &&
               (path.empty() || d.path == path);
    }
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
        std::string where;
        if (!(fields >> e.code >> where)) continue;
        auto colon = where.find(':');
        e.line = std::atoi(where.substr(0, colon).c_str());
        if (colon != std::string::npos) e.column = std::atoi(where.substr(colon + 1).c_str());
        fields >> e.path;
        out.push_back(e);
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
        out += "\n  " + d.code + " " + std::to_string(d.location.line) + ":" +
               std::to_string(d.location.column) + " [" + d.path + "] " + d.message;
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

BOOST_AUTO_TEST_CASE(invalid_documents_report_exactly_the_expected_diagnostics) {
    for (const auto& file : invalid_documents()) {
        auto diags = front_end(file);
        BOOST_TEST_CONTEXT(file.filename().string() << ", diagnostics:" << listing(diags)) {
            BOOST_TEST(diags.has_errors());
            // Matched one to one: each expectation takes one diagnostic, none is left over.
            std::vector<bool> used(diags.size(), false);
            for (const auto& e : expectations(file)) {
                bool found = false;
                for (std::size_t i = 0; i < diags.size() && !found; ++i)
                    if (!used[i] && e.matches(diags.items()[i])) used[i] = found = true;
                BOOST_TEST(found, "expected " << e.code << " at line " << e.line
                                              << (e.column ? ":" + std::to_string(e.column) : ""));
            }
            for (std::size_t i = 0; i < diags.size(); ++i) {
                const auto& d = diags.items()[i];
                BOOST_TEST(used[i], "unexpected " << d.code << " at line " << d.location.line << ":"
                                                  << d.location.column << " (" << d.message << ")");
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
