// Printing: human diagnostics and colour, the JSON envelopes on the right stream.
#include "cli.hpp"

#include <agentctl/wire.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace agentctl::cli {

void fd_sink::write(std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return;  // a closed stdout (EPIPE) is not worth a crash; the exit code still tells
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

namespace {
fd_sink stdout_fd(STDOUT_FILENO), stderr_fd(STDERR_FILENO);
json_sink* current_out = &stdout_fd;
json_sink* current_err = &stderr_fd;
}  // namespace

json_sink& standard_output() { return *current_out; }
json_sink& standard_error() { return *current_err; }

void redirect_standard_streams(json_sink* out, json_sink* err) {
    current_out = out ? out : &stdout_fd;
    current_err = err ? err : &stderr_fd;
}

bool use_color(const command_line& cl, int fd) {
    if (cl.output != output_format::human) return false;
    if (cl.color == color_mode::always) return true;
    if (cl.color == color_mode::never) return false;
    const char* term = std::getenv("TERM");
    return ::isatty(fd) && std::getenv("NO_COLOR") == nullptr && !(term && std::string_view(term) == "dumb");
}

std::string paint(bool color, const char* sgr, std::string_view text) {
    return color ? std::string("\x1b[") + sgr + "m" + std::string(text) + "\x1b[0m" : std::string(text);
}

namespace {

// Child output and document text can hold terminal escapes; never send them raw.
std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f)) {
            out.push_back(static_cast<char>(c));
        } else {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

}  // namespace

stream_form streams_for(const command_line& cl) {
    return cl.output == output_format::json ? stream_form::base64_unless_text : stream_form::text;
}

void print_diagnostics_human(const command_line& cl, const diagnostics& diags) {
    bool color = use_color(cl, STDERR_FILENO);
    std::string out;
    for (const auto& d : diags.items()) {
        if (cl.quiet && d.level != severity::error) continue;
        const auto& at = d.location;
        std::string where = at.file.empty() ? std::string("agentctl") : at.file;
        if (at.line > 0) where += ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
        bool error = d.level == severity::error;
        out += paint(color, "1", where) + ": " +
               (error ? paint(color, "1;31", "error") : paint(color, "1;33", "warning")) + ": " +
               printable(d.message) + " [" + d.code + "]\n";
        if (!d.path.empty()) out += "  at " + printable(d.path) + "\n";
        if (!d.help.empty()) out += "  help: " + printable(d.help) + "\n";
    }
    standard_error().write(out);
}

namespace {

bool left_by(const swept_cgroup& c, const journal_owner& o) {
    return c.owner_pid == o.pid && (c.owner_start == 0 || c.owner_start == o.start_time);
}

// A container's owner label is "HOST:PID:START:INSTANCE".
bool left_by(const swept_container& c, const journal_owner& o) {
    return c.owner.find(":" + std::to_string(o.pid) + ":" + std::to_string(o.start_time) + ":") !=
           std::string::npos;
}

}  // namespace

void print_leftovers_human(const command_line& cl, const sweep_report& r,
                           const std::vector<journal_owner>* known) {
    if (cl.output != output_format::human || r.empty()) return;
    auto said = [&](const auto& left) {
        return !cl.quiet || !known || std::any_of(known->begin(), known->end(), [&](const journal_owner& o) {
            return left_by(left, o);
        });
    };
    bool color = use_color(cl, STDERR_FILENO);
    std::string out;
    for (const auto& c : r.cgroups)
        if (said(c))
            out += paint(color, "1;33", "agentctl:") + " " +
                   (c.removed ? "removed what a dead run left: cgroup "
                              : "could not remove what a dead run left: cgroup ") +
                   printable(c.path) + " (owner pid " + std::to_string(c.owner_pid) + ", " +
                   std::to_string(c.processes_killed) + " processes killed)" +
                   (c.error.empty() ? "" : ": " + printable(c.error)) + "\n";
    for (const auto& c : r.containers)
        if (said(c))
            out +=
                paint(color, "1;33", "agentctl:") + " " +
                (c.removed ? "removed what a dead run left: " : "could not remove what a dead run left: ") +
                c.engine + " container " + printable(c.name) +
                (c.error.empty() ? "" : ": " + printable(c.error)) + "\n";
    for (const auto& j : r.slurm_cancelled)
        out += paint(color, "1;33", "agentctl:") + " cancelled what a dead run left: Slurm job " +
               printable(j) + "\n";
    for (const auto& j : r.slurm_left)
        out += paint(color, "1;33", "agentctl:") + " could not cancel what a dead run left: Slurm job " +
               printable(j) + "\n";
    if (!r.unavailable.empty() && cl.verbose) out += "agentctl: no cgroup sweep: " + printable(r.unavailable) + "\n";
    standard_error().write(out);
}

std::string workspace_root_path(const plan& p, const std::string& base_dir) {
    std::filesystem::path root(p.policy.workspace_root);
    if (root.is_relative()) root = std::filesystem::path(base_dir) / root;
    std::string text = root.lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
}

void print_success(std::string_view kind, const std::function<void(json_writer&)>& write_data,
                   const diagnostics& diags) {
    write_success_envelope(standard_output(), kind, write_data, diags);
}

int print_failure(const command_line& cl, std::string_view message, exit_status s, const diagnostics& diags) {
    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, diags);
        bool color = use_color(cl, STDERR_FILENO);
        standard_error().write(paint(color, "1;31", "agentctl:") + " " + printable(message) + "\n");
        return status(s);
    }
    write_error_envelope(standard_error(), message, s, diags);
    return status(s);
}

std::optional<watchdog> start_watchdog(const command_line& cl) {
    std::string why;
    std::optional<watchdog> watch = watchdog::start({}, why);
    if (!watch) {
        diagnostics d;
        d.warning("no_watchdog", "",
                  "the watchdog could not start (" + why +
                      "): if agentctl is killed, what it started keeps running",
                  "");
        if (cl.output == output_format::human) print_diagnostics_human(cl, d);
    }
    return watch;
}

session open_and_report(const command_line& cl) {
    session s = open_session(cl.request());
    if (!s.ok()) print_failure(cl, s.failure, s.status, s.diags);
    return s;
}

}  // namespace agentctl::cli
