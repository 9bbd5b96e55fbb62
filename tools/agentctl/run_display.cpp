// What `agentctl run` shows a person (run_display.hpp).
#include "run_display.hpp"

#include <agentctl/wire.hpp>

#include <boost/asio/read_until.hpp>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <istream>

namespace asio = boost::asio;

namespace agentctl::cli {

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

// ---- progress_printer ----

progress_printer::progress_printer(asio::io_context& io, const command_line& cl, const plan& p)
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

void progress_printer::on_event(const run_event& e) {
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
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count();
    double rate = elapsed > 0.2 ? done_ / elapsed : 0;
    std::string line = "\r\x1b[2K" + std::to_string(done_) + "/" + std::to_string(countable_) + " done · " +
                       std::to_string(running_) + " running · " + std::to_string(failed_) + " failed";
    if (rate > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " · %.0f/s", rate);
        line += buf;
        if (done_ < countable_) line += " · ETA " + seconds_text((countable_ - done_) / rate);
    }
    err_.write(line);
    drawn_ = true;
}

void progress_printer::clear_line() {
    if (drawn_) err_.write("\r\x1b[2K");
    drawn_ = false;
}

// ---- terminal_approver ----

terminal_approver::terminal_approver(asio::io_context& io) : input_(io, ::dup(STDIN_FILENO)) {}

void terminal_approver::async_approve(const plan& p, std::uint32_t idx,
                                      asio::any_completion_handler<void(approval_answer)> handler) {
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
        auto h = std::move(handler_);
        std::move(h)(answer);
    });
}

// ---- the summary ----

void print_summary(const command_line& cl, const plan& p, const run_report& r, std::string_view workspace) {
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
    // A relative path that was not found is the usual surprise when running from elsewhere.
    if (shown > 0 && !workspace.empty())
        out += "tasks ran in the workspace root " + escape_for_terminal(workspace) +
               " (relative paths start there" + (cl.workspace ? ")" : "; --workspace DIR sets its base)") +
               "\n";
    if (r.error) out += paint("1;31", "agentctl: ") + escape_for_terminal(r.error->message) + "\n";

    standard_error().write(out);

    // A run that failed before any task started has no outputs worth showing.
    bool started = false;
    for (const auto& t : r.tasks) started = started || t.attempts > 0;
    if (!cl.quiet && (started || !r.error) && r.output.is_object()) {
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

}  // namespace agentctl::cli
