// `agentctl parallel` against GNU parallel: tasks from parallel_tutorial(7) and parallel(1)'s
// EXAMPLES, each run by both in the same folder and compared byte for byte (stdout, stderr
// where parallel's own, exit status, files written, --results trees, joblog columns), after
// sorting lines where parallel itself does not order them. GNU parallel is required (CI
// installs it: tools/bootstrap); then the agentctl-only behaviour: the journal, resume,
// --print-workflow, refusals.
#include "command.hpp"

#include "../support/skips.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace cli_test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string& gnu_parallel() {
    static const std::string path = [] {
        for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"})
            if (::access((std::string(dir) + "parallel").c_str(), X_OK) == 0)
                return std::string(dir) + "parallel";
        return std::string();
    }();
    return path;
}

bool have_gnu_parallel() {
    return !gnu_parallel().empty();
}

std::string sh_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

/// One folder where both run, each with its own copy of the input files.
struct sitting {
    temp_dir gnu_dir, our_dir, home;
    sitting() {
        // parallel asks to be cited once per user unless told it will be.
        fs::create_directories(home.path() + "/parallel");
        home.write("parallel/will-cite", "");
    }
    void write(const std::string& name, const std::string& content) const {
        gnu_dir.write(name, content);
        our_dir.write(name, content);
    }
    // `agentctl_only`: words only agentctl parallel takes (--shell); `input`: a file of the folder
    // as standard input.
    command_result gnu(const std::vector<std::string>& args, const std::string& input = "") const {
        return launch(gnu_parallel(), args, gnu_dir.path(), input,
                      {"PARALLEL_HOME=" + home.path() + "/parallel", "PARALLEL_SHELL=/bin/sh"});
    }
    command_result ours(const std::vector<std::string>& args,
                        const std::vector<std::string>& agentctl_only = {},
                        const std::string& input = "") const {
        std::vector<std::string> all = {"parallel"};
        all.insert(all.end(), agentctl_only.begin(), agentctl_only.end());
        all.insert(all.end(), args.begin(), args.end());
        return launch(agentctl_bin(), all, our_dir.path(), input,
                      {"AGENTCTL_STATE_DIR=" + home.path() + "/state"});
    }

private:
    static command_result launch(const std::string& program, const std::vector<std::string>& args,
                                 const std::string& dir, const std::string& input,
                                 std::vector<std::string> env) {
        std::string line = "exec " + sh_quote(program);
        for (const auto& a : args) line += " " + sh_quote(a);
        line += " < " + (input.empty() ? std::string("/dev/null") : sh_quote(input));
        command_options o;
        o.cwd = dir;
        o.env = std::move(env);
        o.bound = std::chrono::seconds(60);
        return run({"/bin/sh", "-c", line}, o);
    }
};

std::string sorted_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
}

// parallel's messages name it; agentctl's name agentctl. What other runs left on this host is
// not the job's.
std::string our_stderr(const std::string& text) {
    std::string out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        if (l.rfind("agentctl: removed what a dead run left", 0) == 0 ||
            l.rfind("agentctl: could not remove what a dead run left", 0) == 0 ||
            l.rfind("agentctl: cancelled what a dead run left", 0) == 0)
            continue;
        if (l.rfind("agentctl: ", 0) == 0) l = "parallel: " + l.substr(10);
        out += l + "\n";
    }
    return out;
}

std::string normalised_newline(const std::string& text) {
    return text.empty() || text.back() == '\n' ? text : text + "\n";
}

// Both runs print and exit alike; `sort`: the lines in any order (parallel's completion order).
void same_run(const command_result& gnu, const command_result& ours, bool sort = false,
              bool compare_stderr = true) {
    BOOST_TEST(ours.exit_code == gnu.exit_code, "exit: ours " << ours.exit_code << ", parallel's "
                                                              << gnu.exit_code
                                                              << "; our stderr: " << ours.err);
    if (sort)
        BOOST_TEST(sorted_lines(ours.out) == sorted_lines(gnu.out));
    else
        BOOST_TEST(ours.out == gnu.out);
    if (compare_stderr)
        BOOST_TEST(our_stderr(ours.err) == normalised_newline(sort ? sorted_lines(gnu.err) : gnu.err));
}

// Every file under `root`, with its contents: name -> bytes.
std::map<std::string, std::string> tree(const std::string& root) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file()) continue;
        std::ifstream in(e.path(), std::ios::binary);
        files[fs::relative(e.path(), root).string()] =
            std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return files;
}

std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A joblog without what differs from run to run (Starttime, JobRuntime); columns checked.
std::string joblog_columns(const std::string& log) {
    std::string out;
    std::istringstream in(log);
    for (std::string l; std::getline(in, l);) {
        std::vector<std::string> f;
        std::size_t at = 0;
        for (int i = 0; i < 8; ++i) {
            auto tab = l.find('\t', at);
            if (tab == std::string::npos) break;
            f.push_back(l.substr(at, tab - at));
            at = tab + 1;
        }
        BOOST_TEST_REQUIRE(f.size() == 8u, "a joblog line has 9 columns: " << l);
        if (f[0] != "Seq") {
            BOOST_TEST(f[2].find('.') == f[2].size() - 4, "Starttime with 3 decimals: " << f[2]);
            BOOST_TEST(f[3].size() == 10u, "JobRuntime is %10.3f: " << f[3]);
            f[2] = "START";
            f[3] = "RUNTIME";
        }
        for (const auto& x : f) out += x + "\t";
        out += l.substr(at) + "\n";
    }
    return out;
}

auto needs_parallel() {
    return boost::unit_test::precondition(
        test_support::needs("GNU parallel (tools/bootstrap installs it)", have_gnu_parallel));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parallel_cli)

// 1. parallel_tutorial, "Input sources": gzip every file of a list.
BOOST_AUTO_TEST_CASE(gzip_a_list, *needs_parallel()) {
    sitting s;
    s.write("list.txt", "a.txt\nb c.txt\n");
    s.write("a.txt", "alpha\n");
    s.write("b c.txt", "beta\n");
    same_run(s.gnu({"gzip", "-k", "::::", "list.txt"}), s.ours({"gzip", "-k", "::::", "list.txt"}));
    BOOST_TEST(tree(s.our_dir.path()) == tree(s.gnu_dir.path()));
    BOOST_TEST(fs::exists(s.our_dir.path() + "/b c.txt.gz"));
}

// 2. parallel(1) EXAMPLES, "Inserting multiple arguments": {.} in a redirection (--shell).
BOOST_AUTO_TEST_CASE(extension_replaced_in_a_redirection, *needs_parallel()) {
    sitting s;
    s.write("x.txt", "3\n1\n2\n");
    s.write("y z.txt", "b\na\n");
    std::vector<std::string> args = {"sort {} > {.}.sorted", ":::", "x.txt", "y z.txt"};
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
    BOOST_TEST(file_text(s.our_dir.path() + "/y z.sorted") == "a\nb\n");
    BOOST_TEST(tree(s.our_dir.path()) == tree(s.gnu_dir.path()));
}

// 3. parallel_tutorial, "Multiple input sources": :::: A :::: B, and linked with ::::+.
BOOST_AUTO_TEST_CASE(two_files_crossed_and_linked, *needs_parallel()) {
    sitting s;
    s.write("A", "a1\na2\n");
    s.write("B", "b1\nb2\nb3\n");
    same_run(s.gnu({"-k", "echo", "::::", "A", "::::", "B"}),
             s.ours({"-k", "echo", "::::", "A", "::::", "B"}));
    same_run(s.gnu({"-k", "echo", "{2}-{1}", "::::", "A", "::::+", "B"}),
             s.ours({"-k", "echo", "{2}-{1}", "::::", "A", "::::+", "B"}));
    same_run(s.gnu({"echo", "::::", "A", ":::", "x", "y"}), s.ours({"echo", "::::", "A", ":::", "x", "y"}),
             true);
}

// 4. parallel(1) EXAMPLES, "Working as cut | parallel": --colsep, and --header : naming the columns.
BOOST_AUTO_TEST_CASE(columns, *needs_parallel()) {
    sitting s;
    s.write("t.tsv", "name\tsize\nalpha\t1\nbeta gamma\t22\n");
    same_run(s.gnu({"-k", "--colsep", "\\t", "echo", "{2}", "{1}", "::::", "t.tsv"}),
             s.ours({"-k", "--colsep", "\\t", "echo", "{2}", "{1}", "::::", "t.tsv"}));
    same_run(s.gnu({"-k", "--header", ":", "--colsep", "\\t", "echo", "{size}:{name}", "::::", "t.tsv"}),
             s.ours({"-k", "--header", ":", "--colsep", "\\t", "echo", "{size}:{name}", "::::", "t.tsv"}));
}

// 5. parallel_tutorial, "Saving output into files": --results DIR, with and without --header.
BOOST_AUTO_TEST_CASE(results_layout, *needs_parallel()) {
    sitting s;
    std::vector<std::string> args = {"--results", "out", "echo out {}; echo err {} >&2", ":::", "A",
                                     "B C",       "d/e"};
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
    auto ours = tree(s.our_dir.path() + "/out"), gnu = tree(s.gnu_dir.path() + "/out");
    BOOST_TEST(ours == gnu);
    BOOST_TEST(ours.count("1/d\\_e/stdout") == 1u);
    std::vector<std::string> header = {
        "--header", ":", "--results", "res", "echo", ":::", "f1", "A", "B", ":::", "f2", "C"};
    same_run(s.gnu(header), s.ours(header));
    BOOST_TEST(tree(s.our_dir.path() + "/res") == tree(s.gnu_dir.path() + "/res"));
    BOOST_TEST(tree(s.our_dir.path() + "/res").count("f1/B/f2/C/seq") == 1u);
}

// 6. parallel(1), "--joblog" and "--resume-failed": the log's columns, and a second run that
// redoes only what failed.
BOOST_AUTO_TEST_CASE(joblog_and_resume_failed, *needs_parallel()) {
    sitting s;
    s.write("fail", "1\n");
    std::vector<std::string> args = {
        "-j1", "--joblog", "log", "echo {}; test ! -e fail || exit {}", ":::", "0", "1", "0", "2"};
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
    BOOST_TEST(joblog_columns(file_text(s.our_dir.path() + "/log")) ==
               joblog_columns(file_text(s.gnu_dir.path() + "/log")));
    fs::remove(s.gnu_dir.path() + "/fail");
    fs::remove(s.our_dir.path() + "/fail");
    args.insert(args.begin(), "--resume-failed");
    args.push_back("3");  // a job never run before
    auto g = s.gnu(args), o = s.ours(args, {"--shell"});
    same_run(g, o);
    BOOST_TEST(o.out == "1\n2\n3\n");
    BOOST_TEST(joblog_columns(file_text(s.our_dir.path() + "/log")) ==
               joblog_columns(file_text(s.gnu_dir.path() + "/log")));
    // --resume: what the joblog lists does not run again.
    args[0] = "--resume";
    args.push_back("4");
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
}

// A joblog's lines in the order parallel writes them: each after its job's output (with -k, in
// input order), on stdout with `--joblog -`; +FILE appends without a header. Start times and
// runtimes left out.
BOOST_AUTO_TEST_CASE(joblog_lines_where_and_when_parallel_writes_them, *needs_parallel()) {
    auto without_times = [](const std::string& text) {
        std::string out;
        std::istringstream in(text);
        for (std::string l; std::getline(in, l);) {
            if (std::count(l.begin(), l.end(), '\t') == 8 && l.rfind("Seq\t", 0) != 0) {
                auto third = l.find('\t', l.find('\t') + 1);
                auto fifth = l.find('\t', l.find('\t', third + 1) + 1);
                l = l.substr(0, third) + "\tTIME\tRUNTIME" + l.substr(fifth);
            }
            out += l + "\n";
        }
        return out;
    };
    sitting s;
    std::vector<std::string> on_stdout = {"-k", "--joblog", "-", "echo", ":::", "a", "b"};
    auto g = s.gnu(on_stdout), o = s.ours(on_stdout);
    BOOST_TEST(o.exit_code == g.exit_code);
    BOOST_TEST(without_times(o.out) == without_times(g.out));
    std::vector<std::string> in_order = {"-j3", "-k", "--joblog", "log", "sleep 0.{}; echo {}",
                                         ":::", "3",  "1",        "2"};
    same_run(s.gnu(in_order), s.ours(in_order, {"--shell"}));
    BOOST_TEST(without_times(file_text(s.our_dir.path() + "/log")) ==
               without_times(file_text(s.gnu_dir.path() + "/log")));
    for (const char* value : {"x", "y"}) {
        std::vector<std::string> appended = {"--joblog", "+log2", "echo", ":::", value};
        same_run(s.gnu(appended), s.ours(appended));
    }
    BOOST_TEST(without_times(file_text(s.our_dir.path() + "/log2")) ==
               without_times(file_text(s.gnu_dir.path() + "/log2")));
    BOOST_TEST(file_text(s.our_dir.path() + "/log2").find("Seq") == std::string::npos);
}

// parallel(1), "--resume" with "--results": a job whose folder holds its output does not run
// again, with or without a joblog.
BOOST_AUTO_TEST_CASE(resume_from_the_results_folder, *needs_parallel()) {
    sitting s;
    std::vector<std::string> first = {"--results", "out", "echo {} >> ran; echo {}", ":::", "a"};
    same_run(s.gnu(first), s.ours(first, {"--shell"}));
    std::vector<std::string> again = {"--resume", "--results", "out", "echo {} >> ran; echo {}",
                                      ":::",      "a",         "b"};
    same_run(s.gnu(again), s.ours(again, {"--shell"}));
    BOOST_TEST(file_text(s.our_dir.path() + "/ran") == "a\nb\n");
    BOOST_TEST(tree(s.our_dir.path()) == tree(s.gnu_dir.path()));
}

// 7. parallel(1), "--retries": a failing job runs N times in all; one joblog line.
BOOST_AUTO_TEST_CASE(retries, *needs_parallel()) {
    sitting s;
    std::vector<std::string> args = {"--retries", "3", "--joblog", "log", "echo try >> {}.count; exit 1",
                                     ":::",       "a", "b"};
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
    BOOST_TEST(file_text(s.our_dir.path() + "/a.count") == "try\ntry\ntry\n");
    BOOST_TEST(tree(s.our_dir.path()).size() == tree(s.gnu_dir.path()).size());
    BOOST_TEST(sorted_lines(joblog_columns(file_text(s.our_dir.path() + "/log"))) ==
               sorted_lines(joblog_columns(file_text(s.gnu_dir.path() + "/log"))));
}

// 8. parallel(1), "--timeout": the job that takes too long is killed (Exitval -1, Signal 15),
// the others print.
BOOST_AUTO_TEST_CASE(timeout, *needs_parallel()) {
    sitting s;
    std::vector<std::string> args = {"--timeout", "1",   "--joblog", "log", "sleep {}; echo done {}",
                                     ":::",       "0.1", "30"};
    auto g = s.gnu(args), o = s.ours(args, {"--shell"});
    same_run(g, o);
    BOOST_TEST(o.out == "done 0.1\n");
    BOOST_TEST(sorted_lines(joblog_columns(file_text(s.our_dir.path() + "/log"))) ==
               sorted_lines(joblog_columns(file_text(s.gnu_dir.path() + "/log"))));
}

// parallel(1), "--timeout N%": a job that takes longer than N% of the median runtime of the
// jobs that succeeded so far is killed (here the 30 s one, after three of 0.2 s), and retried
// with --retries as any timeout is.
BOOST_AUTO_TEST_CASE(timeout_as_a_share_of_the_median_runtime, *needs_parallel()) {
    sitting s;
    std::vector<std::string> args = {"-j1", "--timeout", "300%", "--joblog", "log", "sleep",
                                     ":::", "0.2",       "0.2",  "0.2",      "30",  "0.1"};
    auto g = s.gnu(args), o = s.ours(args);
    same_run(g, o);
    BOOST_TEST(o.exit_code == 1);
    BOOST_TEST(o.wall < std::chrono::seconds(20), "the 30 s job was not killed");
    BOOST_TEST(sorted_lines(joblog_columns(file_text(s.our_dir.path() + "/log"))) ==
               sorted_lines(joblog_columns(file_text(s.gnu_dir.path() + "/log"))));
    args.insert(args.begin(), {"--retries", "2"});
    same_run(s.gnu(args), s.ours(args));
}

// 9. parallel(1), "--halt": soon (running jobs finish, none start) and now, with parallel's exit
// status (the failing job's for fail=1, the percentage for fail=N%).
BOOST_AUTO_TEST_CASE(halt, *needs_parallel()) {
    sitting s;
    for (std::string halt :
         {"soon,fail=1", "now,fail=1", "soon,fail=2", "soon,fail=50%", "now,success=1", "now,done=2"}) {
        std::vector<std::string> args = {"-j1", "--halt", halt, "echo {}; exit {}", ":::", "0", "3", "0",
                                         "5",   "1",      "1"};
        BOOST_TEST_CONTEXT("--halt " << halt) same_run(s.gnu(args), s.ours(args, {"--shell"}));
    }
}

// 10. parallel_tutorial, "Tag output": --tag and --tagstring, every line of a job.
BOOST_AUTO_TEST_CASE(tag, *needs_parallel()) {
    sitting s;
    same_run(s.gnu({"-k", "--tag", "echo", ":::", "a", "b c", ":::", "1", "2"}),
             s.ours({"-k", "--tag", "echo", ":::", "a", "b c", ":::", "1", "2"}));
    std::vector<std::string> lines = {
        "-k", "--tagstring", "{2}-{1.}", "printf 'x\\ny'; echo e {} >&2", ":::", "a.x", ":::", "1", "2"};
    same_run(s.gnu(lines), s.ours(lines, {"--shell"}));
}

// 11. parallel(1), "-0": NUL-separated names (find -print0 | parallel -0).
BOOST_AUTO_TEST_CASE(null_separated, *needs_parallel()) {
    sitting s;
    s.write("names", std::string("a b\0c\nd\0e\0", 10));
    same_run(s.gnu({"-0", "-k", "echo"}, "names"), s.ours({"-0", "-k", "echo"}, {}, "names"));
    same_run(s.gnu({"-0", "-k", "-q", "printf", "[%s]\\n"}, "names"),
             s.ours({"-0", "-k", "-q", "printf", "[%s]\\n"}, {}, "names"));
    s.write("commas", "a,b c,d\n");
    same_run(s.gnu({"-k", "-d", ",", "echo", "x{}y"}, "commas"),
             s.ours({"-k", "-d", ",", "echo", "x{}y"}, {}, "commas"));
}

// 12. parallel_tutorial, "Keep order": -k prints in input order whatever order jobs end in;
// without it, in the order they end.
BOOST_AUTO_TEST_CASE(keep_order, *needs_parallel()) {
    sitting s;
    std::vector<std::string> args = {"-j3", "-k", "sleep 0.{}; echo {}", ":::", "4", "2", "0"};
    same_run(s.gnu(args), s.ours(args, {"--shell"}));
    args.erase(args.begin() + 1);
    same_run(s.gnu(args), s.ours(args, {"--shell"}), true);
}

// 13. parallel_tutorial, "A list of commands": parallel < jobs.txt.
BOOST_AUTO_TEST_CASE(commands_from_standard_input, *needs_parallel()) {
    sitting s;
    s.write("jobs.txt", "echo one\necho \"two  three\"\necho four >&2\n");
    same_run(s.gnu({"-k"}, "jobs.txt"), s.ours({"-k"}, {"--shell"}, "jobs.txt"));
    auto refused = s.ours({"-k"}, {}, "jobs.txt");
    BOOST_TEST(refused.exit_code == 255);
    BOOST_TEST(refused.err.find("--shell") != std::string::npos);
}

// 14. parallel(1), "--dry-run": each job's command line, quoted as parallel quotes it.
BOOST_AUTO_TEST_CASE(dry_run, *needs_parallel()) {
    sitting s;
    std::vector<std::vector<std::string>> cases = {
        {"--dry-run", "echo", "{}", "{.}", "{/}", "{//}", "{/.}", "{#}", ":::", "/x/y.tar.gz", "a b.c",
         "it's", "", "$x"},
        {"--dry-run", "-q", "printf", "%s\\n", "a {} b", ":::", "x y"},
        {"--dry-run", "--tag", "gzip", "-k", ":::", "a", "b"},
        {"--dry-run", "--colsep", ",", "echo", "{1}:{2}:{3}", ":::", "a,b,", ",c"},
    };
    // parallel prints dry-run lines as its jobs finish, in no fixed order (one run here had
    // the two of --tag in the other order): compared sorted, as parallel does not order them.
    for (const auto& args : cases) same_run(s.gnu(args), s.ours(args), true);
    // -v: also the environment every job gets.
    auto v = s.ours({"--dry-run", "-v", "echo", ":::", "a"});
    BOOST_TEST(v.out == "echo a\n");
    BOOST_TEST(v.err.find("environment: HOME LANG PATH") != std::string::npos, v.err);
}

// The input sources and replacement strings the 14 tasks do not use, each compared with GNU
// parallel: linked ::: sources and --link, an empty source beside others (one empty value),
// -a files, -j 0, --header : over ::: sources, positions with
// their transforms and from the end, {#} and {%} in a tag, -v, a --colsep regex, and the
// output modes agentctl prints as --group.
BOOST_AUTO_TEST_CASE(more_sources_strings_and_modes, *needs_parallel()) {
    sitting s;
    s.write("A", "a1\na2\n");
    s.write("B", "b1\nb2\n");
    s.write("cols", "x  y z\n1 2   3\n");
    const std::vector<std::vector<std::string>> cases = {
        {"-k", "echo", "{1}{2}", ":::", "a", "b", "c", ":::+", "1", "2"},
        {"-k", "--link", "echo", ":::", "a", "b", "c", ":::", "1", "2"},
        {"-k", "--xapply", "echo", ":::", "a", "b", ":::", "1", "2", "3", "4", "5"},
        {"-k", "echo", "{}", ":::", "a", ":::"},
        {"-k", "echo", ":::", ":::", "a", "b"},
        {"-k", "echo", ":::", "a", "b", ":::+"},
        {"-k", "--tag", "-v", "echo", ":::", "a", "b"},
        {"-k", "-a", "A", "echo"},
        {"-k", "-a", "A", "-a", "B", "echo", "{2}", "{1}"},
        {"-k", "--arg-file", "A", "echo", "{}", ":::", "x"},
        {"-j0", "-k", "echo", ":::", "a", "b", "c"},
        {"-j", "200%", "-k", "echo", ":::", "a", "b"},
        {"-k", "--header", ":", "echo", "{f2}-{f1}", ":::", "f1", "a", "b", ":::", "f2", "c"},
        {"-k", "echo", "{1.}", "{-1}", "{2/}", "{2//}", "{2/.}", ":::", "x.y", ":::", "d/e.f"},
        {"-j1", "-k", "--tagstring", "{#}:{%}", "echo", ":::", "a", "b"},
        {"-k", "-v", "echo", ":::", "a", "b c"},
        {"-k", "--colsep", " +", "echo", "{3}{1}", "::::", "cols"},
        {"-j1", "--group", "echo", ":::", "a", "b"},
        {"-j1", "--line-buffer", "echo", ":::", "a", "b"},
        {"-j1", "-u", "echo", ":::", "a", "b"},
    };
    for (const auto& args : cases) {
        std::string shown;
        for (const auto& a : args) shown += " " + a;
        BOOST_TEST_CONTEXT("parallel" << shown) same_run(s.gnu(args), s.ours(args));
    }
}

// The progress line (--bar, --eta, --progress) is drawn on a terminal only: into a pipe or a
// file nothing is added to what parallel prints.
BOOST_AUTO_TEST_CASE(the_progress_line_is_for_a_terminal_only) {
    using namespace std::chrono_literals;
    auto on_terminal = run_on_terminal(
        {agentctl_bin(), "parallel", "--bar", "-j2", "sleep", ":::", "0.3", "0.3", "0.3", "0.3"}, {}, 60s, {},
        80);
    BOOST_TEST(on_terminal.exit_code == 0, on_terminal.out);
    BOOST_TEST(on_terminal.out.find("/4 done") != std::string::npos, on_terminal.out);
    sitting s;
    for (const char* option : {"--bar", "--eta", "--progress"}) {
        auto piped = s.ours({option, "-j2", "sleep", ":::", "0.3", "0.3", "0.3"});
        BOOST_TEST(piped.exit_code == 0, piped.err);
        BOOST_TEST(piped.out.empty(), piped.out);
        BOOST_TEST(our_stderr(piped.err).empty(), piped.err);
    }
}

// Exit statuses: failed jobs counted up to 100, 101 above, 255 for other errors.
BOOST_AUTO_TEST_CASE(exit_statuses, *needs_parallel()) {
    sitting s;
    std::vector<std::string> three = {"exit {}", ":::", "0", "1", "2", "3"};
    same_run(s.gnu(three), s.ours(three, {"--shell"}), true);
    auto g = s.gnu({"--no-such-option", "echo"}), o = s.ours({"--no-such-option", "echo"});
    BOOST_TEST(g.exit_code == 255);
    BOOST_TEST(o.exit_code == 255);
    // 101 for more than 100 (parallel(1), "EXIT STATUS"; parallel itself takes seconds for it).
    std::vector<std::string> many = {"-j16", "false", ":::"};
    for (int i = 0; i < 102; ++i) many.push_back(std::to_string(i));
    BOOST_TEST(s.ours(many).exit_code == 101);
}

// What agentctl parallel will not do is refused before anything runs, naming the option and
// what to use instead.
BOOST_AUTO_TEST_CASE(unsupported_options_are_refused_with_a_way_out) {
    sitting s;
    struct refusal {
        std::vector<std::string> args;
        std::string says;
    };
    std::vector<refusal> cases = {
        {{"--sshlogin", "host", "echo", ":::", "a"}, "--backend slurm"},
        {{"-S", "host", "echo", ":::", "a"}, "--backend slurm"},
        {{"--pipe", "wc"}, "split"},
        {{"-N2", "echo", ":::", "a", "b"}, "one value of each input source"},
        {{"echo", "{= $_=uc($_) =}", ":::", "a"}, "Perl"},
        {{"--timeout", "0%", "echo", ":::", "a"}, "percentage of the median runtime"},
        {{"--timeout", "abc", "echo", ":::", "a"}, "seconds"},
        {{"-j", "abc", "echo", ":::", "a"}, "not a number"},
        {{"echo", "{}", ">", "out", ":::", "a"}, "--shell"},
        {{"no-such-program-here", ":::", "a"}, "use an absolute path or add its folder to PATH"},
        {{"--slurm-dispatch", "job", "echo", ":::", "a"}, "need --backend slurm"},
        {{"--backend", "slurm", "--slurm-dispatch", "nodes", "echo", ":::", "a"}, "auto, worker or job"},
        // -u keeps no output: nothing for --results or a tag; and only agentctl's own
        // descriptors can be passed on (docs/PARALLEL.md, "Output").
        {{"-u", "--results", "res", "echo", ":::", "a"}, "-u and --results exclude each other"},
        {{"-u", "--tag", "echo", ":::", "a"}, "-u and --tag/--tagstring exclude each other"},
        {{"-u", "--container", "img@sha256:0", "echo", ":::", "a"}, "-u is not available with --container"},
        {{"-u", "--backend", "slurm", "echo", ":::", "a"}, "-u is not available with --backend slurm"},
    };
    for (const auto& c : cases) {
        auto r = s.ours(c.args);
        BOOST_TEST(r.exit_code == 255, c.args.front());
        BOOST_TEST(r.err.find(c.says) != std::string::npos, r.err);
        BOOST_TEST(r.out.empty());
    }
    BOOST_TEST(!fs::exists(s.our_dir.path() + "/out"));
    // None of them made a run.
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
    auto list = agentctl({"runs"}, o);
    BOOST_TEST(list.out.find("no runs recorded") == 0u, list.out);
}

// A real run: in the journal, its output read back, and --print-workflow's document runs the same.
BOOST_AUTO_TEST_CASE(runs_are_journaled_and_workflows_print) {
    sitting s;
    auto r = s.ours({"echo", "hello", ":::", "a", "b"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(sorted_lines(r.out) == "hello a\nhello b\n");
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
    auto list = agentctl({"--output", "json", "runs"}, o);
    BOOST_TEST_REQUIRE(list.exit_code == 0, list.err);
    json::value v = json::parse(list.out);
    const auto& runs = v.at("data").at("runs").as_array();
    BOOST_TEST_REQUIRE(runs.size() == 1u);
    BOOST_TEST(runs[0].at("workflow").as_string() == "parallel");
    std::string id(runs[0].at("runId").as_string());
    auto shown = agentctl({"--output", "json", "runs", "show", id}, o);  // children carry a digest
    auto out = agentctl({"runs", "show", id, "--task", child_id_in(shown.out, "job--0001"), "--stdout"}, o);
    BOOST_TEST(out.out == "hello b\n", out.err);

    auto printed = s.ours({"--print-workflow", "echo", "hello", ":::", "a", "b"});
    BOOST_TEST_REQUIRE(printed.exit_code == 0, printed.err);
    std::string wf = s.our_dir.write("wf.yaml", printed.out);
    auto again = agentctl({"run", wf, "--show-output"}, o);
    BOOST_TEST(again.exit_code == 0, again.err);
    BOOST_TEST(sorted_lines(again.out) == "hello a\nhello b\n");
}

// --halt stops a run early: it is cancelled in the journal, and `agentctl resume` runs the rest.
BOOST_AUTO_TEST_CASE(a_halted_run_resumes) {
    sitting s;
    auto r =
        s.ours({"-j1", "--halt", "soon,fail=1", "echo {}; test {} != 2", ":::", "1", "2", "3"}, {"--shell"});
    BOOST_TEST(r.exit_code == 1, r.err);
    BOOST_TEST(r.out == "1\n2\n");
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
    o.cwd = s.our_dir.path();
    auto list = agentctl({"--output", "json", "runs"}, o);
    json::value v = json::parse(list.out);
    std::string id(v.at("data").at("runs").as_array().at(0).at("runId").as_string());
    BOOST_TEST(v.at("data").at("runs").as_array().at(0).at("state").as_string() == "cancelled");
    auto resumed = agentctl({"--output", "json", "resume", id}, o);
    json::value rv = json::parse(resumed.out);
    BOOST_TEST(
        rv.at("data").at("tasks").at(child_id_in(resumed.out, "job--0002")).at("stdout").as_string() == "3\n",
        resumed.out);
}

// {%}: each running job holds its own slot, 1..-j, and gives it back when it ends.
BOOST_AUTO_TEST_CASE(job_slots_are_exclusive) {
    sitting s;
    // Each job holds its slot in a marker file while it runs: a second holder would find it.
    auto r = s.ours({"-j3", "-k", "set -C; : > slot-{%} || exit 9; sleep 0.05; rm slot-{%}; echo {%}",
                     ":::", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
                    {"--shell"});
    BOOST_TEST(r.exit_code == 0, r.err);
    std::istringstream in(r.out);
    int lines = 0;
    for (std::string l; std::getline(in, l); ++lines) BOOST_TEST((l == "1" || l == "2" || l == "3"), l);
    BOOST_TEST(lines == 9);
}

// -u: each job's stdout and stderr are agentctl's own, inherited, not a pipe: a job sees the
// file agentctl writes to, may write past the 1 MiB cap, and the journal says nothing was
// captured (docs/PARALLEL.md, "Output").
BOOST_AUTO_TEST_CASE(ungrouped_jobs_write_straight_to_agentctls_descriptors) {
    sitting s;
    const std::string job =
        "if test -p /dev/stdout; then echo pipe {}; else echo file {}; fi; echo err {} >&2";
    auto into_files = [&](const std::vector<std::string>& options, const std::string& name) {
        std::string line = "exec " + sh_quote(agentctl_bin()) + " parallel --shell";
        for (const auto& o : options) line += " " + sh_quote(o);
        line += " " + sh_quote(job) + " ::: a b > " + name + ".out 2> " + name + ".err < /dev/null";
        command_options o;
        o.cwd = s.our_dir.path();
        o.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
        return run({"/bin/sh", "-c", line}, o);
    };
    auto ungrouped = into_files({"-u"}, "u");
    BOOST_TEST(ungrouped.exit_code == 0, ungrouped.err);
    BOOST_TEST(sorted_lines(file_text(s.our_dir.path() + "/u.out")) == "file a\nfile b\n");
    BOOST_TEST(sorted_lines(our_stderr(file_text(s.our_dir.path() + "/u.err"))) == "err a\nerr b\n");
    // Grouped, the same job writes into agentctl's pipe, which agentctl prints.
    auto grouped = into_files({}, "g");
    BOOST_TEST(grouped.exit_code == 0, grouped.err);
    BOOST_TEST(sorted_lines(file_text(s.our_dir.path() + "/g.out")) == "pipe a\npipe b\n");

    // The journal: each job's outcome, its output marked as not captured.
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
    auto list = agentctl({"--output", "json", "runs"}, o);
    json::value v = json::parse(list.out);
    const auto& runs = v.at("data").at("runs").as_array();
    BOOST_TEST_REQUIRE(runs.size() == 2u);
    std::string id;
    for (const auto& r : runs) {
        auto shown =
            agentctl({"--output", "json", "runs", "show", std::string(r.at("runId").as_string())}, o);
        if (shown.out.find("outputPassedThrough") != std::string::npos) id = r.at("runId").as_string();
    }
    BOOST_TEST_REQUIRE(!id.empty(), "the -u run's results say outputPassedThrough");
    auto shown = agentctl({"--output", "json", "runs", "show", id}, o);
    std::string task = child_id_in(shown.out, "job--0000");
    auto record = agentctl({"--output", "json", "runs", "show", id, "--task", task}, o);
    json::value rv = json::parse(record.out);
    BOOST_TEST(rv.at("data").at("result").at("state").as_string() == "succeeded");
    BOOST_TEST(rv.at("data").at("result").at("outputPassedThrough").as_bool());
    auto human = agentctl({"runs", "show", id, "--task", task}, o);
    BOOST_TEST(human.out.find("output: not captured") != std::string::npos, human.out);
    auto stream = agentctl({"runs", "show", id, "--task", task, "--stdout"}, o);
    BOOST_TEST(stream.exit_code == 0, stream.err);
    BOOST_TEST(stream.out.empty());
    BOOST_TEST(stream.err.find("was not captured") != std::string::npos, stream.err);

    // Nothing is read, so no cap applies: 2 MiB from one job (grouped: output_limit_exceeded).
    std::string line =
        "exec " + sh_quote(agentctl_bin()) + " parallel -u head -c {} /dev/zero ::: 2097152 > big";
    command_options bo;
    bo.cwd = s.our_dir.path();
    bo.env = {"AGENTCTL_STATE_DIR=" + s.home.path() + "/state"};
    auto b = run({"/bin/sh", "-c", line}, bo);
    BOOST_TEST(b.exit_code == 0, b.err);
    BOOST_TEST(fs::file_size(s.our_dir.path() + "/big") == 2097152u);
}

// -u changes where the output goes, not how a job ends: a timeout still kills the whole tree,
// a background child included, and the joblog says so as for any timeout.
BOOST_AUTO_TEST_CASE(ungrouped_timeout_kills_the_tree) {
    sitting s;
    auto again =
        s.ours({"-u", "--timeout", "0.5", "--joblog", "log", "sleep 60 & echo $! > bg-{}; wait", ":::", "x"},
               {"--shell"});
    BOOST_TEST(again.exit_code == 1, again.err);
    BOOST_TEST(again.wall < std::chrono::seconds(20));
    BOOST_TEST(again.err.find("timed out") != std::string::npos, again.err);
    const std::string pid_text = file_text(s.our_dir.path() + "/bg-x");
    BOOST_TEST_REQUIRE(!pid_text.empty());
    const pid_t pid = std::stoi(pid_text);
    // Gone (or at most a zombie not yet reaped by its new parent).
    bool alive = ::kill(pid, 0) == 0;
    if (alive) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string all((std::istreambuf_iterator<char>(stat)), {});
        auto close = all.rfind(')');
        alive = close != std::string::npos && close + 2 < all.size() && all[close + 2] != 'Z';
    }
    BOOST_TEST(!alive, "the background sleep " << pid << " outlived the timeout");
    BOOST_TEST(joblog_columns(file_text(s.our_dir.path() + "/log")).find("\t-1\t15\t") != std::string::npos,
               file_text(s.our_dir.path() + "/log"));
}

BOOST_AUTO_TEST_SUITE_END()
