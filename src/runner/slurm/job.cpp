// Job names, states and the squeue/scontrol parsers.
#include "runner/slurm/job.hpp"

#include "runner/lines.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>

namespace agentctl::slurm {

namespace {

bool is_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

bool run_id_char(char c) {
    return is_alnum(c) || c == '_' || c == '-';
}
bool host_char(char c) {
    return is_alnum(c) || c == '.' || c == '-' || c == '_';
}
bool task_char(char c) {
    return is_alnum(c) || c == '_' || c == '.' || c == '-';
}

template <typename T>
std::optional<T> number(std::string_view s) {
    if (!all_digits(s)) return std::nullopt;
    T value{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return value;
}

// FNV-1a, 64 bits: a stable short tag for a shortened task id, not a security measure.
std::string hash_hex(std::string_view s) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    static constexpr char hex[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = hex[h & 15];
    return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    for (;;) {
        auto at = s.find(sep);
        parts.push_back(s.substr(0, at));
        if (at == std::string_view::npos) break;
        s.remove_prefix(at + 1);
    }
    return parts;
}

struct state_name {
    job_state state;
    std::string_view name;
    std::string_view code;  // squeue's %t
};

constexpr std::array<state_name, 24> state_names = {{
    {job_state::pending, "PENDING", "PD"},
    {job_state::running, "RUNNING", "R"},
    {job_state::suspended, "SUSPENDED", "S"},
    {job_state::completing, "COMPLETING", "CG"},
    {job_state::completed, "COMPLETED", "CD"},
    {job_state::cancelled, "CANCELLED", "CA"},
    {job_state::failed, "FAILED", "F"},
    {job_state::timeout, "TIMEOUT", "TO"},
    {job_state::node_fail, "NODE_FAIL", "NF"},
    {job_state::preempted, "PREEMPTED", "PR"},
    {job_state::boot_fail, "BOOT_FAIL", "BF"},
    {job_state::deadline, "DEADLINE", "DL"},
    {job_state::out_of_memory, "OUT_OF_MEMORY", "OOM"},
    {job_state::configuring, "CONFIGURING", "CF"},
    {job_state::resizing, "RESIZING", "RS"},
    {job_state::requeued, "REQUEUED", "RQ"},
    {job_state::requeue_fed, "REQUEUE_FED", "RF"},
    {job_state::requeue_hold, "REQUEUE_HOLD", "RH"},
    {job_state::revoked, "REVOKED", "RV"},
    {job_state::signaling, "SIGNALING", "SI"},
    {job_state::special_exit, "SPECIAL_EXIT", "SE"},
    {job_state::stage_out, "STAGE_OUT", "SO"},
    {job_state::stopped, "STOPPED", "ST"},
    {job_state::resv_del_hold, "RESV_DEL_HOLD", "RD"},
}};

}  // namespace

std::string job_name_host(std::string_view host) {
    std::string out;
    for (char c : host.substr(0, max_host_length)) out.push_back(host_char(c) && c != '_' ? c : '_');
    return out.empty() ? "unknown" : out;
}

std::string job_name_task(std::string_view task_id) {
    std::string out;
    out.reserve(std::min(task_id.size(), max_task_length));
    if (task_id.size() <= max_task_length) {
        for (char c : task_id) out.push_back(task_char(c) ? c : '_');
        return out.empty() ? "_" : out;
    }
    constexpr std::size_t keep = max_task_length - 17;  // '~' + 16 hex digits
    for (char c : task_id.substr(0, keep)) out.push_back(task_char(c) ? c : '_');
    return out + "~" + hash_hex(task_id);
}

std::optional<std::string> job_name(std::string_view run_id, const job_owner& owner, std::string_view task_id,
                                    std::uint32_t attempt, std::string& error) {
    if (run_id.empty() || run_id.size() > max_run_id_length ||
        !std::all_of(run_id.begin(), run_id.end(), run_id_char)) {
        error = "the run id must be 1 to 64 characters of A-Z a-z 0-9 _ - to name Slurm jobs";
        return std::nullopt;
    }
    if (owner.pid <= 0 || owner.pid > INT_MAX || !all_digits(owner.start_time)) {
        error = "the owner's pid and start time are not known";
        return std::nullopt;
    }
    if (attempt == 0) {
        error = "attempts count from 1";
        return std::nullopt;
    }
    std::string name(job_name_prefix);
    name += run_id;
    name += ':' + job_name_host(owner.host);
    name += ':' + std::to_string(owner.pid);
    name += ':' + owner.start_time;
    name += ':' + job_name_task(task_id);
    name += ':' + std::to_string(attempt);
    return name;
}

std::optional<job_name_fields> parse_job_name(std::string_view name) {
    if (name.substr(0, job_name_prefix.size()) != job_name_prefix) return std::nullopt;
    auto parts = split(name.substr(job_name_prefix.size()), ':');
    if (parts.size() != 6) return std::nullopt;
    job_name_fields f;
    std::string_view run = parts[0], host = parts[1], task = parts[4];
    if (run.empty() || run.size() > max_run_id_length || !std::all_of(run.begin(), run.end(), run_id_char))
        return std::nullopt;
    if (host.empty() || host.size() > max_host_length || !std::all_of(host.begin(), host.end(), host_char))
        return std::nullopt;
    auto pid = number<long>(parts[2]);
    if (!pid || *pid <= 0 || *pid > INT_MAX || !all_digits(parts[3])) return std::nullopt;
    if (task.empty() || task.size() > max_task_length ||
        !std::all_of(task.begin(), task.end(), [](char c) { return task_char(c) || c == '~'; }))
        return std::nullopt;
    auto attempt = number<std::uint32_t>(parts[5]);
    if (!attempt || *attempt == 0) return std::nullopt;
    f.run_id = std::string(run);
    f.owner = job_owner{std::string(host), *pid, std::string(parts[3])};
    f.task = std::string(task);
    f.attempt = *attempt;
    return f;
}

bool owner_is_dead(const job_owner& owner, std::string_view our_host,
                   const start_time_reader& start_time_of) {
    if (owner.host != our_host || owner.pid <= 0 || !start_time_of) return false;
    auto start = start_time_of(owner.pid);
    if (!start) return true;            // no such process
    if (start->empty()) return false;   // exists, start time unknown: leave it
    return *start != owner.start_time;  // the pid was reused
}

job_state parse_job_state(std::string_view text) {
    // scontrol and sacct may add words ("CANCELLED by 0"); squeue prints one.
    auto space = text.find_first_of(" \t\r\n");
    text = text.substr(0, space);
    for (const auto& s : state_names)
        if (text == s.name || text == s.code) return s.state;
    return job_state::unknown;
}

std::string_view to_string(job_state s) {
    for (const auto& n : state_names)
        if (n.state == s) return n.name;
    return "UNKNOWN";
}

bool never_granted(std::string_view reason) {
    return reason == "PartitionNodeLimit" || reason == "PartitionConfig" || reason == "PartitionTimeLimit";
}

bool is_active(job_state s) {
    switch (s) {
        case job_state::completed:
        case job_state::cancelled:
        case job_state::failed:
        case job_state::timeout:
        case job_state::node_fail:
        case job_state::preempted:
        case job_state::boot_fail:
        case job_state::deadline:
        case job_state::out_of_memory:
        case job_state::revoked:
        case job_state::special_exit:
            return false;
        default:
            return true;
    }
}

std::vector<queue_entry> parse_squeue(std::string_view output) {
    std::vector<queue_entry> entries;
    while (!output.empty()) {
        std::string_view line = next_line(output);
        // id|state|reason|nodes|name: the first four fields hold no '|', the name may.
        std::array<std::string_view, 4> field;
        bool ok = true;
        for (auto& f : field) {
            auto bar = line.find('|');
            if (bar == std::string_view::npos) {
                ok = false;
                break;
            }
            f = line.substr(0, bar);
            line.remove_prefix(bar + 1);
        }
        if (!ok) continue;
        auto id = number<std::uint64_t>(field[0]);
        if (!id) continue;
        queue_entry e;
        e.job_id = *id;
        e.state_text = std::string(field[1]);
        e.state = parse_job_state(field[1]);
        e.reason = std::string(field[2]);
        e.nodes = std::string(field[3]);
        e.name = std::string(line);
        entries.push_back(std::move(e));
    }
    return entries;
}

std::vector<queue_entry> jobs_of_run(const std::vector<queue_entry>& entries, std::string_view run_id,
                                     const job_owner& owner) {
    std::vector<queue_entry> out;
    const std::string host = job_name_host(owner.host);
    for (const auto& e : entries) {
        if (!is_active(e.state)) continue;
        auto f = parse_job_name(e.name);
        if (!f || f->run_id != run_id) continue;
        if (f->owner.host != host || f->owner.pid != owner.pid || f->owner.start_time != owner.start_time)
            continue;
        out.push_back(e);
    }
    return out;
}

std::vector<queue_entry> jobs_of_dead_runs(const std::vector<queue_entry>& entries, std::string_view our_host,
                                           const start_time_reader& start_time_of,
                                           const std::vector<std::string>& run_ids) {
    std::vector<queue_entry> out;
    for (const auto& e : entries) {
        if (!is_active(e.state)) continue;
        auto f = parse_job_name(e.name);
        if (!f) continue;
        if (!run_ids.empty() && std::find(run_ids.begin(), run_ids.end(), f->run_id) == run_ids.end())
            continue;
        if (!owner_is_dead(f->owner, our_host, start_time_of)) continue;
        out.push_back(e);
    }
    return out;
}

std::optional<exit_pair> parse_exit_pair(std::string_view text) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto status = number<int>(text.substr(0, colon));
    auto signal = number<int>(text.substr(colon + 1));
    if (!status || !signal) return std::nullopt;
    return exit_pair{*status, *signal};
}

std::optional<std::string_view> job_record::get(std::string_view key) const {
    for (const auto& [k, v] : fields)
        if (k == key) return std::string_view(v);
    return std::nullopt;
}

std::optional<std::uint64_t> job_record::job_id() const {
    auto v = get("JobId");
    return v ? number<std::uint64_t>(*v) : std::nullopt;
}

job_state job_record::state() const {
    auto v = get("JobState");
    return v ? parse_job_state(*v) : job_state::unknown;
}

std::optional<exit_pair> job_record::exit_code() const {
    auto v = get("ExitCode");
    return v ? parse_exit_pair(*v) : std::nullopt;
}

std::vector<job_record> parse_scontrol_jobs(std::string_view output) {
    // Keys look like JobId, CPUs/Task, AllocNode:Sid, NtasksPerN:B:S:C.
    auto key_of = [](std::string_view word) -> std::optional<std::string_view> {
        auto eq = word.find('=');
        if (eq == 0 || eq == std::string_view::npos) return std::nullopt;
        std::string_view key = word.substr(0, eq);
        if (!is_alnum(key[0]) || is_digit(key[0])) return std::nullopt;
        for (char c : key)
            if (!is_alnum(c) && c != '_' && c != ':' && c != '/') return std::nullopt;
        return key;
    };
    std::vector<job_record> records;
    while (!output.empty()) {
        std::string_view line = next_line(output);
        job_record r;
        while (!line.empty()) {
            auto start = line.find_first_not_of(" \t\r");
            if (start == std::string_view::npos) break;
            line.remove_prefix(start);
            auto end = line.find_first_of(" \t\r");
            std::string_view word = line.substr(0, end);
            line = end == std::string_view::npos ? std::string_view() : line.substr(end);
            if (auto key = key_of(word)) {
                r.fields.emplace_back(std::string(*key), std::string(word.substr(key->size() + 1)));
            } else if (!r.fields.empty()) {
                r.fields.back().second += ' ';
                r.fields.back().second += word;
            }
        }
        if (r.job_id()) records.push_back(std::move(r));
    }
    return records;
}

}  // namespace agentctl::slurm
