// Reading a backend's command output line by line (ps, squeue, sacct, sinfo, a stderr tail).
#pragma once

#include <string_view>

namespace agentctl {

/// Removes the first line from `text` and returns it without its "\n" or "\r\n".
inline std::string_view next_line(std::string_view& text) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
}

}  // namespace agentctl
