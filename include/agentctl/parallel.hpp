// GNU parallel's command line as an agentctl workflow (`agentctl parallel`).
//
// Pure, like the rest of the front end: the caller reads the input sources, the joblog and
// the few facts of the machine the translation needs, and passes them in as data. What comes
// out is a workflow document (YAML text: what runs is exactly what --print-workflow shows),
// the jobs in parallel's order, and what a front end needs to print and log them as GNU
// parallel does: each job's command line, tag and --results folder (docs/PARALLEL.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// GNU parallel's `--halt WHEN,WHY=N` (or N%).
struct parallel_halt {
    enum class when_t { never, soon, now };
    enum class why_t { fail, success, done };
    when_t when = when_t::never;
    why_t why = why_t::fail;
    double count = 0;  ///< jobs, or a percentage of all jobs when `percent`
    bool percent = false;
};

/// Parses a `--halt` value (`now,fail=1`, `soon,success=30%`, and the old forms 0, 1, 2, -1,
/// -2, 1-99%). Nothing, with `error` set, when it is not one.
std::optional<parallel_halt> parse_parallel_halt(std::string_view text, std::string& error);

/// `-j`: N, N% of the cores, +N and -N cores, 0 (as many as there are jobs). Nothing with
/// `error` when it is not a number of jobs. `cores` >= 1.
std::optional<int> parse_parallel_jobs(std::string_view text, int cores, std::size_t job_count,
                                       std::string& error);

/// `-d DELIM` with C escapes (\n \t \r \0 \\ \xHH \NNN octal) turned into bytes.
std::optional<std::string> parse_parallel_delimiter(std::string_view text, std::string& error);

/// One input source, in command-line order.
struct parallel_source {
    enum class kind_t {
        arguments,  ///< `::: A B C`
        file,       ///< `:::: FILE`, `-a FILE`; `-` is standard input
    };
    kind_t kind = kind_t::arguments;
    std::vector<std::string> arguments;  ///< `:::`
    std::string file;                    ///< `::::`, `-a`
    /// `:::+`, `::::+`: paired with the previous source value by value (the longer one's
    /// extra values dropped), not crossed with it.
    bool linked = false;
};

/// What `agentctl parallel` was asked: GNU parallel's options after its command line was parsed.
struct parallel_request {
    /// The command's words. Empty: each input value is a whole command line (needs `shell`).
    std::vector<std::string> command;
    std::vector<parallel_source> sources;  ///< none: standard input, as `:::: -`
    /// `--link`: every source linked value by value, the shorter ones starting over (not
    /// crossed; `:::+` instead drops the longer one's extra values).
    bool link = false;
    // How the values of a file are separated.
    enum class separator_t { line, nul, delimiter };
    separator_t separator = separator_t::line;
    std::string delimiter;              ///< separator_t::delimiter, as bytes
    std::optional<std::string> colsep;  ///< `--colsep REGEX`: each value split into columns
    bool header = false;                ///< `--header :`: each source's first value names it
    // How the command runs.
    bool shell = false;  ///< `--shell`: the line through `sh -c`, as parallel does; else argv, no shell
    bool quote = false;  ///< `-q`: each word of the command is one argument, quoted as a whole
    std::string jobs = "100%";                   ///< `-j` as given
    std::optional<double> timeout_seconds;       ///< `--timeout SECS`
    int retries = 0;                             ///< `--retries N`: attempts in all (0 and 1: once)
    std::vector<std::string> env;                ///< `--env NAME`, beyond the default names
    std::optional<std::string> container_image;  ///< `--container IMAGE`
    // What is printed and logged (the front end does it; these shape the jobs' strings).
    std::optional<std::string> tagstring;  ///< `--tagstring STR` (`--tag` is `{}`)
    std::optional<std::string> results;    ///< `--results DIR`
    /// `-u`: each job writes straight to agentctl's stdout and stderr, nothing is captured
    /// (the run's run_settings::pass_output; docs/PARALLEL.md, "Output"). Refused with
    /// `--results`, `--tag`, `--tagstring` and `--container`, which need the output in hand.
    bool ungroup = false;
    bool resume = false;                   ///< `--resume`: skip jobs the joblog lists
    bool resume_failed = false;            ///< `--resume-failed`: skip jobs the joblog lists as succeeded
};

/// Facts of the caller's machine and files, read by the caller.
struct parallel_context {
    /// The values of each source (`parallel_request::sources`, or standard input when there are
    /// none), split with split_parallel_input(); `:::` sources' values are their arguments.
    std::vector<std::vector<std::string>> values;
    int cores = 1;                               ///< for `-j N%` and the default (100%)
    std::string working_directory;               ///< absolute; the workspace, and `./cmd` resolved
    std::vector<std::string> environment_names;  ///< names set in agentctl's environment
    std::optional<std::string> joblog;           ///< an existing joblog's text (--resume*)
    /// `--resume` with `--results`: whether a job's --results folder holds its output already
    /// (then the job does not run again, as parallel's is_already_in_results()). The caller
    /// looks at the folder; unset: none does.
    std::function<bool(const std::string& folder)> has_results;
};

/// Splits the bytes of one input file into values: at `\n` (a `\r` is kept, as parallel keeps
/// it), at NUL, or at the delimiter. A last value without a separator counts.
std::vector<std::string> split_parallel_input(std::string_view data, const parallel_request& request);

/// The variables passed to every job by default (docs/PARALLEL.md, "Environment"), of those
/// set in `names`: PATH, HOME, LANG, LC_*, TMPDIR, TERM, in that order; then each `--env`
/// name that is set. Sorted names, no duplicates.
std::vector<std::string> parallel_environment(const std::vector<std::string>& names,
                                              const std::vector<std::string>& extra);

/// One job: its number and its arguments.
struct parallel_job {
    std::uint32_t seq = 0;          ///< `{#}`, 1-based, in input order (kept by --resume)
    std::vector<std::string> args;  ///< one per input source (per column with --colsep)
};

/// A command line or a tag with GNU parallel's replacement strings, ready to fill in per job.
struct parallel_template {
    /// Literal text, or one replacement string.
    struct piece {
        enum class kind_t { text, value, seq, slot };
        enum class transform_t { none, noext, basename, dirname, basename_noext };
        kind_t kind = kind_t::text;
        std::string text;  ///< kind text
        /// kind value: the 1-based position (`{2}`), negative from the end (`{-1}`), 0 for
        /// all of them separated by spaces (`{}`). A position the job lacks is empty.
        int position = 0;
        transform_t transform = transform_t::none;  ///< `{.}` `{/}` `{//}` `{/.}`
        bool quoted = false;  ///< inserted shell-quoted (parallel_shell_quote), as parallel does
    };
    /// Words separated by one space. With `quote_words` each word is filled in unquoted and then
    /// quoted as a whole (`-q`); otherwise the text is taken as it is.
    std::vector<std::vector<piece>> words;
    bool quote_words = false;

    /// The text for `job`, with `slot` for `{%}`.
    std::string fill(const parallel_job& job, std::uint32_t slot) const;
    bool uses(piece::kind_t kind) const;
};

/// The translation of one command line.
struct parallel_translation {
    /// Set when the command line cannot run; then nothing else is.
    std::string error;
    /// The workflow to run (YAML). Its one foreach task `job` runs one child per job, in order,
    /// over the input `jobs`, which it declares empty: `jobs_input` (JSON) is its value.
    std::string workflow;
    std::string jobs_input;
    /// The same workflow with the jobs written in it (--print-workflow): what `agentctl run`
    /// runs alike (when it is at most limits::max_document_bytes).
    std::string printed_workflow;
    std::vector<parallel_job> jobs;        ///< the jobs to run (without those --resume skips)
    std::size_t skipped = 0;               ///< jobs --resume or --resume-failed left out
    int jobs_at_once = 1;                  ///< `-j`, resolved
    std::vector<std::string> environment;  ///< the names passed to every job
    std::string program;                   ///< the one allowed program (`sh` with --shell)
    parallel_template line;  ///< the command line as parallel composes it (--dry-run, the joblog)
    std::optional<parallel_template> tag;  ///< --tag, --tagstring (without the tab)
    /// --results: the folder, and the name of each position (`1`, `2`, ... or --header's).
    std::optional<std::string> results;
    std::vector<std::string> position_names;

    bool uses_slot() const;
    /// Job `i`'s folder under --results (`DIR/1/VALUE/2/VALUE`), as parallel names it.
    std::string results_dir(std::size_t i) const;
    std::string results_dir_of(const parallel_job& job) const;
};

/// Translates `request` with its input `context`. Never throws; problems are in `error`
/// (a message naming the option or the input, and what to do instead).
parallel_translation translate_parallel(const parallel_request& request, const parallel_context& context);

// What a front end needs to run the jobs as GNU parallel does.

/// One finished job, as the halt rule and the exit status count it.
struct parallel_job_end {
    bool failed = false;  ///< a non-zero exit, a signal, a timeout, any failure to run
};

/// GNU parallel's --halt decisions and its exit status.
class parallel_outcome {
public:
    parallel_outcome(parallel_halt halt, std::size_t total_jobs) : halt_(halt), total_(total_jobs) {}

    /// What to do after a job ended: nothing, stop starting jobs (soon), or stop now.
    enum class action { none, soon, now };
    /// `exit_code`: the job's own (for fail=1, whose exit status is the job's), `signal` its
    /// signal if it died of one.
    action job_ended(bool failed, int exit_code, int signal);

    /// The exit status: 0, the failed jobs (up to 101), the halt's, as parallel computes it.
    int exit_status() const;
    std::size_t failed() const { return failed_; }
    bool halted() const { return halted_; }

private:
    parallel_halt halt_;
    std::size_t total_;
    std::size_t failed_ = 0, completed_ = 0;
    bool halted_ = false;
    std::optional<int> halt_status_;
};

/// The joblog's header line, with its newline.
std::string parallel_joblog_header();

/// One joblog line (with its newline): Seq, Host (`:`), Starttime (Unix seconds, 3 decimals),
/// JobRuntime (`%10.3f`), Send (0), Receive (stdout bytes), Exitval, Signal, Command (newlines
/// as NUL, as parallel writes them).
std::string parallel_joblog_line(std::uint32_t seq, double start_unix, double runtime_seconds,
                                 std::uint64_t received, int exit_value, int signal,
                                 std::string_view command);

/// The job numbers a joblog holds: every one (`failed_too`), or those that succeeded
/// (exit 0, no signal). Nothing, with `error`, when a line is not a joblog line.
std::optional<std::vector<std::uint32_t>> parallel_joblog_done(std::string_view joblog, bool succeeded_only,
                                                               std::string& error);

/// GNU parallel's quoting of one word for a Bourne shell: as it is when it holds only
/// [-_.+a-zA-Z0-9/], `''` when empty, else in single quotes.
std::string parallel_shell_quote(std::string_view word);

}  // namespace agentctl
