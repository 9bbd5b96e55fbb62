// Where the journal lives, who owns a run, and the names of codes and states.
#include <agentctl/journal.hpp>

#include "exec/host.hpp"
#include "exec/state_files.hpp"

namespace agentctl {

std::string_view to_string(journal_errc e) {
    switch (e) {
        case journal_errc::missing:
            return "missing";
        case journal_errc::unreadable:
            return "unreadable";
        case journal_errc::read_only:
            return "read_only";
        case journal_errc::foreign:
            return "foreign";
        case journal_errc::newer_schema:
            return "newer_schema";
        case journal_errc::corrupt:
            return "corrupt";
        case journal_errc::run_live:
            return "run_live";
        case journal_errc::unknown_run:
            return "unknown_run";
        case journal_errc::run_exists:
            return "run_exists";
        case journal_errc::disk_full:
            return "disk_full";
        case journal_errc::io_error:
            return "io_error";
        case journal_errc::busy:
            return "busy";
        case journal_errc::closed:
            return "closed";
        case journal_errc::internal:
            return "internal";
    }
    return "internal";
}

std::string_view to_string(journal_run_state s) {
    switch (s) {
        case journal_run_state::running:
            return "running";
        case journal_run_state::succeeded:
            return "succeeded";
        case journal_run_state::failed:
            return "failed";
        case journal_run_state::cancelled:
            return "cancelled";
        case journal_run_state::interrupted:
            return "interrupted";
    }
    return "failed";
}

std::optional<journal_run_state> parse_journal_run_state(std::string_view s) {
    for (auto st : {journal_run_state::running, journal_run_state::succeeded, journal_run_state::failed,
                    journal_run_state::cancelled, journal_run_state::interrupted})
        if (to_string(st) == s) return st;
    return std::nullopt;
}

namespace {

std::optional<std::string> non_empty(const env_lookup& env, std::string_view name) {
    if (!env) return std::nullopt;
    auto v = env(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
}

std::string without_trailing_slashes(std::string s) {
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

}  // namespace

journal_result<journal_location> default_journal_location(
    const env_lookup& env, const std::function<std::optional<std::string>()>& passwd_home) {
    std::string dir;
    if (auto v = non_empty(env, "AGENTCTL_STATE_DIR")) {
        if (v->front() != '/')
            return journal_error{journal_errc::unreadable,
                                 "AGENTCTL_STATE_DIR must be an absolute path (it is \"" + *v + "\")"};
        dir = *v;
    } else if (auto x = non_empty(env, "XDG_STATE_HOME"); x && x->front() == '/') {
        dir = without_trailing_slashes(*x) + "/agentctl";
    } else {
        auto home = non_empty(env, "HOME");
        if (!home && passwd_home) home = passwd_home();
        if (!home || home->empty())
            return journal_error{
                journal_errc::unreadable,
                "no state folder for the journal: HOME is unset and the password database has no "
                "home folder for this user; set AGENTCTL_STATE_DIR or use --db PATH"};
        if (home->front() != '/')
            return journal_error{journal_errc::unreadable,
                                 "the home folder must be an absolute path (it is \"" + *home + "\")"};
        dir = without_trailing_slashes(*home) + "/.local/state/agentctl";
    }
    dir = without_trailing_slashes(std::move(dir));
    journal_location loc;
    loc.db_path = (dir == "/" ? std::string() : dir) + "/journal.db";
    loc.state_dir = std::move(dir);
    return loc;
}

std::optional<std::string> passwd_home_dir() {
    return exec::passwd_home();
}

std::optional<journal_error> make_state_dir(const std::string& dir) {
    std::string failed_at;
    int err = exec::make_directories(dir, 0700, failed_at);
    if (err == 0) return std::nullopt;
    return journal_error{
        err == EROFS ? journal_errc::read_only : journal_errc::unreadable,
        "cannot create the state folder " + dir + " (at " + failed_at + "): " + exec::errno_text(err)};
}

journal_owner this_process_owner() {
    journal_owner o;
    o.host = exec::host_name();
    o.boot_id = exec::boot_id();
    o.pid = exec::current_pid();
    o.start_time = exec::process_start_time(exec::current_pid()).value_or(0);
    return o;
}

bool process_alive(std::int64_t pid, std::uint64_t start_time) {
    if (pid <= 0 || pid > 0x7fffffff) return false;
    return exec::process_alive(static_cast<pid_t>(pid), start_time);
}

bool owner_alive_here(const journal_owner& owner) {
    if (owner.host != exec::host_name()) return true;
    if (!owner.boot_id.empty() && owner.boot_id != exec::boot_id()) return false;
    return process_alive(owner.pid, owner.start_time);
}

}  // namespace agentctl
