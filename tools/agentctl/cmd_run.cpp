// agentctl run FILE: compile, then run the plan on one io_context with live progress.
#include "cli.hpp"
#include "journal_cli.hpp"
#include "output_queue.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

#include <cctype>
#include <istream>

namespace asio = boost::asio;

namespace agentctl::cli {
namespace {

std::string seconds_text(double s) {
    char buf[32];
    if (s < 1)
        std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
    else
        std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
    return buf;
}

// Child output can hold anything; a terminal must only ever see printable text.
std::string escape_for_terminal(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\t' || (c >= 0x20 && c != 0x7f))
            out.push_back(static_cast<char>(c));
        else {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

std::vector<std::string> last_lines(std::string_view text, std::size_t n) {
    std::vector<std::string> lines;
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    while (!text.empty() && lines.size() < n) {
        auto nl = text.rfind('\n');
        std::string_view line = nl == std::string_view::npos ? text : text.substr(nl + 1);
        lines.insert(lines.begin(), escape_for_terminal(line.substr(0, 400)));
        if (nl == std::string_view::npos) break;
        text = text.substr(0, nl);
    }
    return lines;
}

/// Live progress and failure reports: a redrawn line on a terminal, plain lines in a log.
class progress_printer final : public event_sink {
public:
    progress_printer(asio::io_context& io, const command_line& cl, const plan& p)
        : cl_(cl),
          plan_(p),
          tty_(::isatty(STDERR_FILENO) && cl.output == output_format::human && !cl.quiet),
          color_(use_color(cl, STDERR_FILENO)),
          timer_(io),
          err_(standard_error()),
          out_(standard_output()) {
        for (const auto& t : p.tasks) countable_ += t.kind != plan_task::kind_t::aggregate;
        if (tty_) tick();
    }

    void on_event(const run_event& e) override {
        if (e.kind == run_event::kind_t::warning) {
            if (cl_.output == output_format::human) {
                diagnostics d;
                d.add(*e.warning);
                print_diagnostics_human(cl_, d);
            }
            return;
        }
        const plan_task& t = plan_.tasks[e.task_index];
        running_ = e.running;
        if (cl_.output == output_format::jsonl) return write_jsonl(e);
        if (e.kind != run_event::kind_t::task_finished || t.kind == plan_task::kind_t::aggregate) return;
        ++done_;
        const task_result& r = *e.result;
        bool bad = r.state != task_state::succeeded && r.state != task_state::skipped;
        failed_ += bad;
        if (cl_.output != output_format::human) return;
        if (bad || cl_.verbose) {
            clear_line();
            std::string line = (bad ? paint("1;31", "✗ ") : paint("32", "✓ ")) + paint("1", t.id) + "  " +
                               std::string(to_string(r.state));
            if (r.error) line += ": " + escape_for_terminal(r.error->message);
            err_.write(line + "\n");
        }
    }

    void stop() {
        timer_.cancel();
        clear_line();
    }

    /// Whether stderr's reader lags; redraws are skipped meanwhile.
    void set_behind(std::function<bool()> behind) { behind_ = std::move(behind); }

private:
    std::string paint(const char* code, std::string_view text) const {
        return cli::paint(color_, code, text);
    }

    void write_jsonl(const run_event& e) {
        string_sink s;
        {
            json_writer w(s);
            write_event(w, plan_, e);
        }
        s.text.push_back('\n');
        out_.write(s.text);
    }

    void tick() {
        // A redraw waits for a reader that is behind (a paused terminal): it would only pile up.
        if (!behind_ || !behind_()) draw();
        timer_.expires_after(std::chrono::milliseconds(200));
        timer_.async_wait([this](boost::system::error_code ec) {
            if (!ec) tick();
        });
    }

    void draw() {
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count();
        double rate = elapsed > 0.2 ? done_ / elapsed : 0;
        std::string line = "\r\x1b[2K" + std::to_string(done_) + "/" + std::to_string(countable_) +
                           " done · " + std::to_string(running_) + " running · " + std::to_string(failed_) +
                           " failed";
        if (rate > 0) {
            char buf[64];
            std::snprintf(buf, sizeof buf, " · %.0f/s", rate);
            line += buf;
            if (done_ < countable_) line += " · ETA " + seconds_text((countable_ - done_) / rate);
        }
        err_.write(line);
        drawn_ = true;
    }

    void clear_line() {
        if (drawn_) err_.write("\r\x1b[2K");
        drawn_ = false;
    }

    const command_line& cl_;
    const plan& plan_;
    bool tty_;
    bool color_;
    asio::steady_timer timer_;
    json_sink& err_;
    json_sink& out_;
    std::size_t countable_ = 0, done_ = 0, failed_ = 0;
    std::uint32_t running_ = 0;
    bool drawn_ = false;
    std::function<bool()> behind_;
    std::chrono::steady_clock::time_point begun_ = std::chrono::steady_clock::now();
};

/// Asks on the terminal, one task at a time: yes / no / all.
class terminal_approver final : public approver {
public:
    explicit terminal_approver(asio::io_context& io) : input_(io, ::dup(STDIN_FILENO)) {}

    void async_approve(const plan& p, std::uint32_t idx,
                       asio::any_completion_handler<void(approval_answer)> handler) override {
        const plan_task& t = p.tasks[idx];
        const action_spec& a = p.action_of(t);
        std::string question = "approve task \"" + t.id + "\" (" + std::string(to_string(a.kind)) + " " +
                               escape_for_terminal(a.command) + ", isolation " +
                               std::string(to_string(a.isolation)) + ")? [y]es / [n]o / [a]ll: ";
        standard_error().write(question);
        // swap, not move-assign: Boost 1.81's any_completion_handler move assignment recurses forever.
        handler_.swap(handler);
        read_answer();
    }

private:
    void read_answer() {
        asio::async_read_until(input_, buffer_, '\n', [this](boost::system::error_code ec, std::size_t) {
            std::string line;
            if (!ec) {
                std::istream in(&buffer_);
                std::getline(in, line);
            }
            approval_answer answer = approval_answer::no;  // end of input or an error: deny
            if (!ec) {
                std::string word;
                for (char c : line)
                    if (!std::isspace(static_cast<unsigned char>(c)))
                        word.push_back(static_cast<char>(std::tolower(c)));
                if (word == "y" || word == "yes")
                    answer = approval_answer::yes;
                else if (word == "a" || word == "all")
                    answer = approval_answer::all;
                else if (word == "n" || word == "no")
                    answer = approval_answer::no;
                else {
                    standard_error().write("please answer y, n or a: ");
                    return read_answer();
                }
            }
            auto h = std::move(handler_);
            std::move(h)(answer);
        });
    }

    asio::posix::stream_descriptor input_;
    asio::streambuf buffer_;
    asio::any_completion_handler<void(approval_answer)> handler_;
};

void print_summary(const command_line& cl, const plan& p, const run_report& r) {
    bool color = use_color(cl, STDERR_FILENO);
    auto paint = [&](const char* code, std::string_view text) { return cli::paint(color, code, text); };
    std::size_t counts[7] = {};
    std::size_t total = 0;
    for (std::size_t i = 0; i < p.tasks.size(); ++i) {
        if (p.tasks[i].kind == plan_task::kind_t::aggregate) continue;
        ++counts[static_cast<int>(r.tasks[i].state)];
        ++total;
    }
    std::string out;
    // Failed tasks with the tail of their stderr (at most 10 tasks, 5 lines each).
    std::size_t shown = 0;
    for (std::size_t i = 0; i < p.tasks.size(); ++i) {
        const task_result& t = r.tasks[i];
        if (p.tasks[i].kind == plan_task::kind_t::aggregate) continue;
        if (t.state == task_state::succeeded || t.state == task_state::skipped ||
            t.state == task_state::cancelled)
            continue;
        if (++shown > 10) continue;
        out += paint("1;31", "failed ") + paint("1", p.tasks[i].id) + ": " +
               (t.error ? escape_for_terminal(t.error->message) : std::string(to_string(t.state))) + "\n";
        for (const auto& line : last_lines(stderr_of(t), 5)) out += "  | " + line + "\n";
    }
    if (shown > 10) out += "... and " + std::to_string(shown - 10) + " more failed tasks\n";
    if (r.error) out += paint("1;31", "agentctl: ") + escape_for_terminal(r.error->message) + "\n";

    standard_error().write(out);

    if (!cl.quiet && r.output.is_object()) {
        std::string outputs;
        for (const auto& m : r.output.get_object()) {
            std::string v = m.value().is_string() ? std::string(m.value().get_string()) : to_json(m.value());
            if (!cl.verbose && v.size() > 300)
                v = v.substr(0, 300) + "… (" + std::to_string(v.size()) + " bytes)";
            outputs += "  " + std::string(m.key()) + ": " + escape_for_terminal(v) + "\n";
        }
        if (!outputs.empty()) standard_output().write("outputs:\n" + outputs);
    }

    static const char* names[7] = {"succeeded",         "failed",       "timed out", "cancelled",
                                   "over output limit", "spawn failed", "skipped"};
    std::string detail;
    for (int s = 0; s < 7; ++s)
        if (counts[s]) detail += (detail.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + names[s];
    const char* state_color = r.state == run_state::succeeded ? "1;32" : "1;31";
    std::string last = "run " + r.run_id + " " + paint(state_color, to_string(r.state)) + " in " +
                       seconds_text(r.duration.count() / 1000.0) + ": " + std::to_string(total) +
                       (total == 1 ? " task" : " tasks") + (detail.empty() ? "" : " (" + detail + ")") + "\n";
    standard_error().write(last);
}

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

    output_gate(output_queue& out, output_queue& err) : out_(out), err_(err) {}

    bool open() override {
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
    bool said_ = false;
};

}  // namespace

int run_run(const command_line& cl, watchdog* watch) {
    session s = open_and_report(cl);
    if (!s.ok()) return status(s.status);
    const plan& p = *s.compiled;
    if (cl.output == output_format::human) print_diagnostics_human(cl, s.diags);

    if (auto refusal = refuse_unapproved(s)) {
        if (!cl.interactive) return print_failure(cl, refusal->message, refusal->status, refusal->diags);
        if (!::isatty(STDIN_FILENO) || !::isatty(STDERR_FILENO))
            return print_failure(cl, "--interactive needs a terminal on stdin and stderr; nothing was run",
                                 exit_status::policy);
    }

    std::string error;
    auto base = resolve_base_dir(cl.request(), error);
    if (!base) return print_failure(cl, error, exit_status::usage);

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
    sweep_report leftovers = std::move(swept.removed);
    journal_run record;
    if (db) record = run_record(cl, s, *base);
    diagnostics diags = s.diags;
    diags.append(swept.warnings);
    if (cl.output == output_format::human) print_diagnostics_human(cl, swept.warnings);
    return execute_run(cl, watch, p, diags, *base, std::move(db), std::move(leftovers), std::move(record),
                       nullptr);
}

int execute_run(const command_line& cl, watchdog* watch, const plan& p, const diagnostics& diags,
                const std::string& base_dir, std::optional<journal> db, sweep_report leftovers,
                journal_run record, const resume_plan* resume) {
    asio::io_context io(1);
    if (watch) watch->observe(io);
    // From here on agentctl's own output goes through queues, written by threads of the
    // CLI's: a reader that stalls never stalls supervision.
    output_queue out_queue(STDOUT_FILENO), err_queue(STDERR_FILENO);
    queue_sink out_sink(out_queue), err_sink(err_queue);
    redirect_standard_streams(&out_sink, &err_sink);
    struct restore_streams {
        ~restore_streams() { redirect_standard_streams(nullptr, nullptr); }
    } restore;
    output_gate gate(out_queue, err_queue);
    host_environment host = process_environment();
    run_options options;
    options.jobs = cl.jobs;
    options.keep_going = cl.keep_going;
    options.base_dir = base_dir;
    options.search_path = host.search_path;
    options.host_env = host.lookup;
    options.backend = cl.backend;
    options.slurm = cl.slurm;
    progress_printer progress(io, cl, p);
    progress.set_behind([&err_queue] { return err_queue.backlog() > 0; });
    options.events = &progress;
    options.gate = &gate;
    options.watch = watch;
    options.leftovers = &leftovers;
    std::optional<journal_recorder> recorder;
    if (db) {
        options.record = std::move(record);
        recorder.emplace(io.get_executor(), std::move(*db));
        options.journal = &recorder->writer();
    }
    std::optional<terminal_approver> ask;
    if (cl.interactive) {
        ask.emplace(io);
        options.approvals = &*ask;
    }

    // First SIGINT/SIGTERM: graceful; a second one: kill at once.
    asio::cancellation_signal cancel;
    asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    int signals_seen = 0;
    std::function<void()> wait_signal = [&] {
        signals.async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            cancel.emit(signals_seen++ == 0 ? asio::cancellation_type::total
                                            : asio::cancellation_type::terminal);
            wait_signal();
        });
    };
    wait_signal();
    // The reader of stdout went away (`agentctl run ... | head -1`): end the run as a
    // cancellation does, so that nothing it started outlives it.
    // The reader went away (noticed at the next write, or while idle: output_queue.hpp).
    bool reader_gone = false;
    auto stdout_closed = [&] {
        if (reader_gone) return;
        reader_gone = true;
        cancel.emit(asio::cancellation_type::total);
    };
    out_queue.set_on_broken([&] { asio::post(io, stdout_closed); });
    asio::steady_timer deadline(io);
    if (cl.timeout_seconds) {
        deadline.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(*cl.timeout_seconds)));
        deadline.async_wait([&](boost::system::error_code ec) {
            if (!ec) cancel.emit(asio::cancellation_type::total);
        });
    }

    std::optional<run_report> report;
    auto done = asio::bind_cancellation_slot(cancel.slot(), [&](run_report r) {
        report = std::move(r);
        signals.cancel();
        deadline.cancel();
        progress.stop();
    });
    if (resume)
        async_resume(io.get_executor(), *resume, std::move(options), std::move(done));
    else
        async_run(io.get_executor(), p, std::move(options), std::move(done));
    io.run();
    std::optional<journal_error> unrecorded = recorder ? recorder->close(io) : std::nullopt;
    // Reports read the streams the engine let go back from the journal.
    std::optional<journal> reader;
    std::optional<journal_streams> streams;
    if (recorder) {
        journal_open_options ro;
        ro.quick_check = false;
        if (auto r = journal::open(recorder->path(), journal_access::read, ro)) {
            reader.emplace(std::move(*r));
            streams.emplace(*reader, report->run_id);
        }
    }

    // The run is over: nothing is supervised any more, so the report may wait for the reader.
    out_queue.drain();
    err_queue.drain();
    redirect_standard_streams(nullptr, nullptr);
    if (watch) watch->clean_exit();
    print_leftovers_human(cl, leftovers);
    if (reader_gone) {
        print_failure(cl, "the reader of agentctl's output went away (EPIPE); the run was cancelled",
                      exit_status::cancelled);
        return report->exit_code();
    }
    // A resume whose claim failed ran nothing: it has no task results to report.
    if (report->tasks.size() != p.tasks.size())
        return print_failure(cl, report->error ? report->error->message : "the run did not start",
                             static_cast<exit_status>(report->exit_code()));
    if (cl.output == output_format::human) {
        if (streams) restore_failed_streams(p, *report, *streams);
        print_summary(cl, p, *report);
        if (resume) print_resume_summary(cl, p, *report);
    } else {
        fd_sink out(STDOUT_FILENO);
        write_run_outcome(out, p, *report, diags, &leftovers, streams ? &*streams : nullptr);
    }
    if (streams && streams->error)
        standard_error().write(
            "agentctl: warning: some captured output could not be read back from the journal, and "
            "is missing from the report: " +
            streams->error->message + "\n");
    if (unrecorded && !report->error) return print_journal_failure(cl, *unrecorded);
    return report->exit_code();
}

}  // namespace agentctl::cli
