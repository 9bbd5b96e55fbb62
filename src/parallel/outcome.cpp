// What a front end needs to run jobs as GNU parallel does: -j, --halt and its exit status,
// the joblog's lines and what --resume reads back from them (docs/PARALLEL.md).
#include <agentctl/parallel.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace agentctl {

namespace {

template <typename T>
std::optional<T> whole_number(std::string_view text) {
    T value{};
    auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || at != text.data() + text.size()) return std::nullopt;
    return value;
}

// "12", "12.5": a non-negative decimal number, as parallel's patterns accept it.
std::optional<double> decimal(std::string_view text) {
    if (text.empty() ||
        !std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) ||
        std::count(text.begin(), text.end(), '.') > 1 || text.front() == '.' || text.back() == '.')
        return std::nullopt;
    double value = 0;
    auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || at != text.data() + text.size()) return std::nullopt;
    return value;
}

}  // namespace

std::optional<parallel_halt> parse_parallel_halt(std::string_view text, std::string& error) {
    using when = parallel_halt::when_t;
    using why = parallel_halt::why_t;
    // The old forms.
    if (text == "0" || text == "never") return parallel_halt{};
    if (text == "1") return parallel_halt{when::soon, why::fail, 1, false};
    if (text == "2") return parallel_halt{when::now, why::fail, 1, false};
    if (text == "-1") return parallel_halt{when::soon, why::success, 1, false};
    if (text == "-2") return parallel_halt{when::now, why::success, 1, false};
    if (text.size() > 1 && text.back() == '%' && text.find(',') == std::string_view::npos) {
        auto pct = decimal(text.substr(0, text.size() - 1));
        if (pct && *pct > 0 && *pct < 100) return parallel_halt{when::soon, why::fail, *pct, true};
    }
    error =
        "--halt " + std::string(text) +
        ": expected now|soon,fail|success|done=N or N% (for example now,fail=1 or soon,fail=10%), or never";
    auto comma = text.find(',');
    auto eq = text.find('=');
    if (comma == std::string_view::npos || eq == std::string_view::npos || eq < comma) return std::nullopt;
    parallel_halt h;
    std::string_view w = text.substr(0, comma), y = text.substr(comma + 1, eq - comma - 1),
                     n = text.substr(eq + 1);
    if (w == "now")
        h.when = when::now;
    else if (w == "soon")
        h.when = when::soon;
    else
        return std::nullopt;
    if (y == "fail")
        h.why = why::fail;
    else if (y == "success")
        h.why = why::success;
    else if (y == "done")
        h.why = why::done;
    else
        return std::nullopt;
    h.percent = !n.empty() && n.back() == '%';
    if (h.percent) n.remove_suffix(1);
    auto count = decimal(n);
    if (!count || *count <= 0 || (h.percent && *count > 100) || (!h.percent && *count != std::floor(*count)))
        return std::nullopt;
    h.count = *count;
    error.clear();
    return h;
}

std::optional<int> parse_parallel_jobs(std::string_view text, int cores, std::size_t job_count,
                                       std::string& error) {
    double jobs = 0;
    const bool relative = !text.empty() && (text[0] == '+' || text[0] == '-');
    std::optional<long long> whole = whole_number<long long>(relative ? text.substr(1) : text);
    std::optional<double> pct =
        text.size() > 1 && text.back() == '%' ? decimal(text.substr(0, text.size() - 1)) : std::nullopt;
    if (whole && relative) {
        jobs = text[0] == '+' ? cores + static_cast<double>(*whole) : cores - static_cast<double>(*whole);
    } else if (whole) {
        // -j 0: as many as possible; agentctl runs every job at once (the engine lowers that to
        // what the descriptor limit holds, and says so).
        jobs = *whole == 0 ? static_cast<double>(std::max<std::size_t>(job_count, 1))
                           : static_cast<double>(*whole);
    } else if (pct) {
        jobs = cores * *pct / 100;
    } else {
        error = "-j " + std::string(text) + ": not a number of jobs (N, N%, +N, -N or 0)";
        return std::nullopt;
    }
    jobs = std::ceil(jobs);
    // parallel runs at least one job; agentctl at most limits::max_concurrency.
    return static_cast<int>(std::clamp(jobs, 1.0, 4096.0));
}

parallel_outcome::action parallel_outcome::job_ended(bool failed, int exit_code, int signal) {
    using why = parallel_halt::why_t;
    ++completed_;
    failed_ += failed;
    if (halt_.when == parallel_halt::when_t::never || halted_) return action::none;
    // parallel's should_we_halt(): which count the rule watches.
    std::size_t reached = 0;
    if (halt_.why == why::fail) {
        if (!failed) return action::none;
        reached = failed_;
    } else if (halt_.why == why::success) {
        if (failed) return action::none;
        reached = completed_ - failed_;
    } else {
        reached = completed_;
    }
    double needed = halt_.percent ? static_cast<double>(total_) * halt_.count / 100 : halt_.count;
    if (static_cast<double>(reached) < needed) return action::none;
    halted_ = true;
    if (halt_.why == why::success) {
        halt_status_ = 0;
    } else if (!halt_.percent && halt_.count == 1) {
        // fail=1 and done=1: the job's own status (128 + its signal, as Bash says it).
        halt_status_ = exit_code ? exit_code : signal ? signal + 128 : 0;
    } else if (halt_.percent) {
        halt_status_ = static_cast<int>(std::ceil(
            static_cast<double>(failed_) / static_cast<double>(std::max<std::size_t>(total_, 1)) * 100));
    } else {
        halt_status_ = static_cast<int>(std::min<std::size_t>(failed_, 101));
    }
    return halt_.when == parallel_halt::when_t::now ? action::now : action::soon;
}

int parallel_outcome::exit_status() const {
    if (halt_status_) return *halt_status_;
    return static_cast<int>(std::min<std::size_t>(failed_, 101));
}

std::string parallel_joblog_header() {
    return "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";
}

std::string parallel_joblog_line(std::uint32_t seq, double start_unix, double runtime_seconds,
                                 std::uint64_t received, int exit_value, int signal,
                                 std::string_view command) {
    char head[160];
    std::snprintf(head, sizeof head, "%u\t:\t%.3f\t%10.3f\t0\t%llu\t%d\t%d\t", seq, start_unix,
                  runtime_seconds, static_cast<unsigned long long>(received), exit_value, signal);
    std::string line = head;
    for (char c : command) line += c == '\n' ? '\0' : c;
    line += '\n';
    return line;
}

std::optional<std::vector<std::uint32_t>> parallel_joblog_done(std::string_view joblog, bool succeeded_only,
                                                               std::string& error) {
    std::vector<std::uint32_t> done;
    bool first = true;
    while (!joblog.empty()) {
        auto nl = joblog.find('\n');
        std::string_view line = joblog.substr(0, nl);
        joblog.remove_prefix(nl == std::string_view::npos ? joblog.size() : nl + 1);
        if (std::exchange(first, false)) continue;  // the header
        // Seq, Host, Starttime, JobRuntime, Send, Receive, Exitval, Signal, Command
        std::vector<std::string_view> fields;
        for (std::size_t at = 0; fields.size() < 8;) {
            auto tab = line.find('\t', at);
            if (tab == std::string_view::npos) break;
            fields.push_back(line.substr(at, tab - at));
            at = tab + 1;
        }
        auto seq = fields.size() == 8 ? whole_number<std::uint32_t>(fields[0]) : std::nullopt;
        if (!seq) {
            error = "this is not a joblog line: " + std::string(line.substr(0, 200));
            return std::nullopt;
        }
        if (!succeeded_only || (fields[6] == "0" && fields[7] == "0")) done.push_back(*seq);
    }
    std::sort(done.begin(), done.end());
    done.erase(std::unique(done.begin(), done.end()), done.end());
    return done;
}

}  // namespace agentctl
