// agentctl run FILE: compile, then run the plan on one io_context with live progress.
#include "cli.hpp"
#include "journal_cli.hpp"
#include "output_queue.hpp"
#include "run_display.hpp"

#include <agentctl/doctor.hpp>
#include <agentctl/engine.hpp>
#include <agentctl/process.hpp>
#include <agentctl/resume.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace asio = boost::asio;

namespace agentctl::cli {
namespace {

/// A sink that queues: printing never blocks the event loop.
class queue_sink final : public json_sink {
public:
    explicit queue_sink(output_queue& q) : q_(q) {}
    void write(std::string_view bytes) override { q_.write(bytes); }

private:
    output_queue& q_;
};

/// Holds new tasks back while more than `limit` bytes of agentctl's own output wait for
/// their reader, and says so once.
class output_gate final : public dispatch_gate {
public:
    static constexpr std::size_t limit = 8 * 1024 * 1024;

    output_gate(output_queue& out, output_queue& err, dispatch_gate* next)
        : out_(out), err_(err), next_(next) {}

    bool open() override {
        if (next_ && !next_->open()) return false;
        bool behind = out_.backlog() + err_.backlog() > limit;
        if (behind && !said_) {
            said_ = true;
            err_.write(
                "agentctl: its output is not being read fast enough: no new task starts until the reader catches "
                "up (running tasks are not affected)\n");
        }
        return !behind;
    }

private:
    output_queue& out_;
    output_queue& err_;
    dispatch_gate* next_;  // a front end's own, asked first
    bool said_ = false;
};

std::string current_folder() {
    std::error_code ec;
    return std::filesystem::current_path(ec).string();
}

// A foreach or matrix that expands to no task runs nothing, and the run "succeeds": said in
// every output mode, under -q too (with the undeclared inputs that are the usual cause),
// since nothing else will say it.
diagnostics empty_expansions(const plan& p) {
    std::string empty;
    for (const auto& t : p.nodes)
        if (t.kind == plan_task::kind_t::aggregate && t.child_count == 0)
            empty += (empty.empty() ? "" : ", ") + t.id;
    diagnostics d;
    if (!empty.empty())
        d.warning("empty_expansion", "", empty + " expanded to no task: its items are empty",
                  "give them with --items NAME=FILE, --input or --inputs-file, by the names of spec.inputs");
    return d;
}

void print_empty_expansions(const command_line& cl, const diagnostics& empty, const diagnostics& diags) {
    if (empty.empty()) return;
    diagnostics said;
    if (cl.quiet)  // the rest of diags was printed already
        for (const auto& d : diags.items())
            if (d.code == "undeclared_input") said.add(d);
    said.append(empty);
    command_line loud = cl;
    loud.quiet = false;
    print_diagnostics_human(loud, said);
}

}  // namespace

std::optional<int> refuse_missing_commands(const command_line& cl, const plan& p,
                                           const std::string& base_dir) {
    auto missing = missing_commands(p, process_environment().search_path, base_dir);
    if (!missing) return std::nullopt;
    std::string message = missing->message + "; nothing was run or recorded";
    diagnostics d;
    d.error(std::string(to_string(missing->code)), "", message);
    if (cl.output == output_format::human) return print_failure(cl, message, exit_status::run_failed);
    return print_failure(cl, message, exit_status::run_failed, d);
}

namespace {

// After a run of a workflow with `onFailure: automatic`: when it ended failed (never when it
// was cancelled), compensate it as `agentctl compensate RUN` does. The run's status stays the
// exit status; a compensation that cannot start says why on stderr.
int compensate_after_failure(const command_line& cl, watchdog* watch, int code) {
    // The watchdog outlived the run for its compensation: without one, it is done now.
    auto done = [&] {
        if (watch) watch->clean_exit();
        return code;
    };
    if (code != status(exit_status::run_failed)) return done();
    int failed = 0;
    auto db = open_journal(cl, journal_access::write, failed);
    if (!db) return done();
    auto run = db->load_run(cl.new_run_id);
    if (!run || run->state != journal_run_state::failed) return done();
    command_line ccl = cl;
    ccl.new_run_id.clear();
    compensation_plan cp = prepare_compensation(*db, cl.new_run_id, std::nullopt, owner_alive_here);
    if (!cp.ok()) {
        command_line loud = ccl;
        loud.output = output_format::human;
        print_failure(loud, "automatic compensation of run " + cl.new_run_id + ": " + cp.message, cp.status,
                      cp.diags);
        return done();
    }
    if (!cp.executable()) return done();
    start_compensation(ccl, watch, std::move(db), cp);
    return done();
}

}  // namespace

std::optional<int> parse_run(command_line& cl, const arguments& a) {
    if (auto refused = parse_workflow_file(cl, a)) return refused;
    cl.interactive = a.has("interactive");
    cl.keep_going = a.has("keep-going");
    cl.check = a.has("check");
    cl.diff = a.has("diff");
    cl.tag = a.has("tag");
    cl.show_output = a.has("show-output") || cl.tag;
    if (auto refused = parse_backend(cl, a)) return refused;
    if (auto refused = parse_jobs(cl, a)) return refused;
    if (auto refused = parse_task_limits(cl, a)) return refused;
    if (a.has("timeout-seconds")) {
        cl.timeout_seconds = number_of<double>(a.value("timeout-seconds"));
        if (!cl.timeout_seconds || !(*cl.timeout_seconds > 0 && *cl.timeout_seconds <= 86400 * 365))
            return usage_error(cl, "--timeout-seconds must be a number of seconds greater than 0");
    }
    return parse_journal_db(cl, a);
}

int run_run(const command_line& cl, watchdog* watch) {
    session s = open_and_report(cl);
    if (!s.ok()) return status(s.status);
    const plan& p = *s.compiled;
    diagnostics empty = empty_expansions(p);
    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, s.diags);
        print_empty_expansions(cl, empty, s.diags);
    }

    auto refusal = refuse_unapproved(s);
    if (cl.check) refusal.reset();  // a preview has no effect to approve
    if (refusal) {
        if (!cl.interactive) return print_failure(cl, refusal->message, refusal->status, refusal->diags);
        if (!::isatty(STDIN_FILENO) || !::isatty(STDERR_FILENO))
            return print_failure(cl, "--interactive needs a terminal on stdin and stderr; nothing was run",
                                 exit_status::policy);
    }

    auto base = resolve_base_dir(cl.request());
    if (!base) return print_failure(cl, base.error().message, exit_status::usage);
    // A command that cannot start makes no run: nothing to resume, nothing to list.
    if (auto refused = refuse_missing_commands(cl, p, *base)) return *refused;

    // The journal before any effect: a journal that cannot be used is exit 5, nothing runs.
    std::optional<journal> db;
    if (!cl.no_journal) {
        int failed = 0;
        db = open_journal(cl, journal_access::write, failed);
        if (!db) return failed;
    }

    // What dead runs left on this host goes first: their cgroups here, their containers on
    // the engines this run uses (by the engine, in its preflight), their Slurm jobs.
    dead_run_sweep swept = sweep_dead_runs(db ? &*db : nullptr, false);
    if (swept.error) return print_journal_failure(cl, *swept.error);
    journal_run record;
    if (db) record = run_record(cl, s, *base);
    diagnostics diags = s.diags;
    diags.append(empty);
    diags.append(swept.warnings);
    if (cl.output == output_format::human) print_diagnostics_human(cl, swept.warnings);
    // `onFailure: automatic` (docs/CONTROL_FLOW.md, "Compensation"): the run's id is known
    // before it starts, so that its compensation finds it when it ends failed.
    const bool automatic =
        db && !cl.check && p.compensation.on_failure == compensation_spec::trigger::automatic;
    command_line rcl = cl;
    if (automatic) {
        rcl.new_run_id = new_run_id();
    }
    int code =
        execute_run(rcl, watch, p, diags, *base, std::move(db), std::move(swept), std::move(record), nullptr);
    if (!automatic) return code;
    return compensate_after_failure(rcl, watch, code);
}

int execute_run(const command_line& cl, watchdog* watch, const plan& p, const diagnostics& diags,
                const std::string& base_dir, std::optional<journal> db, dead_run_sweep swept,
                journal_run record, const resume_plan* resume, run_frontend* frontend) {
    sweep_report& leftovers = swept.removed;
    // The executor's cgroup leaves are made and removed on this thread, not the run's
    // (docs/DESIGN.md, "Executor"); declared first, it outlives the io_context.
    asio::thread_pool housekeeping(1);
    asio::io_context io(1);
    use_housekeeping_executor(io, housekeeping.get_executor());
    if (watch) watch->observe(io);
    // From here on agentctl's own output goes through queues, written by threads of the
    // CLI's: a reader that stalls never stalls supervision.
    output_queue out_queue(STDOUT_FILENO), err_queue(STDERR_FILENO);
    queue_sink out_sink(out_queue), err_sink(err_queue);
    redirect_standard_streams(&out_sink, &err_sink);
    struct restore_streams {
        ~restore_streams() { redirect_standard_streams(nullptr, nullptr); }
    } restore;
    if (frontend && frontend->prepare) frontend->prepare(io);
    output_gate gate(out_queue, err_queue, frontend ? frontend->gate : nullptr);
    host_environment host = process_environment();
    run_settings settings;
    settings.jobs = cl.jobs;
    settings.keep_going = cl.keep_going;
    if (!resume) settings.run_id = cl.new_run_id;  // empty: the engine makes one
    settings.check = cl.check;
    settings.diff = cl.diff;
    settings.base_dir = base_dir;
    settings.search_path = host.search_path;
    settings.host_env = host.lookup;
    settings.backend = cl.backend;
    settings.slurm = cl.slurm;
    settings.pass_output = frontend && frontend->pass_output;
    // Human output prints no succeeded task's streams from the report (--show-output prints
    // each as its task ends), so a run without a journal lets them go as tasks end
    // (docs/CAPTURE.md, "Without a journal").
    settings.keep_streams = cl.output != output_format::human || frontend;
    progress_printer progress(io, cl, p);
    progress.set_behind([&err_queue] { return err_queue.backlog() > 0; });
    if (std::string root = workspace_root_path(p, base_dir); root != current_folder())
        progress.set_workspace(root);
    run_collaborators with;
    with.events = frontend && frontend->events ? frontend->events : &progress;
    with.gate = &gate;
    with.expiry = frontend ? frontend->expiry : nullptr;
    with.watch = watch;
    std::optional<journal_recorder> recorder;
    if (db) {
        settings.record = std::move(record);
        recorder.emplace(io.get_executor(), std::move(*db));
        with.journal = &recorder->writer();
    }
    std::optional<terminal_approver> ask;
    if (cl.interactive) {
        ask.emplace(io, &progress);
        with.approvals = &*ask;
    }

    // First SIGINT/SIGTERM: graceful; a second one: kill at once.
    asio::cancellation_signal cancel;
    asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    int signals_seen = 0;
    std::string cancel_reason;  // the first reason the run was cancelled, said in the summary
    std::function<void()> wait_signal = [&] {
        signals.async_wait([&](boost::system::error_code ec, int sig) {
            if (ec) return;
            if (cancel_reason.empty())
                cancel_reason = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
            cancel.emit(signals_seen++ == 0 ? asio::cancellation_type::total
                                            : asio::cancellation_type::terminal);
            wait_signal();
        });
    };
    wait_signal();
    if (frontend)
        frontend->cancel = [&](const std::string& reason) {
            if (cancel_reason.empty()) cancel_reason = reason;
            ++signals_seen;  // a later SIGINT then kills at once, as a second one does
            cancel.emit(asio::cancellation_type::total);
        };
    // The reader of stdout went away (`agentctl run ... | head -1`): end the run as a
    // cancellation does, so that nothing it started outlives it.
    // The reader went away (noticed at the next write, or while idle: output_queue.hpp).
    bool reader_gone = false;
    auto stdout_closed = [&] {
        if (reader_gone) return;
        reader_gone = true;
        if (cancel_reason.empty()) cancel_reason = "the reader of agentctl's output went away";
        cancel.emit(asio::cancellation_type::total);
    };
    out_queue.set_on_broken([&] { asio::post(io, stdout_closed); });
    asio::steady_timer deadline(io);
    if (cl.timeout_seconds) {
        deadline.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(*cl.timeout_seconds)));
        deadline.async_wait([&](boost::system::error_code ec) {
            if (ec) return;
            if (cancel_reason.empty()) {
                char text[64];
                std::snprintf(text, sizeof text, "run timeout %g s reached (--timeout-seconds)",
                              *cl.timeout_seconds);
                cancel_reason = text;
            }
            cancel.emit(asio::cancellation_type::total);
        });
    }

    // The watchdog died (SIGKILL, the OOM killer): were agentctl to die now, nothing would stop
    // what the run started. It cannot be started again (it forks, and agentctl has threads by
    // now): stop the run as a cancellation does, and say so at once.
    std::optional<asio::posix::stream_descriptor> watchdog_exit;
    if (int fd = watch ? watch->exit_descriptor() : -1; fd >= 0) {
        watchdog_exit.emplace(io, fd);
        watchdog_exit->async_wait(
            asio::posix::stream_descriptor::wait_read, [&](boost::system::error_code ec) {
                if (ec) return;
                std::string why = "the watchdog (pid " + std::to_string(watch->pid()) +
                                  ") died: if agentctl died too, what the run started would keep running";
                standard_error().write("agentctl: warning: " + why + "; stopping the run\n");
                if (cancel_reason.empty()) cancel_reason = why;
                cancel.emit(asio::cancellation_type::total);
            });
    }

    std::optional<run_report> report;
    auto done = asio::bind_cancellation_slot(cancel.slot(), [&](run_report r) {
        report = std::move(r);
        signals.cancel();
        deadline.cancel();
        if (watchdog_exit) watchdog_exit->cancel();
        progress.stop();
        if (frontend && frontend->ended) frontend->ended();
    });
    if (resume)
        async_resume(io.get_executor(), *resume, std::move(settings), with, std::move(done));
    else
        async_run(io.get_executor(), p, std::move(settings), with, std::move(done));
    io.run();
    // The containers dead owners left on the engines the run used are the run's to report.
    for (auto& c : report->leftovers) leftovers.containers.push_back(std::move(c));
    std::optional<journal_error> unrecorded = recorder ? recorder->close(io) : std::nullopt;
    // With a journal the engine kept no results: reports read them back, one at a time.
    std::optional<journal> reader;
    std::optional<journal_results> results;
    if (recorder) {
        journal_open_options ro;
        ro.quick_check = false;
        auto r = journal::open(recorder->path(), journal_access::read, ro);
        if (r) {
            reader.emplace(std::move(*r));
            results.emplace(*reader, report->run_id);
        } else if (!unrecorded) {
            unrecorded = r.error();
        }
    }

    // The run is over: nothing is supervised any more, so the report may wait for the reader.
    out_queue.drain();
    err_queue.drain();
    redirect_standard_streams(nullptr, nullptr);
    // A `run` given its id beforehand is one with `onFailure: automatic`: the watchdog also
    // watches its compensation, and compensate_after_failure() ends it.
    if (watch && !(cl.command == "run" && !cl.new_run_id.empty())) watch->clean_exit();
    print_leftovers_human(cl, leftovers, &swept.dead_owners);
    if (reader_gone) {
        print_failure(cl, "the reader of agentctl's output went away (EPIPE); the run was cancelled",
                      exit_status::cancelled);
        return report->exit_code();
    }
    // A resume whose claim failed ran nothing: it has no task results to report.
    if (report->outcomes.size() != p.size())
        return print_failure(cl, report->error ? report->error->message : "the run did not start",
                             static_cast<exit_status>(report->exit_code()));
    if (frontend && frontend->report) {
        int status = frontend->report(*report, results ? &*results : nullptr);
        if (unrecorded && !report->error) return print_journal_failure(cl, *unrecorded);
        return status;
    }
    if (cl.output == output_format::human) {
        print_summary(cl, p, *report,
                      {cancel_reason, progress.retries(), progress.unshown(), recorder.has_value()},
                      results ? &*results : nullptr);
        if (resume) print_resume_summary(cl, p, *report);
    } else {
        fd_sink out(STDOUT_FILENO);
        diagnostics outcome_diags = diags;
        if (!cancel_reason.empty())
            outcome_diags.warning("run_cancelled", "", "the run was cancelled: " + cancel_reason);
        write_run_outcome(out, p, *report, outcome_diags, &leftovers, results ? &*results : nullptr,
                          streams_for(cl));
    }
    if (results && results->error)
        standard_error().write(
            "agentctl: warning: some results could not be read back from the journal, and are "
            "missing from the report: " +
            results->error->message + "\n");
    if (unrecorded && !report->error) return print_journal_failure(cl, *unrecorded);
    return report->exit_code();
}

}  // namespace agentctl::cli
