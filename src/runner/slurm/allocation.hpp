// The facts of a Slurm allocation as its environment spells them: the node list
// (SLURM_JOB_NODELIST, Slurm's host-list syntax) and the CPUs per node
// (SLURM_JOB_CPUS_PER_NODE). Pure: text in, values out (docs/WORKER.md, "Choosing the mode").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::slurm {

/// More hosts than this in one list is refused rather than expanded.
inline constexpr std::size_t max_hostlist_hosts = 65536;

/// Host names, or why a list could not be read.
struct hostlist_result {
    std::vector<std::string> hosts;
    std::string error;  ///< empty when hosts is usable
    explicit operator bool() const { return error.empty(); }
};

/// Expands `node[01-03,7],other,rack[1-2]-n[1-2]`: entries separated by commas outside
/// brackets; each bracket holds numbers and ranges, a range keeping the zero padding of its
/// first number; several brackets in one entry multiply. Refuses an empty list or entry, an
/// unclosed or nested bracket, a range that runs backwards, and more than max_hostlist_hosts.
hostlist_result expand_hostlist(std::string_view list);

/// CPU counts per node, or why the text could not be read.
struct cpus_result {
    std::vector<std::uint32_t> cpus;
    std::string error;  ///< empty when cpus is usable
    explicit operator bool() const { return error.empty(); }
};

/// Reads `8(x2),4`: a count per node, `(xN)` repeating it N times. Each count >= 1; at most
/// max_hostlist_hosts in all.
cpus_result parse_cpus_per_node(std::string_view text);

/// The allocation agentctl runs in, as its environment says.
struct allocation {
    std::uint64_t job_id = 0;
    std::vector<std::string> nodes;   ///< in SLURM_JOB_NODELIST's order
    std::vector<std::uint32_t> cpus;  ///< per node, like nodes
};

/// An allocation, none (SLURM_JOB_ID unset), or why the environment cannot be read.
struct allocation_result {
    std::optional<allocation> found;
    std::string error;  ///< SLURM_JOB_ID set, but it or the node list or CPUs malformed
};

/// Reads SLURM_JOB_ID, SLURM_JOB_NODELIST and SLURM_JOB_CPUS_PER_NODE through `env`. The node
/// list and the CPU counts must be there and agree in length.
allocation_result read_allocation(const std::function<std::optional<std::string>(std::string_view)>& env);

/// Reads the nodes and the CPUs of each from `scontrol show job -d -o` of job `job_id`: its
/// `Nodes=HOSTLIST CPU_IDs=LIST` pairs, in order (each CPU id or range counts its CPUs).
allocation_result read_allocation_detail(std::uint64_t job_id, std::string_view scontrol_text);

}  // namespace agentctl::slurm
