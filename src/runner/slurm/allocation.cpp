// SLURM_JOB_NODELIST and SLURM_JOB_CPUS_PER_NODE (docs/WORKER.md, "Choosing the mode").
#include "runner/slurm/allocation.hpp"

#include <charconv>
#include <optional>

namespace agentctl::slurm {
namespace {

// Splits at commas outside brackets; nothing when a bracket is unclosed, nested or stray.
std::optional<std::vector<std::string_view>> split_outside_brackets(std::string_view text) {
    std::vector<std::string_view> parts;
    bool inside = false;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '[') {
            if (inside) return std::nullopt;
            inside = true;
        } else if (c == ']') {
            if (!inside) return std::nullopt;
            inside = false;
        } else if (c == ',' && !inside) {
            parts.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    if (inside) return std::nullopt;
    parts.push_back(text.substr(start));
    return parts;
}

std::optional<std::uint64_t> whole_number(std::string_view digits) {
    std::uint64_t v = 0;
    if (digits.empty()) return std::nullopt;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return v;
}

// Calls `each` with every comma-separated item of `text` (an empty text is one empty item) until
// it returns false; returns whether every call returned true.
template <typename Each>
bool for_each_item(std::string_view text, Each each) {
    for (std::size_t start = 0;;) {
        std::size_t comma = text.find(',', start);
        if (!each(text.substr(start, comma == std::string_view::npos ? comma : comma - start))) return false;
        if (comma == std::string_view::npos) return true;
        start = comma + 1;
    }
}

std::string padded(std::uint64_t v, std::size_t width) {
    std::string s = std::to_string(v);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    return s;
}

// The values of one bracket's contents, "01-03,7": a range keeps the width of its first number.
bool expand_group(std::string_view group, std::vector<std::string>& out, std::string& error) {
    return for_each_item(group, [&](std::string_view item) {
        std::size_t dash = item.find('-');
        std::string_view low = item.substr(0, dash);
        std::string_view high = dash == std::string_view::npos ? low : item.substr(dash + 1);
        auto a = whole_number(low);
        auto b = whole_number(high);
        if (!a || !b)
            error = "\"" + std::string(item) + "\" is not a number or a range of numbers";
        else if (*b < *a)
            error = "the range \"" + std::string(item) + "\" runs backwards";
        else if (*b - *a >= max_hostlist_hosts - out.size())
            error = "it names more than " + std::to_string(max_hostlist_hosts) + " hosts";
        if (!error.empty()) return false;
        // Counted, not compared with *b: a range ending at 2^64 - 1 must not wrap around.
        for (std::uint64_t i = 0; i <= *b - *a; ++i) out.push_back(padded(*a + i, low.size()));
        return true;
    });
}

}  // namespace

hostlist_result expand_hostlist(std::string_view list) {
    hostlist_result out;
    auto fail = [&](std::string why) {
        out.hosts.clear();
        out.error = "cannot read the host list \"" + std::string(list) + "\": " + std::move(why);
        return out;
    };
    auto entries = split_outside_brackets(list);
    if (!entries) return fail("a bracket is not closed, nested or not opened");
    for (std::string_view entry : *entries) {
        if (entry.empty()) return fail("it has an empty entry");
        // Literal text and bracket groups, multiplied out from the left.
        std::vector<std::string> names(1);
        while (!entry.empty()) {
            std::size_t open = entry.find('[');
            std::string_view literal = entry.substr(0, open);
            for (auto& n : names) n.append(literal);
            if (open == std::string_view::npos) break;
            std::size_t close = entry.find(']', open);
            std::vector<std::string> values;
            std::string why;
            if (!expand_group(entry.substr(open + 1, close - open - 1), values, why)) return fail(why);
            if (values.size() > (max_hostlist_hosts - out.hosts.size()) / names.size())
                return fail("it names more than " + std::to_string(max_hostlist_hosts) + " hosts");
            std::vector<std::string> product;
            product.reserve(names.size() * values.size());
            for (const auto& n : names)
                for (const auto& v : values) product.push_back(n + v);
            names = std::move(product);
            entry.remove_prefix(close + 1);
        }
        if (names.size() > max_hostlist_hosts - out.hosts.size())
            return fail("it names more than " + std::to_string(max_hostlist_hosts) + " hosts");
        out.hosts.insert(out.hosts.end(), names.begin(), names.end());
    }
    return out;
}

cpus_result parse_cpus_per_node(std::string_view text) {
    cpus_result out;
    std::string why;
    bool ok = for_each_item(text, [&](std::string_view item) {
        std::string_view count_text = item;
        std::uint64_t repeat = 1;
        if (std::size_t paren = item.find('('); paren != std::string_view::npos) {
            std::string_view times = item.substr(paren);
            auto m = times.size() >= 4 && times.substr(0, 2) == "(x" && times.back() == ')'
                         ? whole_number(times.substr(2, times.size() - 3))
                         : std::nullopt;
            if (!m || *m == 0) {
                why = "\"" + std::string(item) + "\" is not N or N(xM) with M >= 1";
                return false;
            }
            repeat = *m;
            count_text = item.substr(0, paren);
        }
        auto count = whole_number(count_text);
        if (!count || *count == 0 || *count > UINT32_MAX)
            why = "\"" + std::string(item) + "\" is not a CPU count of at least 1";
        else if (repeat > max_hostlist_hosts - out.cpus.size())
            why = "it counts more than " + std::to_string(max_hostlist_hosts) + " nodes";
        if (!why.empty()) return false;
        out.cpus.insert(out.cpus.end(), repeat, static_cast<std::uint32_t>(*count));
        return true;
    });
    if (!ok) {
        out.cpus.clear();
        out.error = "cannot read the CPUs per node \"" + std::string(text) + "\": " + why;
    }
    return out;
}

allocation_result read_allocation(const std::function<std::optional<std::string>(std::string_view)>& env) {
    allocation_result out;
    auto id = env("SLURM_JOB_ID");
    if (!id) return out;
    auto fail = [&out](std::string why) {
        out.error = std::move(why);
        return out;
    };
    allocation a;
    auto [end, ec] = std::from_chars(id->data(), id->data() + id->size(), a.job_id);
    if (id->empty() || ec != std::errc() || end != id->data() + id->size() || a.job_id == 0)
        return fail("SLURM_JOB_ID is not a job id: \"" + *id + "\"");
    auto list = env("SLURM_JOB_NODELIST");
    if (!list) return fail("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not");
    auto hosts = expand_hostlist(*list);
    if (!hosts) return fail("SLURM_JOB_NODELIST: " + hosts.error);
    auto per_node = env("SLURM_JOB_CPUS_PER_NODE");
    if (!per_node) return fail("SLURM_JOB_ID is set but SLURM_JOB_CPUS_PER_NODE is not");
    auto cpus = parse_cpus_per_node(*per_node);
    if (!cpus) return fail("SLURM_JOB_CPUS_PER_NODE: " + cpus.error);
    if (cpus.cpus.size() != hosts.hosts.size())
        return fail("SLURM_JOB_NODELIST names " + std::to_string(hosts.hosts.size()) +
                    " node(s) but SLURM_JOB_CPUS_PER_NODE gives CPUs for " +
                    std::to_string(cpus.cpus.size()));
    a.nodes = std::move(hosts.hosts);
    a.cpus = std::move(cpus.cpus);
    out.found = std::move(a);
    return out;
}

}  // namespace agentctl::slurm

namespace agentctl::slurm {
namespace {

// "0-3,8,10-11" -> 7; nothing when an item is not a number or an ascending range.
std::optional<std::uint64_t> count_ids(std::string_view list) {
    std::uint64_t n = 0;
    bool ok = for_each_item(list, [&](std::string_view item) {
        std::size_t dash = item.find('-');
        auto a = whole_number(item.substr(0, dash));
        auto b = dash == std::string_view::npos ? a : whole_number(item.substr(dash + 1));
        if (!a || !b || *b < *a || *b - *a >= max_hostlist_hosts) return false;
        n += *b - *a + 1;
        return true;
    });
    if (!ok || n == 0) return std::nullopt;
    return n;
}

}  // namespace

allocation_result read_allocation_detail(std::uint64_t job_id, std::string_view text) {
    allocation_result out;
    allocation a;
    a.job_id = job_id;
    std::string why;
    std::vector<std::string> group;  // the hosts of the last Nodes= word
    for (std::size_t start = 0; start < text.size() && why.empty();) {
        std::size_t end = text.find_first_of(" \n", start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view word = text.substr(start, end - start);
        start = end + 1;
        if (word.substr(0, 6) == "Nodes=") {
            auto hosts = expand_hostlist(word.substr(6));
            if (!hosts) why = hosts.error;
            group = std::move(hosts.hosts);
        } else if (word.substr(0, 8) == "CPU_IDs=") {
            auto n = count_ids(word.substr(8));
            if (group.empty() || !n || *n > UINT32_MAX)
                why = "cannot read \"" + std::string(word) + "\" after the node list";
            for (auto& h : group) {
                a.nodes.push_back(std::move(h));
                a.cpus.push_back(static_cast<std::uint32_t>(n.value_or(0)));
            }
            group.clear();
        }
    }
    if (why.empty() && a.nodes.empty()) why = "it names no node with its CPUs (Nodes= CPU_IDs=)";
    if (!why.empty()) {
        out.error = "scontrol show job -d " + std::to_string(job_id) + ": " + why;
        return out;
    }
    out.found = std::move(a);
    return out;
}

}  // namespace agentctl::slurm
