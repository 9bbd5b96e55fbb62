// Child ids in tests. A child's id is `PARENT--NNNN-DIGEST` (docs/DESIGN.md, "Plan"): tests
// about order and needs name children by position (`fan--0001`), and these turn one form into
// the other. The digest itself has tests of its own (tests/frontend/test_plan.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace test_support {

/// `fan--0001-7ccc5f4b9d04` -> `fan--0001`; any other id as it is.
inline std::string short_id(std::string id) {
    constexpr std::size_t digest = 12;
    if (id.size() > digest + 3 && id[id.size() - digest - 1] == '-' &&
        id.find_first_not_of("0123456789abcdef", id.size() - digest) == std::string::npos &&
        id.find("--") != std::string::npos)
        id.resize(id.size() - digest - 1);
    return id;
}

/// The id of the task of `p` (an agentctl::plan; a template, so that tests of the command line,
/// which do not link the library, can include this) whose short id is `id` (a declared id is
/// its own); `id` itself when there is none.
template <class Plan>
std::string full_id(const Plan& p, std::string_view id) {
    if (p.find(id)) return std::string(id);
    for (std::uint32_t i = 0; i < p.size(); ++i)
        if (std::string full = p.task_id(i); short_id(full) == id) return full;
    return std::string(id);
}

}  // namespace test_support
