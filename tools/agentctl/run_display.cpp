// What `agentctl run` shows a person (run_display.hpp).
#include "run_display.hpp"

#include <agentctl/wire.hpp>

#include <boost/asio/read_until.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <istream>

namespace asio = boost::asio;

namespace agentctl::cli {

std::string bytes_text(std::uint64_t n) {
    char buf[32];
    if (n < 1024)
        std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
    else if (n < 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024);
    else if (n < 1024ull * 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1024 * 1024));
    else
        std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(n) / (1024.0 * 1024 * 1024));
    return buf;
}

std::string seconds_text(double s) {
    char buf[32];
    if (s < 1)
        std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
    else
        std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
    return buf;
}

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

std::string vars_text(const boost::json::object& vars) {
    std::string out;
    auto add = [&](std::string_view name, const boost::json::value& v) {
        std::string text = v.is_string() ? std::string(v.get_string()) : to_json(v);
        if (text.size() > 60) text = text.substr(0, 57) + "...";
        out += (out.empty() ? "" : " ") + std::string(name) + "=" + escape_for_terminal(text);
    };
    for (const auto& m : vars) {
        if (m.key() == "foreachIndex" || m.key() == "matrixIndex") continue;
        if (m.key() == "matrix" && m.value().is_object())
            for (const auto& axis : m.value().get_object()) add(axis.key(), axis.value());
        else
            add(m.key(), m.value());
    }
    return out;
}

std::string shell_word(const std::string& word) {
    bool plain = !word.empty();
    for (unsigned char c : word)
        plain =
            plain && (std::isalnum(c) ||
                      std::string_view("-_./=:,+@%").find(static_cast<char>(c)) != std::string_view::npos ||
                      c >= 0x80);
    if (plain) return word;
    std::string out = "'";
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string command_line_text(const plan& p, const plan_task& t) {
    const action_spec& a = p.action_of(t);
    const std::vector<std::string>& args = t.args ? *t.args : a.args;
    std::string out = shell_word(a.command);
    for (const auto& arg : args) out += " " + shell_word(arg);
    return escape_for_terminal(out);
}

int terminal_columns(int fd) {
    winsize ws{};
    if (::ioctl(fd, TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_col;
}

std::string fit_to_width(std::string line, int columns) {
    if (columns <= 0) return line;
    std::size_t budget = static_cast<std::size_t>(columns) - 1, chars = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if ((static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) continue;  // inside a character
        if (chars++ == budget) {
            line.resize(i);
            break;
        }
    }
    return line;
}

namespace {

// A string as people read it: plain when it is one line, else a block of lines.
bool multiline(const boost::json::value& v) {
    return v.is_string() && v.get_string().subview().find('\n') != std::string_view::npos;
}

std::string scalar_text(const boost::json::value& v) {
    return v.is_string() && !v.get_string().empty() ? std::string(v.get_string()) : to_json(v);
}

void string_block(std::string_view text, const std::string& indent, std::vector<std::string>& lines) {
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    for (;;) {
        auto nl = text.find('\n');
        lines.push_back(indent + std::string(text.substr(0, nl)));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

// `head` is what goes before the value on its first line ("key: " or "- ").
void readable_into(const boost::json::value& v, const std::string& indent, const std::string& head,
                   std::vector<std::string>& lines) {
    const bool empty = (v.is_array() && v.get_array().empty()) || (v.is_object() && v.get_object().empty());
    if (multiline(v)) {
        lines.push_back(indent + head + "|");
        string_block(v.get_string(), indent + "  ", lines);
        return;
    }
    if ((!v.is_array() && !v.is_object()) || empty) {
        lines.push_back(indent + head + scalar_text(v));
        return;
    }
    // Items and members one level deeper; an array's item starts on the "- " line.
    std::string inner = indent + "  ";
    if (head != "- ") lines.push_back(indent + head.substr(0, head.find_last_not_of(' ') + 1));
    bool first = head == "- ";
    auto put = [&](const boost::json::value& item, const std::string& item_head) {
        if (first) {
            // Continue the "- " line: the first member goes right after it.
            std::vector<std::string> sub;
            readable_into(item, indent + "  ", item_head, sub);
            sub[0] = indent + "- " + sub[0].substr(indent.size() + 2);
            lines.insert(lines.end(), sub.begin(), sub.end());
            first = false;
            return;
        }
        readable_into(item, head == "- " ? indent + "  " : inner, item_head, lines);
    };
    if (v.is_array())
        for (const auto& item : v.get_array()) put(item, "- ");
    else
        for (const auto& m : v.get_object()) put(m.value(), std::string(m.key()) + ": ");
}

}  // namespace

std::vector<std::string> readable_lines(const boost::json::value& v) {
    std::vector<std::string> lines;
    readable_into(v, "", "", lines);
    // A container or a text block at the top: no head line (the caller names the value),
    // the rest at the left.
    if (!lines.empty() && (lines[0].empty() || lines[0] == "|")) {
        lines.erase(lines.begin());
        for (auto& l : lines) l.erase(0, std::min<std::size_t>(2, l.find_first_not_of(' ')));
    }
    return lines;
}

// ---- progress_printer ----

progress_printer::progress_printer(asio::io_context& io, const command_line& cl, const plan& p)
    : cl_(cl),
      plan_(p),
      tty_(::isatty(STDERR_FILENO) && cl.output == output_format::human && !cl.quiet),
      color_(use_color(cl, STDERR_FILENO)),
      stdout_tty_(::isatty(STDOUT_FILENO)),
      timer_(io),
      err_(standard_error()),
      out_(standard_output()) {
    for (const auto& t : p.nodes)
        if (t.kind != plan_task::kind_t::aggregate)
            countable_ += t.kind == plan_task::kind_t::child ? t.child_count : 1;
    if (tty_) tick();
}

void progress_printer::on_event(const run_event& e) {
    if (e.kind == run_event::kind_t::warning) {
        if (cl_.output == output_format::human) {
            diagnostics d;
            d.add(*e.warning);
            print_diagnostics_human(cl_, d);
        }
        return;
    }
    // Shown as the task_finished events it stands for (a jsonl line each).
    if (e.kind == run_event::kind_t::tasks_not_started)
        return each_task_finished(e, [this](const run_event& one) { on_event(one); });
    const plan_task& t = plan_.node(e.task_index);
    running_ = e.running;
    if (cl_.output == output_format::jsonl) return write_jsonl(e);
    if (e.kind == run_event::kind_t::attempt_failed) {
        ++retries_.attempts;
        if (retried_.empty()) retried_.resize(plan_.size());
        if (!retried_[e.task_index]) {
            retried_[e.task_index] = true;
            ++retries_.tasks;
        }
        // With -v each retry as it happens: which attempt failed, why, and what comes next;
        // else one line in the summary (a batch of flaky items would bury everything else).
        if (cl_.output != output_format::human || cl_.quiet || !cl_.verbose) return;
        clear_line();
        say_workspace();
        std::string vars = vars_text(plan_.vars_of(e.task_index));
        std::string line = paint("33", "↻ ") + paint("1", plan_.task_id(e.task_index)) + " attempt " +
                           std::to_string(e.attempt) + " of " + std::to_string(t.retry.max_attempts) + " " +
                           std::string(to_string(e.result->state)) + (vars.empty() ? "" : " (" + vars + ")");
        if (e.result->error) line += ": " + escape_for_terminal(e.result->error->message);
        line +=
            "; retrying" + (e.retry_in_ms ? " in " + seconds_text(e.retry_in_ms / 1000.0) : std::string());
        err_.write(line + "\n");
        return;
    }
    if (e.kind != run_event::kind_t::task_finished || t.kind == plan_task::kind_t::aggregate) return;
    ++done_;
    const task_result& r = *e.result;
    bool bad = r.state != task_state::succeeded && r.state != task_state::skipped;
    failed_ += bad;
    if (cl_.output != output_format::human) return;
    if (cl_.show_output)
        show_output(e.task_index, r);
    else if (std::size_t n = stdout_of(r).size()) {
        ++unshown_.tasks;
        unshown_.bytes += n;
    }
    // Tasks a cancellation kept from starting are summed up in one line at the end.
    if (r.state == task_state::cancelled && r.attempts == 0) return;
    if (bad || cl_.verbose) {
        clear_line();
        if (bad && r.state != task_state::cancelled) say_workspace();
        std::string vars = vars_text(plan_.vars_of(e.task_index));
        std::string line = (bad ? paint("1;31", "✗ ") : paint("32", "✓ ")) +
                           paint("1", plan_.task_id(e.task_index)) + " " + std::string(to_string(r.state)) +
                           (vars.empty() ? "" : " (" + vars + ")");
        if (r.error) line += ": " + escape_for_terminal(r.error->message);
        err_.write(line + "\n");
    }
}

void progress_printer::say_workspace() {
    if (workspace_.empty()) return;
    err_.write(paint("1;33", "agentctl: ") + "tasks run in the workspace root " +
               escape_for_terminal(workspace_) + ", not in the current folder: relative paths start there" +
               (cl_.workspace ? "" : " (--workspace DIR sets its base)") + "\n");
    workspace_.clear();  // once
}

void progress_printer::show_output(std::uint32_t index, const task_result& r) {
    std::string_view text = stdout_of(r);
    if (text.empty()) return;
    // Like parallel --tag: the item when the task has one, else the task id.
    std::string tag;
    if (cl_.tag) {
        const std::string id = plan_.task_id(index);
        const boost::json::object vars = plan_.vars_of(index);
        tag = id;
        for (const auto& m : vars)
            if (m.key() != "foreachIndex" && m.key() != "matrixIndex" && m.key() != "matrix") {
                tag = m.value().is_string() ? std::string(m.value().get_string()) : to_json(m.value());
                break;
            }
        if (tag == id && vars.contains("matrix")) tag = vars_text(vars);
        tag = escape_for_terminal(tag) + "\t";
    }
    // One write per task: its lines stay together whatever else finishes meanwhile.
    std::string block;
    block.reserve(text.size() + 64);
    while (!text.empty()) {
        auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        block += tag;
        // A terminal sees printable text only; a pipe or file gets the bytes as captured.
        block += stdout_tty_ ? escape_for_terminal(line) : std::string(line);
        block += '\n';
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
    clear_line();
    out_.write(block);
}

void progress_printer::stop() {
    timer_.cancel();
    clear_line();
}

std::string progress_printer::paint(const char* code, std::string_view text) const {
    return cli::paint(color_, code, text);
}

void progress_printer::write_jsonl(const run_event& e) {
    string_sink s;
    {
        json_writer w(s);
        write_event(w, plan_, e);
    }
    s.text.push_back('\n');
    out_.write(s.text);
}

void progress_printer::tick() {
    // A redraw waits for a reader that is behind (a paused terminal): it would only pile up.
    if (!behind_ || !behind_()) draw();
    timer_.expires_after(std::chrono::milliseconds(200));
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) tick();
    });
}

void progress_printer::draw() {
    if (paused_) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count();
    err_.write(progress_line(done_, countable_, running_, failed_, elapsed));
    drawn_ = true;
}

std::string progress_line(std::size_t done, std::size_t total, std::uint32_t running, std::size_t failed,
                          double elapsed) {
    double rate = elapsed > 0.2 ? static_cast<double>(done) / elapsed : 0;
    std::size_t percent = total ? done * 100 / total : 100;
    std::string line = std::to_string(done) + "/" + std::to_string(total) + " done (" +
                       std::to_string(percent) + "%) · " + std::to_string(running) + " running · " +
                       std::to_string(failed) + " failed · " + seconds_text(elapsed);
    if (rate > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " · %.0f/s", rate);
        line += buf;
        if (done < total) line += " · ETA " + seconds_text(static_cast<double>(total - done) / rate);
    }
    // Never wider than the terminal: a wrapped line cannot be redrawn in place.
    return "\r\x1b[2K" + fit_to_width(std::move(line), terminal_columns(STDERR_FILENO));
}

void progress_printer::pause() {
    paused_ = true;
    clear_line();
}

void progress_printer::resume() {
    paused_ = false;
}

void progress_printer::clear_line() {
    if (drawn_) err_.write("\r\x1b[2K");
    drawn_ = false;
}

// ---- terminal_approver ----

terminal_approver::terminal_approver(asio::io_context& io, progress_printer* progress)
    : progress_(progress), input_(io, ::dup(STDIN_FILENO)) {}

void terminal_approver::async_approve_impl(const plan& p, std::uint32_t idx,
                                           asio::any_completion_handler<void(approval_answer)> handler) {
    const plan_task t = p.task(idx);
    const action_spec& a = p.action_of(t);
    std::string vars = vars_text(t.vars);
    std::string question = "approve task \"" + t.id + "\"" + (vars.empty() ? "" : " (" + vars + ")") + ": " +
                           std::string(to_string(a.kind)) + ", isolation " +
                           std::string(to_string(a.isolation)) + "\n  " + command_line_text(p, t) +
                           (t.argv_deferred ? "  (arguments rendered when it starts)" : "") +
                           "\n[y]es / [n]o / [a]ll: ";
    if (progress_) progress_->pause();
    standard_error().write(question);
    // swap, not move-assign: Boost 1.81's any_completion_handler move assignment recurses forever.
    handler_.swap(handler);
    read_answer();
}

void terminal_approver::read_answer() {
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
        if (progress_) progress_->resume();
        auto h = std::move(handler_);
        std::move(h)(answer);
    });
}

// ---- the summary ----

void print_summary(const command_line& cl, const plan& p, const run_report& r, const summary_context& context,
                   result_source* results) {
    bool color = use_color(cl, STDERR_FILENO);
    auto paint = [&](const char* code, std::string_view text) { return cli::paint(color, code, text); };
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(p.size(), r.outcomes.size()));
    std::size_t counts[7] = {};
    std::size_t total = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (p.node(i).kind == plan_task::kind_t::aggregate) continue;
        ++counts[static_cast<int>(r.outcomes[i].state)];
        ++total;
    }
    std::string out;
    // Failed tasks with the tail of their stderr (at most 10 tasks, 5 lines each), read back
    // from the journal one at a time when the report does not hold them.
    std::size_t shown = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        const task_state state = r.outcomes[i].state;
        if (p.node(i).kind == plan_task::kind_t::aggregate) continue;
        if (state == task_state::succeeded || state == task_state::skipped || state == task_state::cancelled)
            continue;
        if (++shown > 10) continue;
        std::optional<task_result> loaded;
        if (i < r.tasks.size())
            loaded = r.tasks[i];
        else if (results)
            results->each(i, i + 1, true, [&](std::uint32_t, task_result& t) {
                loaded = std::move(t);
                return false;
            });
        std::string vars = vars_text(p.vars_of(i));
        std::string why = loaded && loaded->error ? escape_for_terminal(loaded->error->message)
                                                  : std::string(to_string(state));
        out += paint("1;31", "failed ") + paint("1", p.task_id(i)) + (vars.empty() ? "" : " (" + vars + ")") +
               ": " + why + "\n";
        std::string_view err = loaded ? stderr_of(*loaded) : std::string_view();
        auto tail = last_lines(err, 5);
        std::size_t lines = 0;
        for (std::string_view rest = err; !rest.empty();) {
            ++lines;
            auto nl = rest.find('\n');
            rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
        }
        if (lines > tail.size())
            out += "  | … " + std::to_string(lines - tail.size()) + " earlier stderr lines not shown (" +
                   std::to_string(lines) + " in all; --output json has them)\n";
        for (const auto& line : tail) out += "  | " + line + "\n";
    }
    if (shown > 10) out += "... and " + std::to_string(shown - 10) + " more failed tasks\n";
    // Tasks a cancellation kept from starting: one line, not one each.
    std::size_t unstarted = 0;
    std::string unstarted_ids;
    for (std::uint32_t i = 0; i < n; ++i)
        if (p.node(i).kind != plan_task::kind_t::aggregate && r.outcomes[i].state == task_state::cancelled &&
            r.outcomes[i].attempts == 0 && ++unstarted <= 5)
            unstarted_ids += (unstarted > 1 ? ", " : "") + p.task_id(i);
    if (r.state == run_state::cancelled)
        out +=
            paint("1;33", "agentctl: ") + "the run was cancelled" +
            (context.cancel_reason.empty() ? "" : " (" + escape_for_terminal(context.cancel_reason) + ")") +
            "\n";
    if (unstarted > 0) {
        if (unstarted > 5) unstarted_ids += ", …";
        out += std::to_string(unstarted) + (unstarted == 1 ? " task" : " tasks") +
               " not started: " + escape_for_terminal(unstarted_ids) + "\n";
    }
    if (r.error) out += paint("1;31", "agentctl: ") + escape_for_terminal(r.error->message) + "\n";
    // What the tasks printed is data (in the journal, or the JSON report), not agentctl's
    // stdout, which holds the declared outputs: a run that printed neither says where it is,
    // so that `agentctl run wf.yaml > out.txt` leaving out.txt empty is never a mystery.
    if (context.unshown.tasks > 0 && p.outputs.empty() && !cl.quiet)
        out += std::to_string(context.unshown.tasks) + (context.unshown.tasks == 1 ? " task" : " tasks") +
               " wrote " + bytes_text(context.unshown.bytes) +
               " to stdout, not printed: --show-output prints each task's as it ends" +
               (context.journaled ? "; agentctl runs show " + r.run_id + " --task ID --stdout prints one"
                                  : "; --output json has them") +
               "\n";
    if (context.retries.attempts > 0 && !cl.verbose && !cl.quiet)
        out += paint("33", "↻ ") + std::to_string(context.retries.tasks) +
               (context.retries.tasks == 1 ? " task was" : " tasks were") + " retried, " +
               std::to_string(context.retries.attempts) +
               (context.retries.attempts == 1 ? " retry" : " retries") + " in all (-v shows each)\n";

    standard_error().write(out);

    // A run that failed before any task started has no outputs worth showing.
    bool started = false;
    for (const auto& o : r.outcomes) started = started || o.attempts > 0;
    // Without spec.outputs the output is every task's: for a batch that is noise, so only -v
    // shows it (--show-output shows each task's stdout as it finishes).
    bool declared = !p.outputs.empty() || cl.verbose;
    if (!cl.quiet && declared && (started || !r.error) && r.output.is_object()) {
        // Readable: strings as text, structures as indented "key: value" lines; long values
        // are cut (all of it with -v, or --output json).
        const std::size_t max_lines = cl.verbose ? std::size_t(-1) : 40;
        std::string outputs;
        for (const auto& m : r.output.get_object()) {
            std::vector<std::string> lines = readable_lines(m.value());
            std::string key = escape_for_terminal(m.key());
            if (lines.size() == 1 && !m.value().is_array() && !m.value().is_object() &&
                !multiline(m.value())) {
                outputs += "  " + key + ": " + escape_for_terminal(lines[0]) + "\n";
                continue;
            }
            outputs += "  " + key + ":\n";
            for (std::size_t i = 0; i < lines.size() && i < max_lines; ++i)
                outputs += "    " + escape_for_terminal(lines[i]) + "\n";
            if (lines.size() > max_lines)
                outputs += "    … " + std::to_string(lines.size() - max_lines) +
                           " more lines (-v or --output json shows all)\n";
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

}  // namespace agentctl::cli
