// Running the agentctl binary from tests: plain posix_spawn, independent of the code under test.
#pragma once

#include <sys/types.h>

#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cli_test {

struct command_result {
    int exit_code = -1;  ///< -1 when killed by a signal
    int signal = 0;
    std::string out;
    std::string err;
    std::chrono::milliseconds wall{0};
    bool timed_out = false;  ///< the test's own bound fired; the process group was killed
    /// Its peak resident set (wait4's ru_maxrss). posix_spawn's child starts in this test
    /// process's memory, whose peak the kernel then counts as the child's: run() first resets
    /// that peak to the current size (/proc/self/clear_refs), so this is at least the test
    /// process's resident set at the start, and otherwise the command's own peak.
    long max_rss_kib = 0;
    long minor_faults = 0;  ///< wait4's ru_minflt: pages first touched (or mapped in) by the command
};

struct command_options {
    std::vector<std::string> env;  ///< added to a minimal environment (PATH, HOME); replaces a name it has
    std::string cwd;               ///< empty: the test's cwd
    std::chrono::milliseconds bound{60000};
    /// Called once the child runs, with its pid (e.g. to signal it later).
    std::function<void(pid_t)> on_start;
    /// Called every ~20 ms while it runs; return true to stop calling.
    std::function<bool(pid_t)> poll;
};

/// Path of the CLI under test ($AGENTCTL_BIN).
const std::string& agentctl_bin();
/// The folder of test data ($AGENTCTL_TEST_DATA).
const std::string& data_dir();
/// Path of the probe helper ($AGENTCTL_PROBE).
const std::string& probe_bin();
/// The state folder (journal) of every agentctl this test binary starts, never the user's:
/// removed with the test binary's end.
const std::string& test_state_dir();

/// Runs `argv` (argv[0] an absolute path) in its own process group and collects everything.
command_result run(const std::vector<std::string>& argv, const command_options& options = {});

/// Runs `argv` on a new pseudo-terminal (stdin, stdout and stderr; its controlling terminal).
/// Each time the output so far contains `answers[i].first`, writes `answers[i].second` to
/// the terminal, in order. Output arrives in `out` (the terminal merges the streams).
/// `poll`, if given, is called every ~20 ms while it runs, with its pid; what it returns is
/// written to the terminal (e.g. "\x03", the interrupt character: the terminal then sends
/// SIGINT to its foreground process group). `columns` > 0: the terminal's width (else the
/// pseudo-terminal's default, 0).
command_result run_on_terminal(const std::vector<std::string>& argv,
                               const std::vector<std::pair<std::string, std::string>>& answers,
                               std::chrono::milliseconds bound = std::chrono::milliseconds(60000),
                               const std::function<std::string(pid_t)>& poll = {}, int columns = 0);

/// agentctl with these arguments.
command_result agentctl(const std::vector<std::string>& args, const command_options& options = {});

/// Options whose agentctl, in a test built with AddressSanitizer, runs without ASan's
/// quarantine of freed blocks (up to 256 MiB, not a leak): its peak RSS then counts what it
/// holds, as in a normal build. Elsewhere plain options.
command_options without_asan_quarantine();

/// A fresh temporary folder, removed with its contents on destruction.
class temp_dir {
public:
    temp_dir();
    ~temp_dir();
    const std::string& path() const { return path_; }
    std::string write(const std::string& name, const std::string& content) const;

private:
    std::string path_;
};

/// Pids of live processes whose command line contains `needle` (the test's nonce).
std::vector<pid_t> processes_with(const std::string& needle);

/// SIGKILL to the parent (an allocation's worker, say) of the first process whose command
/// line contains `needle`; false while there is none yet, or its parent is init.
bool kill_parent_of(const std::string& needle);

/// A whole file's bytes ("" when it cannot be read).
std::string read_file(const std::string& path);

/// `text` parsed as JSON; the test stops (BOOST_REQUIRE) when it is not.
boost::json::value parse_json(const std::string& text);

/// The watchdog of agentctl `owner`: the process named agentctl-watchdog holding a pidfd of
/// it; -1 if none.
pid_t watchdog_of(pid_t owner);

/// Waits up to `bound` for `count` processes tagged `nonce`.
bool wait_for_processes(const std::string& nonce, std::size_t count, std::chrono::seconds bound);

/// A random token to tag the processes of one test.
std::string make_nonce();

/// Whether agentctl contains host tasks in cgroups here (a writable cgroup v2 tree), as the
/// run result's `containment` of a trivial task says; asked once. The cases that rely on
/// cgroups take it as a precondition (tests/support/skips.hpp), so that a host without them
/// skips them with the reason, and fails under CI=true.
bool agentctl_uses_cgroups();

/// Replaces values that change from run to run (runId, durations, usage, pids) so that
/// JSON output can be compared with a golden file.
std::string normalise_run_json(const std::string& json);

/// normalise_run_json(), plus: the values of `keys` become "<key>", and in every string each
/// `replace` pair's first text (a temporary folder, the probe's path) becomes its second.
std::string normalise_json(const std::string& json, const std::vector<std::string>& keys,
                           const std::vector<std::pair<std::string, std::string>>& replace);

/// The first child id in `text` (JSON or human output) whose position is `short_id`: `gz--0003`
/// finds `gz--0003-<12 hex digits>` (children carry their bindings' digest, docs/DESIGN.md,
/// "Plan"). `short_id` itself when there is none.
std::string child_id_in(const std::string& text, const std::string& short_id);

/// Compares `actual` with the file `golden` under data_dir()/golden; with
/// AGENTCTL_UPDATE_GOLDEN=1 rewrites the file instead.
void check_golden(const std::string& golden, const std::string& actual);

}  // namespace cli_test
