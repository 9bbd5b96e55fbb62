// What `agentctl run` shows a person: the live progress line, the approval prompt, the
// failure lines and the closing summary. The run itself is in cmd_run.cpp.
#pragma once

#include "cli.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/events.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::cli {

/// "512 bytes", "3.4 KiB", "1.2 MiB".
std::string bytes_text(std::uint64_t n);

/// "850 ms", "2.50 s", "12.3 s".
std::string seconds_text(double s);

/// Child output can hold anything; a terminal must only ever see printable text.
std::string escape_for_terminal(std::string_view s);

/// The last `n` lines of `text`, escaped and cut to 400 bytes each.
std::vector<std::string> last_lines(std::string_view text, std::size_t n);

/// A foreach or matrix child's bindings (plan::vars_of()) for people: `file=f13.txt`,
/// `os=linux arch=arm64`; empty for other tasks. Index variables are left out; long values
/// are cut.
std::string vars_text(const boost::json::object& vars);

/// `word` as a POSIX shell reads it back: as it is when plain, else in single quotes.
std::string shell_word(const std::string& word);

/// A task's command line for people: the command and its arguments (rendered when the plan
/// could render them), each quoted as a shell would need it, escaped for a terminal.
std::string command_line_text(const plan& p, const plan_task& t);

/// The width of the terminal on `fd` in columns; 0 when it is not a terminal or unknown.
int terminal_columns(int fd);

/// The first `columns` - 1 characters (code points) of `line` (which holds no escapes), so
/// that it never wraps; all of it when `columns` is 0.
std::string fit_to_width(std::string line, int columns);

/// The live progress line, ready to write to a terminal's stderr: it returns to the line's start
/// and clears it, then `12/40 done (30%) · 4 running · 0 failed · 3.20 s · 4/s · ETA 7.00 s`,
/// cut to the terminal's width.
std::string progress_line(std::size_t done, std::size_t total, std::uint32_t running, std::size_t failed,
                          double elapsed);

/// `v` for people, like YAML: `key: value` and `- item` lines indented by depth, strings
/// unquoted, a string of several lines as an indented block after `|`. At the top there is
/// no head line: a structure's members, or a text's lines, start at the left.
std::vector<std::string> readable_lines(const boost::json::value& v);

/// Retries during a run: failed attempts that were run again, and the tasks they belong to.
struct retry_count {
    std::size_t attempts = 0;
    std::size_t tasks = 0;
};

/// Task output a run captured and did not print (no --show-output).
struct unshown_output {
    std::size_t tasks = 0;    ///< tasks that wrote to stdout
    std::uint64_t bytes = 0;  ///< what they wrote
};

/// Live progress and failure reports: a redrawn line on a terminal, plain lines in a log.
class progress_printer final : public event_sink {
public:
    progress_printer(boost::asio::io_context& io, const command_line& cl, const plan& p);

    void on_event(const run_event& e) override;

    void stop();

    /// While an approval prompt waits: the line cleared and not redrawn.
    void pause();
    void resume();

    /// Whether stderr's reader lags; redraws are skipped meanwhile.
    void set_behind(std::function<bool()> behind) { behind_ = std::move(behind); }

    const retry_count& retries() const { return retries_; }
    const unshown_output& unshown() const { return unshown_; }

    /// The absolute workspace root, when it is not the current folder: said once, before the
    /// first failure (a relative path that was not found is the usual surprise).
    void set_workspace(std::string root) { workspace_ = std::move(root); }

private:
    std::string paint(const char* code, std::string_view text) const;
    void write_jsonl(const run_event& e);
    void show_output(std::uint32_t index, const task_result& r);
    void say_workspace();
    void tick();
    void draw();
    void clear_line();

    const command_line& cl_;
    const plan& plan_;
    bool tty_;
    bool color_;
    bool stdout_tty_;
    boost::asio::steady_timer timer_;
    json_sink& err_;
    json_sink& out_;
    std::size_t countable_ = 0, done_ = 0, failed_ = 0;
    std::uint32_t running_ = 0;
    retry_count retries_;
    unshown_output unshown_;
    std::vector<bool> retried_;  // by plan index, sized at the first retry
    std::string workspace_;      // said before the first failure, then cleared
    bool drawn_ = false;
    bool paused_ = false;
    std::function<bool()> behind_;
    std::chrono::steady_clock::time_point begun_ = std::chrono::steady_clock::now();
};

/// Asks on the terminal, one task at a time: yes / no / all.
class terminal_approver final : public approver {
public:
    /// `progress`: cleared while a question waits (may be nullptr).
    terminal_approver(boost::asio::io_context& io, progress_printer* progress);

    void async_approve_impl(const plan& p, std::uint32_t idx,
                            boost::asio::any_completion_handler<void(approval_answer)> handler) override;

private:
    void read_answer();

    progress_printer* progress_;
    boost::asio::posix::stream_descriptor input_;
    boost::asio::streambuf buffer_;
    boost::asio::any_completion_handler<void(approval_answer)> handler_;
};

/// What the summary says besides the report.
struct summary_context {
    std::string cancel_reason;  ///< why the run was cancelled ("SIGINT", "run timeout 0.5 s reached")
    retry_count retries;        ///< said in one line unless -v said each
    unshown_output unshown;     ///< where the tasks' stdout went, said when nothing printed it
    bool journaled = false;     ///< the run is in the journal (`runs show` can print its output)
};

/// The failed tasks with their stderr tails, the tasks never started in one line,
/// `spec.outputs` and the closing line. `results`: where the failed tasks' results are read
/// when the report does not hold them (a run with a journal).
void print_summary(const command_line& cl, const plan& p, const run_report& r, const summary_context& context,
                   result_source* results);

}  // namespace agentctl::cli
