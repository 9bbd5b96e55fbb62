// The CLI: argv -> library call -> print -> exit code. One file per command.
#pragma once

#include <agentctl/backend.hpp>
#include <agentctl/diagnostic.hpp>
#include <agentctl/error.hpp>
#include <agentctl/journal_run.hpp>
#include <agentctl/json.hpp>
#include <agentctl/session.hpp>
#include <agentctl/watchdog.hpp>

#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {
enum class stream_form;  // <agentctl/wire.hpp>
}

namespace agentctl::cli {

enum class output_format { human, json, jsonl };
enum class color_mode { automatic, always, never };

/// Everything the command line said.
struct command_line {
    std::string command;  ///< check | plan | run | resume | runs | doctor | version
    std::string file;
    output_format output = output_format::human;
    color_mode color = color_mode::automatic;
    bool quiet = false;
    bool verbose = false;
    std::vector<std::string> inputs;         ///< --input K=V, in order
    std::optional<std::string> inputs_file;  ///< --inputs-file
    std::vector<items_source> items;         ///< --items NAME=FILE, in order
    std::vector<std::string> vars;           ///< --var KEY=JSON, in order
    std::vector<std::string> vars_files;     ///< --vars-file FILE, in order
    bool null_separated = false;             ///< --null
    std::optional<int> jobs;
    std::optional<std::string> workspace;
    std::optional<double> timeout_seconds;       ///< --timeout-seconds: the whole run's
    std::optional<double> task_timeout_seconds;  ///< --timeout: every task's
    std::optional<int> task_attempts;            ///< --retries: every task's attempts in all
    bool interactive = false;
    bool keep_going = false;
    bool check = false;                          ///< run --check: a preview, nothing with an effect runs
    bool diff = false;                           ///< run --diff: builtin.write results carry their diff
    bool show_output = false;                    ///< --show-output (also set by --tag)
    bool tag = false;                            ///< --tag
    backend_kind backend = backend_kind::local;  ///< --backend
    slurm_options slurm;                         ///< --slurm-*
    std::vector<std::string> argv;               ///< agentctl's own, as given (recorded in the journal)
    // The journal, `runs` and `resume` (journal_cli.hpp).
    std::optional<std::string> db;     ///< --db PATH
    bool no_journal = false;           ///< --no-journal
    std::string run_id;                ///< resume RUN_ID, runs show RUN_ID
    bool last = false;                 ///< resume --last, runs show --last: the newest run
    bool failed_only = false;          ///< runs show --failed
    std::string runs_action;           ///< runs: list | show | gc
    std::optional<std::size_t> limit;  ///< runs list --limit
    std::optional<std::size_t> keep;   ///< runs gc --keep
    std::optional<std::string> task;   ///< runs show --task
    bool show_stdout = false;          ///< runs show --stdout
    bool show_stderr = false;          ///< runs show --stderr
    std::optional<std::uint32_t> attempt;  ///< runs show --task ID --attempt N
    bool retry_failed = false;         ///< resume --retry-failed
    bool rerun_uncertain = false;      ///< resume --rerun-uncertain
    bool dry_run = false;              ///< resume --dry-run
    bool compensate_plan = false;      ///< compensate --plan
    /// The new run's id when it must be known before it starts (a compensation run's, a run
    /// that compensates itself when it fails); empty: the engine makes one.
    std::string new_run_id;

    /// The commands whose processes must die with agentctl: main() starts the watchdog for
    /// them first, while agentctl has one thread (docs/CRASH_SAFETY.md).
    bool wants_watchdog() const {
        return command == "run" || (command == "resume" && !dry_run) ||
               (command == "compensate" && !compensate_plan);
    }

    session_request request() const {
        session_request r;
        r.file = file;
        r.inputs = inputs;
        r.inputs_file = inputs_file;
        r.workspace = workspace;
        r.items = items;
        r.separator = null_separated ? item_separator::nul : item_separator::line;
        r.vars = vars;
        r.vars_files = vars_files;
        r.task_timeout_seconds = task_timeout_seconds;
        r.task_attempts = task_attempts;
        return r;
    }
};

/// How reports write captured streams: `--output json` puts a stream that is not text in
/// base64; jsonl (and its final envelope) keeps them as JSON text (docs/CLI.md).
stream_form streams_for(const command_line& cl);

/// The command line as read, before a command looks at it: every option given (by its long
/// name) with its values in order (none for a switch), and the operands after the command.
struct arguments {
    std::map<std::string, std::vector<std::string>, std::less<>> given;
    std::vector<std::string> operands;

    bool has(std::string_view option) const { return given.find(option) != given.end(); }
    /// The option's value (the last one given), or "".
    std::string value(std::string_view option) const;
    /// Every value of a repeatable option, in order.
    std::vector<std::string> values(std::string_view option) const;
};

/// The whole text as a number, or nothing ("4x" is not 4).
template <typename T>
std::optional<T> number_of(const std::string& text) {
    T value{};
    const char* end = text.data() + text.size();
    auto [at, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || at != end || text.empty()) return std::nullopt;
    return value;
}

/// A command's parse: reads what `a` says into `cl`. A status when the command line is
/// refused (the usage error is printed), nothing when the command may run.
using parse_fn = std::optional<int> (*)(command_line& cl, const arguments& a);

/// The usage error on stderr (exit 2), pointing at the command's help.
int usage_error(const command_line& cl, const std::string& message);

/// What several commands parse alike: the workflow FILE and its inputs (check, plan, run,
/// doctor), --backend and --slurm-*, --jobs, --db and --no-journal.
std::optional<int> parse_workflow_file(command_line& cl, const arguments& a);
std::optional<int> parse_backend(command_line& cl, const arguments& a);
std::optional<int> parse_jobs(command_line& cl, const arguments& a);
std::optional<int> parse_journal_db(command_line& cl, const arguments& a);
/// --timeout S and --retries N: every task's, over the workflow's (plan, run).
std::optional<int> parse_task_limits(command_line& cl, const arguments& a);

/// Each command's parse, beside its run_*() (cmd_*.cpp).
std::optional<int> parse_check(command_line& cl, const arguments& a);
std::optional<int> parse_plan(command_line& cl, const arguments& a);
std::optional<int> parse_version(command_line& cl, const arguments& a);
std::optional<int> parse_run(command_line& cl, const arguments& a);
std::optional<int> parse_doctor(command_line& cl, const arguments& a);
std::optional<int> parse_runs(command_line& cl, const arguments& a);
std::optional<int> parse_resume(command_line& cl, const arguments& a);
std::optional<int> parse_compensate(command_line& cl, const arguments& a);

/// The process exit status of `s`.
inline int status(exit_status s) {
    return static_cast<int>(s);
}

/// Writes to a file descriptor (stdout or stderr).
class fd_sink final : public json_sink {
public:
    explicit fd_sink(int fd) : fd_(fd) {}
    void write(std::string_view bytes) override;

private:
    int fd_;
};

/// Where the CLI's own stdout and stderr go: straight to the descriptors, or, while a run
/// goes, through output queues (output_queue.hpp) so that printing never blocks the loop.
json_sink& standard_output();
json_sink& standard_error();
/// nullptr: back to the descriptors.
void redirect_standard_streams(json_sink* out, json_sink* err);

/// Human output helpers.
bool use_color(const command_line& cl, int fd);
std::string paint(bool color, const char* sgr, std::string_view text);
void print_diagnostics_human(const command_line& cl, const diagnostics& diags);
/// What the sweep of dead runs' leftovers removed (human output; JSON carries it itself).
/// Under -q only what `known` (the journal's dead runs' owners) left: what runs of other
/// journals, or of none, left is still removed, but said only without -q.
void print_leftovers_human(const command_line& cl, const sweep_report& r,
                           const std::vector<journal_owner>* known = nullptr);

/// The absolute workspace root of `p` when the base folder is `base_dir` (policy.workspaceRoot
/// as written when absolute, else beneath `base_dir`), normalised lexically.
std::string workspace_root_path(const plan& p, const std::string& base_dir);

/// The success envelope on stdout.
void print_success(std::string_view kind, const std::function<void(json_writer&)>& write_data,
                   const diagnostics& diags);

/// A failure: human text or the JSON `Error` envelope on stderr. Returns `s` as a status.
int print_failure(const command_line& cl, std::string_view message, exit_status s,
                  const diagnostics& diags = {});

/// open_session() for the command line; prints the diagnostics and the failure when the
/// workflow does not compile (then `ok()` is false and `status` says how to exit).
session open_and_report(const command_line& cl);

/// When a host action's bare command is missing from PATH (missing_commands()): the failure,
/// printed before anything is recorded (exit 4); nothing when every command resolves.
std::optional<int> refuse_missing_commands(const command_line& cl, const plan& p,
                                           const std::string& base_dir);

/// The watchdog (docs/CRASH_SAFETY.md), started while agentctl has one thread; a warning when
/// it cannot start.
std::optional<watchdog> start_watchdog(const command_line& cl);

/// Each command. `watch`: the watchdog main() started for a command that wants_watchdog()
/// (nullptr when it could not start, and for the others).
int run_check(const command_line& cl, watchdog* watch);
int run_plan(const command_line& cl, watchdog* watch);
int run_version(const command_line& cl, watchdog* watch);
int run_run(const command_line& cl, watchdog* watch);
int run_doctor(const command_line& cl, watchdog* watch);
int run_runs(const command_line& cl, watchdog* watch);
int run_resume(const command_line& cl, watchdog* watch);
int run_compensate(const command_line& cl, watchdog* watch);
/// `agentctl parallel ARGS` (cmd_parallel.cpp): parses GNU parallel's command line itself.
/// `argv`: agentctl's whole command line, for the journal. Returns parallel's exit status.
int run_parallel(const std::vector<std::string>& args, std::vector<std::string> argv);
/// `agentctl worker` (cmd_worker.cpp): the allocation worker; its exit status is serve_worker()'s.
int run_worker(const std::vector<std::string>& args);
/// `agentctl parallel --help`, and each of its option names with its value's placeholder
/// ("" for a switch), for the completion scripts.
std::string parallel_help();
std::vector<std::pair<std::string, std::string>> parallel_option_words();

}  // namespace agentctl::cli
