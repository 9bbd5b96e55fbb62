// The Slurm options of a run, from the command line's text or checked as made in code.
#include <agentctl/backend.hpp>

#include "runner/slurm/allocation.hpp"
#include "runner/slurm/command.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace agentctl {

namespace {

bool has_control(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

std::string text_error(std::string_view flag, std::string_view value) {
    if (value.empty()) return "--slurm-" + std::string(flag) + " must not be empty";
    if (has_control(value)) return "--slurm-" + std::string(flag) + " must not hold a control character";
    return {};
}

// Slurm's time syntax is digits, ':' and '-' (minutes, MM:SS, HH:MM:SS, D-HH, ...); Slurm
// itself says which of those forms it takes.
std::string time_error(std::string_view value) {
    if (auto e = text_error("time", value); !e.empty()) return e;
    bool ok = std::all_of(value.begin(), value.end(),
                          [](char c) { return (c >= '0' && c <= '9') || c == ':' || c == '-'; });
    if (!ok)
        return "--slurm-time must be a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH:MM:SS), not \"" +
               std::string(value) + "\"";
    return {};
}

template <typename T>
std::optional<T> whole_number(std::string_view text) {
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1)
        return std::nullopt;
    return value;
}

}  // namespace

std::string set_slurm_option(slurm_options& o, std::string_view name, std::string_view value) {
    if (name == "dispatch") {
        if (value == "auto")
            o.dispatch = slurm_dispatch::automatic;
        else if (value == "worker")
            o.dispatch = slurm_dispatch::worker;
        else if (value == "job")
            o.dispatch = slurm_dispatch::job;
        else
            return "--slurm-dispatch must be auto, worker or job, not \"" + std::string(value) + "\"";
        return {};
    }
    if (name == "partition" || name == "account" || name == "qos") {
        if (auto e = text_error(name, value); !e.empty()) return e;
        if (name == "partition") {
            if (slurm::split_partitions(value).empty()) return "--slurm-partition names no partition";
            o.partition = std::string(value);
        } else if (name == "account") {
            o.account = std::string(value);
        } else {
            o.qos = std::string(value);
        }
        return {};
    }
    if (name == "cpus-per-task") {
        auto n = whole_number<std::uint32_t>(value);
        if (!n || *n > 1'000'000) return "--slurm-cpus-per-task must be a whole number from 1 to 1000000";
        o.cpus_per_task = *n;
        return {};
    }
    if (name == "mem") {
        // MiB; a petabyte is far beyond any node.
        auto n = whole_number<std::uint64_t>(value);
        if (!n || *n > (std::uint64_t{1} << 30))
            return "--slurm-mem must be a whole number of MiB from 1 to 1073741824";
        o.mem_mib = *n;
        return {};
    }
    if (name == "nodes") {
        auto n = whole_number<std::uint32_t>(value);
        if (!n || *n > slurm::max_hostlist_hosts)
            return "--slurm-nodes must be a whole number from 1 to " +
                   std::to_string(slurm::max_hostlist_hosts);
        o.nodes = *n;
        return {};
    }
    if (name == "time") {
        if (auto e = time_error(value); !e.empty()) return e;
        o.time = std::string(value);
        return {};
    }
    return "there is no Slurm option \"" + std::string(name) + "\"";
}

std::string slurm_options_error(const slurm_options& o) {
    for (auto [flag, value] : {std::pair<std::string_view, const std::string*>{"partition", &o.partition},
                               {"account", &o.account},
                               {"qos", &o.qos}})
        if (!value->empty() && has_control(*value))
            return "--slurm-" + std::string(flag) + " must not hold a control character";
    if (!o.partition.empty() && slurm::split_partitions(o.partition).empty())
        return "--slurm-partition names no partition";
    if (o.cpus_per_task && *o.cpus_per_task == 0) return "--slurm-cpus-per-task must be at least 1";
    if (o.mem_mib && *o.mem_mib == 0) return "--slurm-mem must be at least 1 MiB";
    if (!o.time.empty())
        if (auto e = time_error(o.time); !e.empty()) return e;
    if (o.nodes > slurm::max_hostlist_hosts)
        return "--slurm-nodes is above " + std::to_string(slurm::max_hostlist_hosts);
    if (!o.time.empty() && o.nodes == 0)
        return "--slurm-time is the time of the allocation --slurm-nodes asks for";
    if (o.nodes > 0 && o.dispatch == slurm_dispatch::job)
        return "--slurm-nodes runs workers on the nodes it asks for; --slurm-dispatch job starts a job per "
               "task";
    return {};
}

}  // namespace agentctl
