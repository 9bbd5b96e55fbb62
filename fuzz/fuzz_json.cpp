// libFuzzer entry point for agentctl::fuzz::json (fuzz/targets.hpp); tools/fuzz builds and runs it.
#include "targets.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string problem = agentctl::fuzz::json({reinterpret_cast<const char*>(data), size});
    if (!problem.empty()) {
        std::fprintf(stderr, "fuzz_json: %s\n", problem.c_str());
        std::abort();
    }
    return 0;
}
