// Parser timing: yaml-cpp's own event scan of a document (a handler that does nothing)
// against our whole parse of the same bytes (byte and nesting checks, events into the tree,
// schema reading) and `check` (parse and compile, as `agentctl check` runs them). Only this
// benchmark sees yaml-cpp besides src/spec/parse.cpp: it is the baseline.
//
// Usage: parse_bench WORKFLOW.yaml [REPEAT]     (prints the fastest and the median run)
//
// Times are this thread's CPU time, not wall time: on a busy machine the wall clock
// measures the neighbours as well.
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct nothing final : YAML::EventHandler {
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

template <class F>
double time_ms(F f) {
    double start = cpu_ms();
    f();
    return cpu_ms() - start;
}

struct series {
    std::vector<double> ms;
    double best() const { return *std::min_element(ms.begin(), ms.end()); }
    double median() const {
        auto v = ms;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: parse_bench WORKFLOW.yaml [REPEAT]\n");
        return 2;
    }
    const int repeat = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
    std::ifstream in(argv[1], std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();

    series scan, parse, check;
    bool ok = true;
    for (int round = 0; round < repeat; ++round) {
        scan.ms.push_back(time_ms([&] {
            std::istringstream is(text);
            YAML::Parser parser(is);
            nothing handler;
            while (parser.HandleNextDocument(handler)) {
            }
        }));
        parse.ms.push_back(
            time_ms([&] { ok = agentctl::parse_workflow(text, argv[1]).document.has_value() && ok; }));
        check.ms.push_back(time_ms([&] {
            auto r = agentctl::check_document(agentctl::parse_workflow(text, argv[1]));
            ok = r.compiled.has_value() && ok;
        }));
    }
    if (!ok) {
        std::fprintf(stderr, "%s is not a valid workflow\n", argv[1]);
        return 2;
    }
    std::printf(
        "bytes %zu  CPU: yaml-cpp scan %.1f ms (median %.1f)  parse %.1f ms (median %.1f)  "
        "check %.1f ms (median %.1f)  parse/scan %.2fx  check/scan %.2fx\n",
        text.size(), scan.best(), scan.median(), parse.best(), parse.median(), check.best(), check.median(),
        parse.best() / scan.best(), check.best() / scan.best());
    return 0;
}
