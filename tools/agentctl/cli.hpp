// The CLI: argv -> library call -> print -> exit code. One file per command.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/json.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/spec.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::cli {

/// Stable exit codes (SPEC section 4).
namespace exit_code {
inline constexpr int success = 0;
inline constexpr int usage = 2;  ///< usage or validation
inline constexpr int policy = 3;  ///< policy or approval
inline constexpr int run_failed = 4;
inline constexpr int persistence = 5;
inline constexpr int cancelled = 130;
}  // namespace exit_code

enum class output_format { human, json, jsonl };
enum class color_mode { automatic, always, never };

/// Everything the command line said.
struct command_line {
    std::string command;  ///< check | plan | run | doctor | version
    std::string file;
    output_format output = output_format::human;
    color_mode color = color_mode::automatic;
    bool quiet = false;
    bool verbose = false;
    std::vector<std::string> inputs;         ///< --input K=V, in order
    std::optional<std::string> inputs_file;  ///< --inputs-file
    std::optional<int> jobs;
    std::optional<std::string> workspace;
    std::optional<double> timeout_seconds;
    bool interactive = false;
    bool keep_going = false;
};

/// Writes to a file descriptor (stdout or stderr).
class fd_sink final : public json_sink {
public:
    explicit fd_sink(int fd) : fd_(fd) {}
    void write(std::string_view bytes) override;

private:
    int fd_;
};

/// Human output helpers.
bool use_color(const command_line& cl, int fd);
void print_diagnostics_human(const command_line& cl, const diagnostics& diags);

/// `{"apiVersion","kind","ok":true,"data":<write_data>,"diagnostics":[...]}` on stdout.
void print_success(const command_line& cl, std::string_view kind, const std::function<void(json_writer&)>& write_data,
                   const diagnostics& diags);

/// A failure: human text or the JSON `Error` envelope on stderr. Returns `code`.
int print_failure(const command_line& cl, std::string_view message, int code, const diagnostics& diags = {});

/// Loads the workflow and compiles it with the command line's inputs. On failure prints
/// the diagnostics and sets `exit_status`.
struct compiled_workflow {
    std::optional<workflow> document;
    std::optional<plan> compiled;
    diagnostics diags;
    int exit_status = 0;
};
compiled_workflow load_and_compile(const command_line& cl);

int run_check(const command_line& cl);
int run_plan(const command_line& cl);
int run_version(const command_line& cl);
int run_run(const command_line& cl);
int run_doctor(const command_line& cl);

}  // namespace agentctl::cli
