// The messages between a process and its watchdog: one SOCK_SEQPACKET datagram each, fields
// separated by NUL bytes (no field can hold one: they are paths, numbers, environment
// entries). Private to src/exec; the list is in docs/CRASH_SAFETY.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentctl::exec::wire {

// Owner -> watchdog.
inline constexpr std::string_view cgroup = "cgroup";  // PATH: an owner cgroup directory
inline constexpr std::string_view group_start =
    "group+";  // PID LO HI: a process-group leader started in [LO, HI]
inline constexpr std::string_view group_end = "group-";  // PID: that leader was reaped
inline constexpr std::string_view engine = "engine";     // NAME PATH OWNER ENV...
inline constexpr std::string_view slurm = "slurm";       // SCANCEL ENV...
inline constexpr std::string_view job_start = "job+";    // ID
inline constexpr std::string_view job_end = "job-";      // ID
inline constexpr std::string_view name_start = "name+";  // NAME: a job about to be submitted
inline constexpr std::string_view name_end = "name-";    // NAME: its id is known, or it is gone
inline constexpr std::string_view note = "note";         // TEXT: a line for the report
inline constexpr std::string_view clean_exit = "exit";   // nothing is left: exit at once
// Watchdog -> owner.
inline constexpr std::string_view hello = "hello";  // PID: ready

inline std::string encode(const std::vector<std::string_view>& fields) {
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) out.push_back('\0');
        out.append(fields[i]);
    }
    return out;
}

inline std::vector<std::string_view> decode(std::string_view datagram) {
    std::vector<std::string_view> fields;
    while (true) {
        auto at = datagram.find('\0');
        fields.push_back(datagram.substr(0, at));
        if (at == std::string_view::npos) return fields;
        datagram.remove_prefix(at + 1);
    }
}

}  // namespace agentctl::exec::wire
