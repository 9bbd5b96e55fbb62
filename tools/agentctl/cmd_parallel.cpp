// agentctl parallel [OPTIONS] COMMAND [ARGS...] [::: ARGS...] [:::: FILES...]: GNU parallel's
// command line, translated into a workflow (include/agentctl/parallel.hpp) and run as any
// run is: journaled, contained, resumable (docs/PARALLEL.md).
#include "cli.hpp"
#include "journal_cli.hpp"
#include "output_queue.hpp"
#include "parallel_display.hpp"

#include <agentctl/doctor.hpp>
#include <agentctl/parallel.hpp>

#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

extern char** environ;

namespace agentctl::cli {

namespace {

/// One option of `agentctl parallel`.
struct parallel_option {
    std::vector<std::string_view> names;  ///< the first one is how it is known
    std::string_view value;               ///< the value's placeholder; empty for a switch
    std::string_view help;                ///< empty: accepted, not listed
};

/// A GNU parallel option agentctl parallel does not take, and what to do instead.
struct refused_option {
    std::vector<std::string_view> names;
    bool takes_value;
    std::string_view why;
};

const std::vector<parallel_option>& parallel_options() {
    static const std::vector<parallel_option> table = {
        {{"-j", "--jobs", "-P", "--max-procs"},
         "N",
         "jobs at once: N, N% of the cores, +N, -N, 0 (all); default 100%"},
        {{"-k", "--keep-order"}, "", "print each job's output in input order, not as jobs end"},
        {{"--tag"}, "", "put the job's arguments and a tab before each line it prints"},
        {{"--tagstring", "--tag-string"},
         "STR",
         "put STR (with replacement strings) and a tab before each line"},
        {{"--group"}, "", "print each job's output whole when it ends (the default)"},
        {{"--line-buffer", "--lb"},
         "",
         "accepted: each job's output is printed whole when it ends, as --group"},
        {{"-u", "--ungroup"},
         "",
         "each job writes straight to agentctl's stdout and stderr (may interleave; not captured)"},
        {{"--results", "--res", "--result"},
         "DIR",
         "write each job's seq, stdout and stderr under DIR; print none"},
        {{"--joblog", "--jl"},
         "FILE",
         "one tab-separated line per job, as parallel writes it (+FILE appends)"},
        {{"--resume"},
         "",
         "with --joblog: run only the jobs it does not list; with --results: those without output there"},
        {{"--resume-failed"}, "", "with --joblog: run only the jobs it does not list as succeeded"},
        {{"--retries"}, "N", "run a job that fails up to N times in all"},
        {{"--timeout"},
         "SECS",
         "kill a job after SECS seconds (decimals allowed; default a day); N%: after N% of the median "
         "runtime of the jobs that succeeded"},
        {{"--halt", "--halt-on-error"}, "WHEN,WHY=N", "stop early: now|soon,fail|success|done=N or N%"},
        {{"--dry-run", "--dryrun"},
         "",
         "print each job's command line and run nothing (-v: the environment too)"},
        {{"--bar"}, "", "show the progress line (on a terminal)"},
        {{"--eta"}, "", "show the progress line, with its ETA (on a terminal)"},
        {{"--progress"}, "", "show the progress line (on a terminal)"},
        {{"-q", "--quote"}, "", "each word of the command is one argument, whatever it holds"},
        {{"--shell"}, "", "run each command line through sh -c, as GNU parallel does (for > | ; $ ...)"},
        {{"--link", "--xapply"},
         "",
         "link the input sources value by value (the shorter ones start over), not crossed"},
        {{"-a", "--arg-file", "--argfile"},
         "FILE",
         "an input source: the lines of FILE (- is standard input)"},
        {{"-0", "--null"}, "", "input values end with a NUL byte, not a newline"},
        {{"-d", "--delimiter"}, "DELIM", "input values end with DELIM (\\n \\t \\0 \\xHH allowed)"},
        {{"-C", "--colsep"}, "REGEX", "split each input value into columns: {1} {2} ..."},
        {{"--header"}, ":", "the first value of each input source is its name: {name}"},
        {{"-v", "--verbose"}, "", "print each job's command line before its output"},
        {{"--env"}, "NAME", "pass NAME to every job too (PATH HOME LANG LC_* TMPDIR TERM always are)"},
        {{"--print-workflow"}, "", "print the equivalent workflow (YAML) and run nothing"},
        {{"--container"}, "IMAGE", "run each job in a container of IMAGE (pinned by digest, already here)"},
        {{"--backend"}, "local|slurm", "where jobs run (default local; slurm: on a Slurm cluster)"},
        {{"--slurm-dispatch"},
         "auto|worker|job",
         "with --backend slurm: a worker per node of the allocation, or a Slurm job each (default auto)"},
        {{"--slurm-partition"}, "P", "with --backend slurm: the partition"},
        {{"--slurm-account"}, "A", "with --backend slurm: the account to charge"},
        {{"--slurm-qos"}, "Q", "with --backend slurm: the quality of service"},
        {{"--slurm-cpus-per-task"}, "N", "with --backend slurm: CPUs of each job"},
        {{"--slurm-mem"}, "MIB", "with --backend slurm: memory of each job, in MiB"},
        {{"--slurm-nodes"},
         "N",
         "with --backend slurm outside an allocation: ask for N whole nodes (salloc), run the jobs on "
         "their workers, release them at the end"},
        {{"--slurm-time"}, "T", "with --slurm-nodes: the allocation's time limit (Slurm's --time)"},
        {{"--db"}, "PATH", "the journal database (default: journal.db in agentctl's state folder)"},
        {{"--no-journal"}, "", "record nothing (no resume)"},
        {{"--color"}, "auto|always|never", "colour of agentctl's own messages on a terminal"},
        {{"--will-cite", "--citation"}, "", ""},
        {{"-h", "--help"}, "", "print this help"},
    };
    return table;
}

const std::vector<refused_option>& refused_options() {
    static const std::vector<refused_option> table = {
        {{"-S", "--sshlogin", "--slf", "--sshloginfile", "--onall", "--nonall", "--transfer",
          "--transferfile", "--tf", "--return", "--cleanup", "--trc", "--basefile", "--bf", "--workdir",
          "--wd", "--ssh", "--controlmaster", "-M"},
         true,
         "runs jobs on other machines over ssh: agentctl runs them here, or on a Slurm cluster with "
         "--backend slurm"},
        {{"--pipe", "--spreadstdin", "--pipepart", "--block", "--block-size", "--recstart", "--recend",
          "--cat", "--fifo", "--round-robin", "--roundrobin"},
         false,
         "feeds jobs through their stdin: agentctl gives every job /dev/null as stdin; split the input into "
         "files first (split -l N) and pass their names"},
        {{"-n", "-N", "--max-args", "-m", "-X", "--xargs", "-L", "--max-lines", "-l", "-s", "--max-chars"},
         true,
         "puts several values in one job: agentctl parallel takes one value of each input source per job; "
         "join values beforehand, or use --colsep"},
        {{"-I", "-i", "--replace", "--extensionreplace", "-U", "--basenamereplace", "--bnr",
          "--dirnamereplace", "--dnr", "--basenameextensionreplace", "--bner", "--seqreplace",
          "--slotreplace", "--rpl", "--plus"},
         true,
         "changes the replacement strings: agentctl parallel knows parallel's default ones ({} {.} {/} {//} "
         "{/.} {#} {%} {n} {name})"},
        {{"--semaphore", "--sem", "--fg", "--bg", "--id", "--semaphoretimeout", "--st", "--semaphorename"},
         true,
         "is GNU parallel's semaphore mode: run the jobs as one agentctl parallel command instead"},
        {{"--output", "--quiet"},
         true,
         "is agentctl run's: agentctl parallel prints as GNU parallel does; `agentctl runs show RUN "
         "--output json` is a run's machine-readable report"},
        {{"--sqlmaster", "--sqlworker", "--sqlandworker", "--sql"},
         true,
         "keeps jobs in SQL: agentctl keeps every run in its journal (agentctl runs)"},
        {{"--files", "--compress", "--compress-program", "--decompress-program", "--tmux", "--tmuxpane",
          "--latest-line", "--ll", "--output-as-files", "--outputasfiles", "--linebuffer", "--keeporder"},
         false,
         "is not supported: use --results DIR for output in files"},
        {{"--load",
          "--memfree",
          "--memsuspend",
          "--noswap",
          "--nice",
          "--delay",
          "--ssd",
          "--limit",
          "--shuf",
          "--termseq",
          "--trim",
          "--timeout-percent",
          "-r",
          "--no-run-if-empty",
          "-E",
          "--eof",
          "--ctag",
          "--ctagstring",
          "--tty",
          "-p",
          "--interactive",
          "--exit",
          "-x",
          "--max-replace-args",
          "--line-buffered",
          "--keep-order-ignore",
          "--jobs-file",
          "--retry-failed",
          "--joblog-append",
          "--eta-style",
          "--plain",
          "--profile",
          "-J",
          "--tollef",
          "--gnu",
          "--record-env",
          "--env-file",
          "--shellquote",
          "--quote-all",
          "--csv",
          "--json",
          "--sqlworker-lines",
          "--skip-first-line",
          "--resume-from",
          "--sshdelay",
          "--workdir-from",
          "--group-by",
          "--shard",
          "--bin",
          "--tee",
          "--fast",
          "--filter",
          "--filter-hosts",
          "--number-of-cpus",
          "--number-of-sockets",
          "--number-of-cores",
          "--number-of-threads",
          "--embed",
          "--parens",
          "--colour-failed",
          "--color-failed",
          "--cf",
          "--ctrl-c",
          "--unsafe",
          "--max-line-length-allowed",
          "--minversion",
          "--show-limits",
          "--version",
          "-V"},
         false,
         "is a GNU parallel option agentctl parallel does not support (agentctl-parallel(1) lists what it "
         "does)"},
    };
    return table;
}

std::optional<std::string_view> refusal_of(std::string_view name, bool& takes_value) {
    for (const auto& r : refused_options())
        if (std::find(r.names.begin(), r.names.end(), name) != r.names.end()) {
            takes_value = r.takes_value;
            return r.why;
        }
    return std::nullopt;
}

const parallel_option* option_named(std::string_view name) {
    for (const auto& o : parallel_options())
        if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return &o;
    return nullptr;
}

/// Everything `agentctl parallel`'s command line said.
struct parallel_command {
    parallel_request request;
    command_line cl;  ///< agentctl's part: journal, backend, colour, verbosity, argv
    bool keep_order = false, dry_run = false, print_workflow = false, progress = false, help = false;
    bool tag = false, slurm_given = false;
    std::optional<std::string> joblog;
    bool joblog_append = false;
    parallel_halt halt;
    std::string halt_text;
    std::optional<double> timeout_percent;  ///< `--timeout N%`
};

bool is_marker(std::string_view a) {
    return a == ":::" || a == ":::+" || a == "::::" || a == "::::+";
}

// Applies one option; an error message, or "".
std::string apply(parallel_command& pc, const parallel_option& o, const std::string& value) {
    const std::string_view name = o.names.front();
    parallel_request& r = pc.request;
    command_line& cl = pc.cl;
    std::string error;
    if (name == "-j")
        r.jobs = value;
    else if (name == "-k")
        pc.keep_order = true;
    else if (name == "--tag")
        pc.tag = true;
    else if (name == "--tagstring")
        r.tagstring = value;
    else if (name == "--results")
        r.results = value;
    else if (name == "-u")
        r.ungroup = true;
    else if (name == "--group")
        r.ungroup = false;  // the last of -u and --group counts
    else if (name == "--joblog") {
        pc.joblog_append = !value.empty() && value.front() == '+';
        pc.joblog = pc.joblog_append ? value.substr(1) : value;
        if (pc.joblog->empty()) return "--joblog needs a file name";
    } else if (name == "--resume")
        r.resume = true;
    else if (name == "--resume-failed")
        r.resume_failed = true;
    else if (name == "--retries") {
        char* end = nullptr;
        long n = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end || n < 0 || n > 20)
            return "--retries " + value + ": not a number from 0 to 20";
        r.retries = static_cast<int>(n);
    } else if (name == "--timeout") {
        char* end = nullptr;
        if (!value.empty() && value.back() == '%') {
            // N% of the median runtime of the jobs that succeeded (parallel_display.cpp).
            const std::string number = value.substr(0, value.size() - 1);
            double percent = std::strtod(number.c_str(), &end);
            if (number.empty() || *end || !(percent > 0 && percent <= 1e6))
                return "--timeout " + value + ": not a percentage of the median runtime above 0%";
            pc.timeout_percent = percent;
            r.timeout_seconds.reset();
            return "";
        }
        double s = std::strtod(value.c_str(), &end);
        if (value.empty() || *end || !(s >= 0.001 && s <= 86400))
            return "--timeout " + value + ": not a number of seconds from 0.001 to 86400";
        r.timeout_seconds = s;
        pc.timeout_percent.reset();
    } else if (name == "--halt") {
        auto h = parse_parallel_halt(value, error);
        if (!h) return error;
        pc.halt = *h;
        pc.halt_text = value;
    } else if (name == "--dry-run")
        pc.dry_run = true;
    else if (name == "--bar" || name == "--eta" || name == "--progress")
        pc.progress = true;
    else if (name == "-q")
        r.quote = true;
    else if (name == "--shell")
        r.shell = true;
    else if (name == "--link")
        r.link = true;
    else if (name == "-a")
        r.sources.push_back({parallel_source::kind_t::file, {}, value, false});
    else if (name == "-0")
        r.separator = parallel_request::separator_t::nul;
    else if (name == "-d") {
        auto d = parse_parallel_delimiter(value, error);
        if (!d) return error;
        r.separator = parallel_request::separator_t::delimiter;
        r.delimiter = *d;
    } else if (name == "-C")
        r.colsep = value;
    else if (name == "--header") {
        if (value != ":" && value != ".*\\n" && value != "1")
            return "--header " + value +
                   ": only --header : (the first value of each input source) is supported";
        r.header = true;
    } else if (name == "-v")
        cl.verbose = true;
    else if (name == "--env") {
        if (value == "_")
            return "--env _ (the names in ~/.parallel/ignored_vars) is not supported: name each variable";
        r.env.push_back(value);
    } else if (name == "--print-workflow")
        pc.print_workflow = true;
    else if (name == "--container")
        r.container_image = value;
    else if (name == "--backend") {
        auto b = backend_from_string(value);
        if (!b) return "--backend must be local or slurm, not \"" + value + "\"";
        cl.backend = *b;
    } else if (name.substr(0, 8) == "--slurm-") {
        std::string why = set_slurm_option(cl.slurm, name.substr(8), value);
        if (!why.empty()) return why;
        pc.slurm_given = true;  // checked against --backend once every option is read
    } else if (name == "--db") {
        if (value.empty()) return "--db needs a path";
        cl.db = value;
    } else if (name == "--no-journal")
        cl.no_journal = true;
    else if (name == "--color") {
        if (value == "auto")
            cl.color = color_mode::automatic;
        else if (value == "always")
            cl.color = color_mode::always;
        else if (value == "never")
            cl.color = color_mode::never;
        else
            return "--color must be auto, always or never, not \"" + value + "\"";
    } else if (name == "-h")
        pc.help = true;
    return "";
}

// GNU parallel's grammar: options (bundled short ones, --name=value), then the command's
// words, then input sources after `:::`, `::::` and their linked forms `:::+`, `::::+`.
std::string parse(const std::vector<std::string>& args, parallel_command& pc) {
    std::size_t i = 0;
    auto value_of = [&](std::string_view name, std::string inline_value, bool has_inline, std::string& into) {
        if (has_inline) {
            into = std::move(inline_value);
            return std::string();
        }
        if (i + 1 >= args.size()) return std::string(name) + " needs a value";
        into = args[++i];
        return std::string();
    };
    auto one = [&](std::string_view name, std::string inline_value, bool has_inline) -> std::string {
        bool refused_takes_value = false;
        if (auto why = refusal_of(name, refused_takes_value))
            return std::string(name) + " " + std::string(*why);
        const parallel_option* o = option_named(name);
        if (!o) return "unknown option " + std::string(name);
        std::string value;
        if (!o->value.empty()) {
            auto e = value_of(name, std::move(inline_value), has_inline, value);
            if (!e.empty()) return e;
        } else if (has_inline) {
            return std::string(name) + " takes no value";
        }
        return apply(pc, *o, value);
    };
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (is_marker(a)) break;
        if (a == "--") {
            ++i;
            break;
        }
        if (a.size() < 2 || a[0] != '-') break;
        if (a[1] == '-') {
            auto eq = a.find('=');
            auto e = one(std::string_view(a).substr(0, eq), eq == std::string::npos ? "" : a.substr(eq + 1),
                         eq != std::string::npos);
            if (!e.empty()) return e;
            continue;
        }
        // -kj4: switches, then one option whose value is the rest (or the next word).
        for (std::size_t c = 1; c < a.size(); ++c) {
            std::string name = std::string("-") + a[c];
            const parallel_option* o = option_named(name);
            bool refused_takes_value = false;
            bool takes_value =
                o ? !o->value.empty() : (refusal_of(name, refused_takes_value), refused_takes_value);
            bool rest = takes_value && c + 1 < a.size();
            auto e = one(name, rest ? a.substr(c + 1) : "", rest);
            if (!e.empty()) return e;
            if (takes_value) break;
        }
    }
    for (; i < args.size() && !is_marker(args[i]); ++i) pc.request.command.push_back(args[i]);
    while (i < args.size()) {
        const std::string marker = args[i++];
        const bool files = marker.size() >= 4 && marker.compare(0, 4, "::::") == 0;
        const bool linked = marker.back() == '+';
        if (!files) {
            parallel_source s{parallel_source::kind_t::arguments, {}, "", linked};
            for (; i < args.size() && !is_marker(args[i]); ++i) s.arguments.push_back(args[i]);
            pc.request.sources.push_back(std::move(s));
            continue;
        }
        std::size_t before = pc.request.sources.size();
        for (; i < args.size() && !is_marker(args[i]); ++i)
            pc.request.sources.push_back({parallel_source::kind_t::file, {}, args[i], linked});
        if (pc.request.sources.size() == before) return marker + " needs a file name";
    }
    if (pc.tag && !pc.request.tagstring) pc.request.tagstring = "{}";
    if (pc.slurm_given && pc.cl.backend != backend_kind::slurm)
        return "--slurm-* options need --backend slurm";
    // As for run: --slurm-time without --slurm-nodes, --slurm-nodes with --slurm-dispatch job.
    if (std::string why = slurm_options_error(pc.cl.slurm); !why.empty()) return why;
    if (pc.request.ungroup && pc.cl.backend == backend_kind::slurm)
        return "-u is not available with --backend slurm: a job's output reaches agentctl through Slurm, not "
               "agentctl's own stdout (leave out -u)";
    if (pc.request.command.empty() && !pc.request.shell && !pc.help)
        return "no command: each input line is then a command line, which needs a shell: add --shell "
               "(agentctl parallel --shell < jobs.txt)";
    if ((pc.request.resume || pc.request.resume_failed) && !pc.joblog && !pc.request.results)
        return "--resume and --resume-failed need --joblog FILE or --results DIR";
    if (pc.cl.db && pc.cl.no_journal) return "--db and --no-journal exclude each other";
    return "";
}

std::string help_text() {
    std::string text =
        "usage: agentctl parallel [OPTIONS] COMMAND [ARGS...] [::: VALUES...] [:::: FILES...]\n"
        "       agentctl parallel --shell [OPTIONS] < jobs.txt\n\n"
        "Run COMMAND once for each input value (or each combination of values of several input\n"
        "sources), as GNU parallel does, as an agentctl run: journaled (agentctl runs, resume),\n"
        "contained and bounded. Replacement strings: {} {.} {/} {//} {/.} {#} {%} {n} {n.} ...\n"
        "{name} with --header :. Without one, {} is added at the end. Without --shell the\n"
        "command runs without a shell; exit status: the number of failed jobs (101: more than\n"
        "100), 255 for other errors. See agentctl-parallel(1).\n\n"
        "input sources (after the command):\n"
        "  ::: VALUES...                  values from the command line\n"
        "  :::: FILES...                  values from files, one per line (- is standard input)\n"
        "  :::+ / ::::+                   linked to the source before: value by value, not "
        "crossed\n\noptions:\n";
    for (const auto& o : parallel_options()) {
        if (o.help.empty()) continue;
        std::string left;
        for (auto n : o.names) left += (left.empty() ? "" : ", ") + std::string(n);
        if (!o.value.empty()) left += " " + std::string(o.value);
        if (left.size() < 30) left.resize(30, ' ');
        text += "  " + left + " " + std::string(o.help) + "\n";
    }
    return text;
}

int parallel_failure(const command_line& cl, const std::string& message) {
    print_failure(cl, message, exit_status::usage);
    return 255;
}

// The whole of a file, or of standard input ("-").
std::optional<std::string> read_all(const std::string& path, std::string& error) {
    if (path == "-") {
        std::string data;
        char buf[65536];
        for (;;) {
            ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
            if (n > 0) {
                data.append(buf, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                error = "cannot read standard input";
                return std::nullopt;
            }
            return data;
        }
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = "cannot open input file " + path;
        return std::nullopt;
    }
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> environment_names() {
    std::vector<std::string> names;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        names.emplace_back(kv.substr(0, kv.find('=')));
    }
    return names;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parallel_option_words() {
    std::vector<std::pair<std::string, std::string>> words;
    for (const auto& o : parallel_options())
        for (auto n : o.names) words.emplace_back(n, o.value);
    return words;
}

std::string parallel_help() {
    return help_text();
}

int run_parallel(const std::vector<std::string>& args, std::vector<std::string> argv) {
    parallel_command pc;
    pc.cl.command = "parallel";
    pc.cl.argv = std::move(argv);
    if (std::string e = parse(args, pc); !e.empty())
        return parallel_failure(pc.cl, e + " (see `agentctl parallel --help`)");
    command_line& cl = pc.cl;
    if (pc.help) {
        standard_output().write(help_text());
        return 0;
    }

    // The input sources, the joblog and the machine's facts, read here: the translation is pure.
    parallel_context context;
    std::vector<parallel_source> sources = pc.request.sources;
    if (sources.empty()) sources.push_back({parallel_source::kind_t::file, {}, "-", false});
    if (std::count_if(sources.begin(), sources.end(), [](const parallel_source& s) {
            return s.kind == parallel_source::kind_t::file && s.file == "-";
        }) > 1)
        return parallel_failure(cl, "standard input (-) can be read by one input source only");
    for (const auto& s : sources) {
        if (s.kind == parallel_source::kind_t::arguments) {
            context.values.push_back(s.arguments);
            continue;
        }
        if (s.file == "-" && ::isatty(STDIN_FILENO))
            standard_error().write(
                "agentctl: reading the input values from the terminal: end them with Ctrl-D\n");
        std::string error;
        auto data = read_all(s.file, error);
        if (!data) return parallel_failure(cl, error);
        context.values.push_back(split_parallel_input(*data, pc.request));
    }
    std::error_code ec;
    context.working_directory = std::filesystem::current_path(ec).string();
    if (ec) return parallel_failure(cl, "cannot read the current folder: " + ec.message());
    context.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    context.environment_names = environment_names();
    if (pc.joblog && (pc.request.resume || pc.request.resume_failed)) {
        std::ifstream in(*pc.joblog, std::ios::binary);
        if (in) context.joblog = std::string(std::istreambuf_iterator<char>(in), {});
    }

    // --resume --results: a job whose folder has a stdout file ran (parallel's test).
    context.has_results = [](const std::string& folder) {
        std::error_code ignored;
        return std::filesystem::exists(folder + "/stdout", ignored);
    };
    parallel_translation t = translate_parallel(pc.request, context);
    if (!t.error.empty()) return parallel_failure(cl, t.error);
    if (pc.print_workflow) {
        standard_output().write(t.printed_workflow);
        if (pc.timeout_percent)
            standard_error().write(
                "agentctl: note: --timeout N% is decided while agentctl parallel runs: in this workflow "
                "each job may take a day\n");
        if (pc.request.ungroup)
            standard_error().write(
                "agentctl: note: -u is agentctl parallel's: agentctl run captures each task's output\n");
        if (t.printed_workflow.size() > limits::max_document_bytes)
            standard_error().write(
                "agentctl: warning: this workflow is larger than agentctl run reads (1 MiB): put its "
                "spec.inputs.jobs in a JSON file {\"jobs\": [...]} and give it with --inputs-file\n");
        return 0;
    }
    if (pc.dry_run) {
        if (cl.verbose) {
            std::string names;
            for (const auto& n : t.environment) names += " " + n;
            standard_error().write(
                "agentctl: every job's environment:" + (names.empty() ? " (empty)" : names) +
                " (docs/PARALLEL.md, \"Environment\")\n");
        }
        std::string out;
        for (std::size_t i = 0; i < t.jobs.size(); ++i) {
            // A slot is known when a job starts; a dry run shows the one it would have in turn.
            auto slot = static_cast<std::uint32_t>(i % static_cast<std::size_t>(t.jobs_at_once)) + 1;
            if (t.tag) out += t.tag->fill(t.jobs[i], slot) + "\t";
            out += t.line.fill(t.jobs[i], slot) + "\n";
        }
        standard_output().write(out);
        return 0;
    }

    // A workflow like any other from here on.
    session_request request;
    request.file = "agentctl parallel";
    request.source = t.workflow;
    request.inputs = {"jobs=" + t.jobs_input};
    request.workspace = context.working_directory;
    session s = open_session(request);
    if (!s.ok()) {
        print_diagnostics_human(cl, s.diags);
        return parallel_failure(cl, s.failure);
    }
    cl.file = request.file;
    auto base = resolve_base_dir(request);
    if (!base) return parallel_failure(cl, base.error().message);
    // A program that cannot start makes no run (as for `agentctl run`).
    if (auto missing = missing_commands(*s.compiled, process_environment().search_path, *base))
        return parallel_failure(cl, missing->message + "; nothing was run or recorded");

    // The watchdog while agentctl has one thread (the joblog's writer is one).
    std::optional<watchdog> watch = start_watchdog(cl);
    // The joblog opened before anything runs: a file that cannot be written runs nothing.
    std::optional<output_queue> joblog;
    // `--joblog -`: on stdout, each line after its job's output, as parallel writes it.
    const bool joblog_on_stdout = pc.joblog && *pc.joblog == "-" && !pc.joblog_append;
    if (pc.joblog) {
        // As parallel's open_joblog(): +FILE appends and writes no header; --resume* appends to
        // a joblog that has a first line.
        bool append = pc.joblog_append || ((pc.request.resume || pc.request.resume_failed) &&
                                           context.joblog && !context.joblog->empty());
        if (joblog_on_stdout) {
            standard_output().write(parallel_joblog_header());
        } else {
            int fd = ::open(pc.joblog->c_str(),
                            O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0666);
            if (fd < 0) return parallel_failure(cl, "--joblog: cannot write " + *pc.joblog);
            joblog.emplace(fd);
            if (!append) joblog->write(parallel_joblog_header());
        }
    }

    std::optional<journal> db;
    if (!cl.no_journal) {
        int failed = 0;
        db = open_journal(cl, journal_access::write, failed);
        if (!db) return 255;
    }
    dead_run_sweep swept = sweep_dead_runs(db ? &*db : nullptr, false);
    if (swept.error) {
        print_journal_failure(cl, *swept.error);
        return 255;
    }
    journal_run record;
    if (db) record = run_record(cl, s, *base);
    diagnostics diags = s.diags;
    diags.append(swept.warnings);
    print_diagnostics_human(cl, swept.warnings);

    parallel_display_options o;
    o.keep_order = pc.keep_order;
    o.verbose = cl.verbose;
    o.print_output = !pc.request.results;
    o.pass_output = pc.request.ungroup;
    // The progress line when asked for, or when nothing else is printed (--results).
    o.progress = (pc.progress || pc.request.results) && ::isatty(STDERR_FILENO);
    o.halt = pc.halt;
    o.halt_text = pc.halt_text;
    o.timeout_percent = pc.timeout_percent;
    o.joblog_on_stdout = joblog_on_stdout;
    // The display lives on the run's loop, which execute_run() makes.
    run_frontend fe;
    fe.pass_output = pc.request.ungroup;
    std::optional<parallel_display> display;
    bool reported = false;
    fe.report = [&](const run_report& report, result_source* results) {
        reported = true;
        if (display) display->stop();
        std::string failure = write_parallel_results(t, *s.compiled, report, results);
        if (!failure.empty()) return parallel_failure(cl, failure);
        if (report.error) return parallel_failure(cl, report.error->message);
        // Cancelled by a signal (not by --halt): agentctl's 130, as for any run.
        if (report.state == run_state::cancelled && !(display && display->outcome().halted())) return 130;
        return display ? display->outcome().exit_status() : 0;
    };
    fe.prepare = [&](boost::asio::io_context& io) {
        display.emplace(io, cl, t, *s.compiled, o, joblog ? &*joblog : nullptr,
                        [&fe](const std::string& reason) { fe.cancel(reason); });
        fe.events = &*display;
        fe.gate = &*display;
        fe.expiry = display->expiry();
    };
    // The display's timers (the progress line, --timeout N%) end with the run.
    fe.ended = [&] {
        if (display) display->stop();
    };
    int status = execute_run(cl, watch ? &*watch : nullptr, *s.compiled, diags, *base, std::move(db),
                             std::move(swept), std::move(record), nullptr, &fe);
    if (joblog) joblog->drain();
    if (reported) return status;
    return status == 130 ? 130 : status == 0 ? 0 : 255;
}

}  // namespace agentctl::cli
