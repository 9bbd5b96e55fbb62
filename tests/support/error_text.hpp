// Tests compare error codes by their JSON spelling, which also checks the spelling.
#pragma once

#include <agentctl/error.hpp>

#include <ostream>
#include <string_view>

namespace agentctl {
inline bool operator==(error_code c, std::string_view spelling) {
    return to_string(c) == spelling;
}
inline std::ostream& operator<<(std::ostream& os, error_code c) {
    return os << to_string(c);
}
}  // namespace agentctl
