// Front-end timing: load_workflow, compile and write_plan_json of one document, each stage
// timed on its own. The plan JSON goes to a sink that only counts bytes, so the numbers are
// the library's cost without terminal or pipe effects.
//
// Usage: plan_bench WORKFLOW.yaml [REPEAT] [--inputs-file FILE]
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

class counting_sink final : public agentctl::json_sink {
public:
    void write(std::string_view bytes) override { count += bytes.size(); }
    std::size_t count = 0;
};

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: plan_bench WORKFLOW.yaml [REPEAT] [--inputs-file FILE]\n");
        return 2;
    }
    const int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
    const char* inputs_file = argc > 4 && std::string(argv[3]) == "--inputs-file" ? argv[4] : nullptr;
    for (int round = 0; round < repeat; ++round) {
        auto t0 = std::chrono::steady_clock::now();
        auto parsed = agentctl::load_workflow(argv[1]);
        agentctl::compile_options options;
        if (inputs_file) {
            auto inputs = agentctl::load_inputs_file(inputs_file);
            if (!inputs.inputs) {
                std::fprintf(stderr, "%s does not parse (%zu diagnostics)\n", inputs_file,
                             inputs.diags.size());
                return 2;
            }
            for (auto& m : *inputs.inputs)
                options.input_overrides.emplace_back(m.key(), std::move(m.value()));
        }
        double load_ms = ms_since(t0);
        if (!parsed.document) {
            std::fprintf(stderr, "%s does not parse (%zu diagnostics)\n", argv[1], parsed.diags.size());
            return 2;
        }
        auto t1 = std::chrono::steady_clock::now();
        auto result = agentctl::compile(*parsed.document, options);
        double compile_ms = ms_since(t1);
        if (!result.compiled) {
            std::fprintf(stderr, "%s does not compile (%zu diagnostics)\n", argv[1], result.diags.size());
            return 2;
        }
        auto t2 = std::chrono::steady_clock::now();
        counting_sink sink;
        agentctl::write_plan_json(*result.compiled, sink);
        double json_ms = ms_since(t2);
        auto t3 = std::chrono::steady_clock::now();
        std::size_t text_bytes = agentctl::plan_text(*result.compiled).size();
        double text_ms = ms_since(t3);
        std::printf(
            "tasks %zu  load %.1f ms  compile %.1f ms  json %.1f ms (%zu bytes)  text %.1f ms (%zu bytes)  "
            "total %.1f ms\n",
            static_cast<std::size_t>(result.compiled->size()), load_ms, compile_ms, json_ms, sink.count,
            text_ms, text_bytes, load_ms + compile_ms + json_ms);
    }
    return 0;
}
