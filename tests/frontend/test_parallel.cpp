// `agentctl parallel`'s translation (include/agentctl/parallel.hpp): GNU parallel's quoting and
// replacement strings, jobs from input sources, the workflow (compiled here), --halt and its
// exit status, joblog lines. The expected strings are what GNU parallel 20221122 prints
// (`parallel --dry-run`); tests/cli compares whole runs with parallel itself.
#include <agentctl/parallel.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace agentctl;

namespace {

parallel_request request_of(std::vector<std::string> command, std::vector<std::vector<std::string>> sources) {
    parallel_request r;
    r.command = std::move(command);
    for (auto& s : sources)
        r.sources.push_back({parallel_source::kind_t::arguments, std::move(s), "", false});
    return r;
}

parallel_context context_of(const parallel_request& r) {
    parallel_context c;
    for (const auto& s : r.sources) c.values.push_back(s.arguments);
    c.cores = 2;
    c.working_directory = "/work/here";
    c.environment_names = {"PATH", "HOME", "SECRET", "LC_ALL", "LANG"};
    return c;
}

parallel_translation translated(const parallel_request& r) {
    parallel_translation t = translate_parallel(r, context_of(r));
    BOOST_TEST_REQUIRE(t.error.empty(), t.error);
    return t;
}

std::vector<std::string> dry_run(const parallel_translation& t) {
    std::vector<std::string> lines;
    for (std::size_t i = 0; i < t.jobs.size(); ++i) lines.push_back(t.line.fill(t.jobs[i], 1));
    return lines;
}

std::string error_of(const parallel_request& r) {
    return translate_parallel(r, context_of(r)).error;
}

// The workflow compiled with its jobs, as `agentctl parallel` runs it.
plan compiled(const parallel_translation& t) {
    parse_result parsed = parse_workflow(t.workflow, "parallel.yaml");
    compile_options o;
    o.input_overrides.emplace_back("jobs", boost::json::parse(t.jobs_input));
    compile_result c = check_document(parsed, o);
    std::string problems;
    for (const auto& d : c.diags.items()) problems += d.message + "\n";
    BOOST_TEST_REQUIRE(c.compiled.has_value(), problems << t.workflow);
    return std::move(*c.compiled);
}

// Task `k` of the foreach: its command line as the engine will run it.
std::vector<std::string> argv_of(const plan& p, std::uint32_t k) {
    auto agg = p.find("job");
    BOOST_TEST_REQUIRE(agg.has_value());
    plan_task child = p.task(p.node(*agg).first_child + k);
    std::vector<std::string> argv = {p.action_of(child).command};
    const auto& args = child.args ? *child.args : p.action_of(child).args;
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parallel)

BOOST_AUTO_TEST_CASE(quoting_is_parallels) {
    BOOST_TEST(parallel_shell_quote("plain-_.+/09") == "plain-_.+/09");
    BOOST_TEST(parallel_shell_quote("") == "''");
    BOOST_TEST(parallel_shell_quote("a b") == "'a b'");
    BOOST_TEST(parallel_shell_quote("it's") == "'it'\"'\"'s'");
    BOOST_TEST(parallel_shell_quote("'x") == "\"'\"'x'");
    BOOST_TEST(parallel_shell_quote("x'") == "'x'\"'\"");
    BOOST_TEST(parallel_shell_quote("$x") == "'$x'");
    BOOST_TEST(parallel_shell_quote("\xc3\xa9") == "'\xc3\xa9'");
}

BOOST_AUTO_TEST_CASE(replacement_strings_match_parallel_dry_run) {
    // parallel --dry-run echo {} {.} {/} {//} {/.} {#} ::: /x/y.tar.gz a.b/c noext ./d .hidden
    auto t = translated(
        request_of({"echo", "{}", "{.}", "{/}", "{//}", "{/.}", "{#}"},
                   {{"/x/y.tar.gz", "a.b/c", "noext", "./d", ".hidden", "a/", "/", "x//", "a//b"}}));
    std::vector<std::string> expected = {
        "echo /x/y.tar.gz /x/y.tar y.tar.gz /x y.tar 1",
        "echo a.b/c a.b/c c a.b c 2",
        "echo noext noext noext . noext 3",
        "echo ./d ./d d . d 4",
        "echo .hidden '' .hidden . '' 5",
        "echo a/ a/ '' . '' 6",
        "echo / / '' / '' 7",
        "echo x// x// '' . '' 8",
        "echo a//b a//b b a b 9",
    };
    BOOST_TEST(dry_run(t) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(sources_cross_and_link) {
    auto crossed = translated(request_of({"echo"}, {{"a", "b"}, {"c", "d"}}));
    BOOST_TEST(dry_run(crossed) == (std::vector<std::string>{"echo a c", "echo a d", "echo b c", "echo b d"}),
               boost::test_tools::per_element());
    // :::+ pairs value by value; the longer source's extra values are dropped.
    auto linked = request_of({"echo", "{}"}, {{"a", "b"}, {"1", "2", "3"}, {"x"}});
    linked.sources[1].linked = true;
    BOOST_TEST(dry_run(translated(linked)) == (std::vector<std::string>{"echo a 1 x", "echo b 2 x"}),
               boost::test_tools::per_element());
    // --link: every source value by value, the shorter ones starting over.
    auto all_linked = request_of({"echo"}, {{"a", "b"}, {"1", "2", "3"}, {"x", "y", "z", "w"}});
    all_linked.link = true;
    BOOST_TEST(dry_run(translated(all_linked)) ==
                   (std::vector<std::string>{"echo a 1 x", "echo b 2 y", "echo a 3 z", "echo b 1 w"}),
               boost::test_tools::per_element());
    // Of several sources, an empty one is one empty value; all empty, no job.
    BOOST_TEST(dry_run(translated(request_of({"echo"}, {{"a", "b"}, {}, {"c"}}))) ==
                   (std::vector<std::string>{"echo a '' c", "echo b '' c"}),
               boost::test_tools::per_element());
    auto empty_linked = request_of({"echo"}, {{"a", "b"}, {}});
    empty_linked.sources[1].linked = true;
    BOOST_TEST(dry_run(translated(empty_linked)) == (std::vector<std::string>{"echo a ''"}),
               boost::test_tools::per_element());
    BOOST_TEST(translated(request_of({"echo"}, {{}, {}})).jobs.empty());
    // Positions, counted from the end too; a position a job lacks is nothing.
    auto positions = translated(request_of({"echo", "{-1}", "{1/}", "{2.}", "{3}"}, {{"d/a"}, {"b.c"}}));
    BOOST_TEST(dry_run(positions) == (std::vector<std::string>{"echo b.c a b "}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(columns_and_headers) {
    // printf 'a,b,\n,c\n' | parallel --colsep , echo {1}:{2}:{3}
    auto r = request_of({"echo", "{1}:{2}:{3}"}, {{"a,b,", ",c"}});
    r.colsep = ",";
    BOOST_TEST(dry_run(translated(r)) == (std::vector<std::string>{"echo a:b:''", "echo '':c:"}),
               boost::test_tools::per_element());
    // --header : names each source by its first value; with --colsep, each column.
    auto h = request_of({"echo", "{f}", "{g.}", "{1}"}, {{"f", "x", "y"}, {"g", "z.q"}});
    h.header = true;
    auto ht = translated(h);
    BOOST_TEST(dry_run(ht) == (std::vector<std::string>{"echo x z x", "echo y z y"}),
               boost::test_tools::per_element());
    auto csv = request_of({"echo", "{n}-{m}"}, {{"n,m", "1,2", "3,4"}});
    csv.header = true;
    csv.colsep = ",";
    BOOST_TEST(dry_run(translated(csv)) == (std::vector<std::string>{"echo 1-2", "echo 3-4"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(results_folders_are_parallels) {
    auto r = request_of({"echo"}, {{"a/b", "x y", "t\\u"}, {"1"}});
    r.results = "out";
    auto t = translated(r);
    BOOST_TEST(t.results_dir(0) == "out/1/a\\_b/2/1");
    BOOST_TEST(t.results_dir(1) == "out/1/x y/2/1");
    BOOST_TEST(t.results_dir(2) == "out/1/t\\\\u/2/1");
    // --header: the names, sorted numerically and then as text.
    auto h = request_of({"echo"}, {{"zb", "1"}, {"aa", "2"}});
    h.header = true;
    h.results = "res";
    BOOST_TEST(translated(h).results_dir(0) == "res/aa/2/zb/1");
}

BOOST_AUTO_TEST_CASE(the_command_runs_without_a_shell_unless_asked) {
    auto t = translated(request_of({"gzip", "-k"}, {{"a.txt", "b c.txt"}}));
    BOOST_TEST(t.program == "gzip");
    BOOST_TEST(dry_run(t) == (std::vector<std::string>{"gzip -k a.txt", "gzip -k 'b c.txt'"}),
               boost::test_tools::per_element());
    plan p = compiled(t);
    BOOST_TEST(argv_of(p, 1) == (std::vector<std::string>{"gzip", "-k", "b c.txt"}),
               boost::test_tools::per_element());
    BOOST_TEST(p.policy.process_allowlist == std::vector<std::string>{"gzip"});
    BOOST_TEST(p.max_concurrency == 2);  // 100% of 2 cores

    // Quotes in the command are the shell's: removed, a value inserted inside double quotes
    // keeps parallel's quoting, as the shell would see it.
    auto quoted = translated(request_of({"printf", "'%s\\n'", "\"<{}>\"", "x\\ y"}, {{"a b", "c"}}));
    BOOST_TEST(
        argv_of(compiled(quoted), 0) == (std::vector<std::string>{"printf", "%s\\n", "<'a b'>", "x y"}),
        boost::test_tools::per_element());

    // What only a shell does is refused, with --shell as the way out.
    for (std::string cmd :
         {"echo {} > out", "a | b", "x; y", "echo $HOME", "ls *.txt", "A=1 cmd", "if true", "echo `x`"})
        BOOST_TEST(error_of(request_of({cmd}, {{"v"}})).find("--shell") != std::string::npos, cmd);
    auto shell = request_of({"echo {} > {.}.out"}, {{"a b.txt"}});
    shell.shell = true;
    auto st = translated(shell);
    BOOST_TEST(st.program == "sh");
    BOOST_TEST(
        argv_of(compiled(st), 0) == (std::vector<std::string>{"sh", "-c", "echo 'a b.txt' > 'a b'.out"}),
        boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(quote_mode_keeps_each_word_whole) {
    // parallel -q echo "a {} b" "c d" ::: "x y"
    auto r = request_of({"echo", "a {} b", "c d"}, {{"x y"}});
    r.quote = true;
    auto t = translated(r);
    BOOST_TEST(dry_run(t) == (std::vector<std::string>{"echo 'a x y b' 'c d'"}),
               boost::test_tools::per_element());
    BOOST_TEST(argv_of(compiled(t), 0) == (std::vector<std::string>{"echo", "a x y b", "c d"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(without_a_command_each_value_is_a_command_line) {
    auto r = request_of({}, {{"echo one", "echo \"two three\""}});
    BOOST_TEST(error_of(r).find("--shell") != std::string::npos);
    r.shell = true;
    auto t = translated(r);
    BOOST_TEST(dry_run(t) == (std::vector<std::string>{"echo one", "echo \"two three\""}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_workflow_is_one_foreach_of_one_program) {
    auto r = request_of({"./tool.sh", "--in", "{}", "--n", "{#}"}, {{"a", "b"}});
    r.timeout_seconds = 2.5;
    r.retries = 3;
    r.jobs = "3";
    auto t = translated(r);
    BOOST_TEST(t.program == "/work/here/tool.sh");
    plan p = compiled(t);
    BOOST_TEST(argv_of(p, 1) == (std::vector<std::string>{"/work/here/tool.sh", "--in", "b", "--n", "2"}),
               boost::test_tools::per_element());
    auto agg = p.find("job");
    const plan_task& child = p.node(p.node(*agg).first_child);
    BOOST_TEST(child.timeout_ms == 2500);
    BOOST_TEST(child.retry.max_attempts == 3);
    BOOST_TEST((child.failure == failure_mode::continue_run));
    BOOST_TEST(!child.requires_approval);
    BOOST_TEST(p.max_concurrency == 3);
    BOOST_TEST(p.policy.workspace_root == "/work/here");
    // The default environment, of the names set; SECRET only with --env.
    BOOST_TEST(t.environment == (std::vector<std::string>{"HOME", "LANG", "LC_ALL", "PATH"}),
               boost::test_tools::per_element());
    r.env = {"SECRET"};
    BOOST_TEST(translated(r).environment.size() == 5u);
    r.env = {"UNSET"};
    BOOST_TEST(error_of(r).find("UNSET is not set") != std::string::npos);
    // --print-workflow's document holds the jobs and compiles to the same tasks.
    parse_result printed = parse_workflow(t.printed_workflow, "printed.yaml");
    compile_result c = check_document(printed);
    BOOST_TEST_REQUIRE(c.compiled.has_value());
    BOOST_TEST(c.compiled->size() == p.size());
    BOOST_TEST(argv_of(*c.compiled, 1) == argv_of(p, 1), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_job_slot_is_the_engines) {
    auto t = translated(request_of({"echo", "slot-{%}", "{}"}, {{"a", "b"}}));
    BOOST_TEST(t.uses_slot());
    plan p = compiled(t);
    auto agg = p.find("job");
    const plan_task& child = p.node(p.node(*agg).first_child);
    BOOST_TEST(child.argv_deferred);  // rendered when the attempt is dispatched
    BOOST_TEST(t.line.fill(t.jobs[1], 7) == "echo slot-7 b");
}

BOOST_AUTO_TEST_CASE(what_cannot_be_one_workflow_is_refused) {
    BOOST_TEST(error_of(request_of({"{}"}, {{"echo", "ls"}})).find("--shell") != std::string::npos);
    // A missing column drops a word, so jobs would differ in their number of arguments.
    auto ragged = request_of({"echo", "{1}", "{2}"}, {{"a,b", "c"}});
    ragged.colsep = ",";
    BOOST_TEST(error_of(ragged).find("--shell") != std::string::npos);
    BOOST_TEST(error_of(request_of({"echo", "{= uc =}"}, {{"a"}})).find("Perl") != std::string::npos);
    BOOST_TEST(error_of(request_of({"echo", "\"{}"}, {{"a"}})).find("unterminated quote") !=
               std::string::npos);
}

BOOST_AUTO_TEST_CASE(input_is_split_as_parallel_splits_it) {
    parallel_request r;
    BOOST_TEST(split_parallel_input("a\r\n\nb", r) == (std::vector<std::string>{"a\r", "", "b"}),
               boost::test_tools::per_element());
    r.separator = parallel_request::separator_t::nul;
    BOOST_TEST(
        split_parallel_input(std::string("a\nb\0c\0", 6), r) == (std::vector<std::string>{"a\nb", "c"}),
        boost::test_tools::per_element());
    std::string error;
    r.separator = parallel_request::separator_t::delimiter;
    r.delimiter = *parse_parallel_delimiter("\\t", error);
    BOOST_TEST(split_parallel_input("a\tb\t", r) == (std::vector<std::string>{"a", "b"}),
               boost::test_tools::per_element());
    BOOST_TEST(*parse_parallel_delimiter("\\x3a\\0", error) == std::string(":\0", 2));
    BOOST_TEST(!parse_parallel_delimiter("", error));
}

BOOST_AUTO_TEST_CASE(jobs_at_once) {
    std::string error;
    BOOST_TEST(*parse_parallel_jobs("4", 2, 10, error) == 4);
    BOOST_TEST(*parse_parallel_jobs("50%", 3, 10, error) == 2);  // ceil(1.5)
    BOOST_TEST(*parse_parallel_jobs("+1", 2, 10, error) == 3);
    BOOST_TEST(*parse_parallel_jobs("-5", 2, 10, error) == 1);
    BOOST_TEST(*parse_parallel_jobs("0", 2, 10, error) == 10);
    BOOST_TEST(*parse_parallel_jobs("100000", 2, 10, error) == 4096);
    BOOST_TEST(!parse_parallel_jobs("abc", 2, 10, error));
    BOOST_TEST(error.find("not a number") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(halt_and_exit_status_as_parallel_computes_them) {
    std::string error;
    auto h = parse_parallel_halt("soon,fail=50%", error);
    BOOST_TEST_REQUIRE(h.has_value());
    BOOST_TEST(h->percent);
    BOOST_TEST(!parse_parallel_halt("later,fail=1", error));
    BOOST_TEST(!parse_parallel_halt("now,fail=0", error));
    BOOST_TEST((parse_parallel_halt("2", error)->when == parallel_halt::when_t::now));

    // parallel -j1 'exit {}' ::: 0 3 0 5 → 2 (the failed jobs)
    parallel_outcome none(parallel_halt{}, 4);
    for (int code : {0, 3, 0, 5})
        BOOST_TEST((none.job_ended(code != 0, code, 0) == parallel_outcome::action::none));
    BOOST_TEST(none.exit_status() == 2);
    // --halt soon,fail=1: the failing job's status.
    parallel_outcome soon(*parse_parallel_halt("soon,fail=1", error), 4);
    BOOST_TEST((soon.job_ended(false, 0, 0) == parallel_outcome::action::none));
    BOOST_TEST((soon.job_ended(true, 3, 0) == parallel_outcome::action::soon));
    BOOST_TEST(soon.exit_status() == 3);
    // --halt soon,fail=50% of 6 jobs: after the third failure, 50.
    parallel_outcome pct(*h, 6);
    int codes[] = {0, 3, 0, 5, 1};
    for (int code : codes) pct.job_ended(code != 0, code, 0);
    BOOST_TEST(pct.halted());
    BOOST_TEST(pct.exit_status() == 50);
    // --halt now,success=1: 0 at the first success.
    parallel_outcome win(*parse_parallel_halt("now,success=1", error), 4);
    win.job_ended(true, 3, 0);
    BOOST_TEST((win.job_ended(false, 0, 0) == parallel_outcome::action::now));
    BOOST_TEST(win.exit_status() == 0);
    // More than 100 failures: 101.
    parallel_outcome many(parallel_halt{}, 150);
    for (int i = 0; i < 150; ++i) many.job_ended(true, 1, 0);
    BOOST_TEST(many.exit_status() == 101);
}

BOOST_AUTO_TEST_CASE(joblog_lines_and_resume) {
    BOOST_TEST(parallel_joblog_header() ==
               "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n");
    BOOST_TEST(parallel_joblog_line(2, 1796281997.7469, 0.0321, 2, 1, 0, "echo 1; exit 1") ==
               "2\t:\t1796281997.747\t     0.032\t0\t2\t1\t0\techo 1; exit 1\n");
    BOOST_TEST(parallel_joblog_line(3, 1.0, 1.0, 0, -1, 15, "a\nb") ==
               std::string("3\t:\t1.000\t     1.000\t0\t0\t-1\t15\ta") + '\0' + "b\n");
    std::string log = parallel_joblog_header() + parallel_joblog_line(1, 1, 0, 2, 0, 0, "ok") +
                      parallel_joblog_line(2, 1, 0, 2, 1, 0, "bad") +
                      parallel_joblog_line(4, 1, 0, 0, 0, 9, "killed");
    std::string error;
    BOOST_TEST(*parallel_joblog_done(log, false, error) == (std::vector<std::uint32_t>{1, 2, 4}),
               boost::test_tools::per_element());
    BOOST_TEST(*parallel_joblog_done(log, true, error) == (std::vector<std::uint32_t>{1}),
               boost::test_tools::per_element());
    BOOST_TEST(!parallel_joblog_done(parallel_joblog_header() + "garbage\n", false, error));

    // --resume-failed: job 2 runs again, keeping its number; 3 never ran.
    auto r = request_of({"echo", "{#}"}, {{"a", "b", "c"}});
    r.resume_failed = true;
    auto c = context_of(r);
    c.joblog = log;
    parallel_translation t = translate_parallel(r, c);
    BOOST_TEST_REQUIRE(t.error.empty(), t.error);
    BOOST_TEST(t.skipped == 1u);
    BOOST_TEST(dry_run(t) == (std::vector<std::string>{"echo 2", "echo 3"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
