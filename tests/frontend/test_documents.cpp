// Data-driven front-end tests: every tests/frontend/invalid/*.yaml starts with comment lines
// `# expect: <code> <line>[:<column>] [<path>]`, and the diagnostics of
// check_document (parse and semantic problems together, as `agentctl check` reports them)
// are exactly those: no expected one missing, no other one present.
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include "targets.hpp"

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

namespace {

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.is_regular_file() && entry.path().filename().string().front() != '.')
            files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::string bytes_of(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

// Every input a fuzz target ever failed on is kept in tests/frontend/fuzz/TARGET/ and must now
// pass that target's checks (fuzz/targets.hpp); so must every document here, the fuzzers' seeds.
BOOST_AUTO_TEST_CASE(fuzz_inputs_pass_the_fuzz_checks) {
    const fs::path data = invalid_dir().parent_path();
    struct target {
        std::string name;
        std::string (*check)(std::string_view);
        std::vector<fs::path> seeds;
    };
    const std::vector<target> targets = {
        {"workflow", agentctl::fuzz::workflow, {data / "invalid", data / "golden"}},
        {"templates", agentctl::fuzz::templates, {}},
        {"json", agentctl::fuzz::json, {data / "golden"}},
    };
    std::size_t replayed = 0;
    for (const auto& t : targets) {
        BOOST_TEST_REQUIRE(fs::is_directory(data / "fuzz" / t.name), (data / "fuzz" / t.name).string()
                                                                         << " is missing");
        std::vector<fs::path> files = files_in(data / "fuzz" / t.name);
        for (const auto& dir : t.seeds)
            for (auto& f : files_in(dir)) files.push_back(std::move(f));
        for (const auto& file : files) {
            std::string problem = t.check(bytes_of(file));
            BOOST_TEST(problem.empty(), t.name << " on " << file.string() << ": " << problem);
            ++replayed;
        }
    }
    BOOST_TEST(replayed > 100u);
}
