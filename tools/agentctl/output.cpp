// Printing: the JSON envelope, human diagnostics, colour.
#include "cli.hpp"

#include <agentctl/parse.hpp>
#include <agentctl/version.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace agentctl::cli {

void fd_sink::write(std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return;  // a closed stdout (EPIPE) is not worth a crash; the exit code still tells
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

bool use_color(const command_line& cl, int fd) {
    if (cl.output != output_format::human) return false;
    if (cl.color == color_mode::always) return true;
    if (cl.color == color_mode::never) return false;
    const char* term = std::getenv("TERM");
    return ::isatty(fd) && std::getenv("NO_COLOR") == nullptr && !(term && std::string_view(term) == "dumb");
}

namespace {

// Child output and document text can hold terminal escapes; never send them raw.
std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f)) {
            out.push_back(static_cast<char>(c));
        } else {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

}  // namespace

void print_diagnostics_human(const command_line& cl, const diagnostics& diags) {
    bool color = use_color(cl, STDERR_FILENO);
    auto paint = [&](const char* code, std::string_view text) {
        return color ? std::string("\x1b[") + code + "m" + std::string(text) + "\x1b[0m" : std::string(text);
    };
    std::string out;
    for (const auto& d : diags.items()) {
        if (cl.quiet && d.level != severity::error) continue;
        const auto& at = d.location;
        std::string where = at.file.empty() ? std::string("agentctl") : at.file;
        if (at.line > 0) where += ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
        bool error = d.level == severity::error;
        out += paint("1", where) + ": " + (error ? paint("1;31", "error") : paint("1;33", "warning")) + ": " +
               printable(d.message) + " [" + d.code + "]\n";
        if (!d.path.empty()) out += "  at " + printable(d.path) + "\n";
        if (!d.help.empty()) out += "  help: " + printable(d.help) + "\n";
    }
    fd_sink(STDERR_FILENO).write(out);
}

void print_success(const command_line& cl, std::string_view kind, const std::function<void(json_writer&)>& write_data,
                   const diagnostics& diags) {
    fd_sink out(STDOUT_FILENO);
    json_writer w(out);
    w.begin_object();
    w.member("apiVersion", cli_api_version);
    w.member("kind", kind);
    w.member("ok", true);
    w.key("data");
    write_data(w);
    w.key("diagnostics");
    write_diagnostics(w, diags);
    w.end_object();
    w.flush();
    out.write("\n");
    (void)cl;
}

int print_failure(const command_line& cl, std::string_view message, int code, const diagnostics& diags) {
    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, diags);
        bool color = use_color(cl, STDERR_FILENO);
        std::string line = (color ? "\x1b[1;31magentctl:\x1b[0m " : "agentctl: ") + printable(message) + "\n";
        fd_sink(STDERR_FILENO).write(line);
        return code;
    }
    fd_sink err(STDERR_FILENO);
    {
        json_writer w(err);
        w.begin_object();
        w.member("apiVersion", cli_api_version);
        w.member("kind", "Error");
        w.member("ok", false);
        w.key("error");
        w.begin_object();
        w.member("message", message);
        w.member("exitCode", code);
        w.end_object();
        w.key("diagnostics");
        write_diagnostics(w, diags);
        w.end_object();
    }
    err.write("\n");
    return code;
}

compiled_workflow load_and_compile(const command_line& cl) {
    compiled_workflow result;
    parse_result parsed = load_workflow(cl.file);

    compile_options options;
    diagnostics input_diags;
    if (cl.inputs_file) {
        inputs_result file_inputs = load_inputs_file(*cl.inputs_file);
        input_diags.append(file_inputs.diags);
        if (file_inputs.inputs)
            for (const auto& m : *file_inputs.inputs) options.input_overrides.emplace_back(m.key(), m.value());
    }
    for (const auto& text : cl.inputs) {
        std::string key;
        boost::json::value value;
        if (parse_input_assignment(text, key, value, input_diags))
            options.input_overrides.emplace_back(std::move(key), std::move(value));
    }

    compile_result compiled = check_document(parsed, options);
    result.diags = std::move(compiled.diags);
    result.diags.append(input_diags);
    if (!input_diags.has_errors()) result.compiled = std::move(compiled.compiled);
    result.document = std::move(parsed.document);
    if (result.diags.has_errors() || !result.compiled) {
        int code = result.diags.exit_code();
        if (code == 0) code = exit_code::usage;
        std::size_t errors = 0;
        for (const auto& d : result.diags.items()) errors += d.level == severity::error;
        std::string message = cl.file + ": " + std::to_string(errors) + (errors == 1 ? " error" : " errors");
        result.exit_status = print_failure(cl, message, code, result.diags);
    }
    return result;
}

}  // namespace agentctl::cli
