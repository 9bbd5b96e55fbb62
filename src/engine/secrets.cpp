#include "engine/secrets.hpp"

#include "engine/post_result.hpp"

#include <agentctl/json.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace asio = boost::asio;

namespace agentctl {
namespace {

std::string strip_one_line_ending(std::string s) {
    if (!s.empty() && s.back() == '\n') {
        s.pop_back();
        if (!s.empty() && s.back() == '\r') s.pop_back();
    }
    return s;
}

std::optional<std::string> canonical(const std::string& path) {
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf)) return std::nullopt;
    return std::string(buf);
}

bool is_beneath(const std::string& path, const std::string& root) {
    if (root == "/") return true;
    return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                            path[root.size()] == '/');
}

std::string basename_of(std::string_view path) {
    auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string source_text(const env_entry& e) {
    switch (e.source.kind) {
    case env_source::kind_t::env: return "{env: " + e.source.text + "}";
    case env_source::kind_t::file: return "{file: " + e.source.text + "}";
    case env_source::kind_t::process: return "{process: " + e.source.process.command + "}";
    case env_source::kind_t::value: return "{value}";
    }
    return "";
}

/// Walks the entries in order; `{process}` sources suspend the walk while their helper runs.
class resolver : public std::enable_shared_from_this<resolver> {
public:
    resolver(asio::any_io_executor ex, const std::vector<env_entry>& entries, const environment_context& ctx,
             asio::any_completion_handler<void(resolved_environment)> handler)
        : ex_(std::move(ex)), entries_(entries), ctx_(ctx), handler_(std::move(handler)) {}

    void next() {
        while (index_ < entries_.size()) {
            const env_entry& e = entries_[index_];
            switch (e.source.kind) {
            case env_source::kind_t::value:
                add(e, e.source.text, /*secret=*/false);
                break;
            case env_source::kind_t::env: {
                auto v = ctx_.host_env ? ctx_.host_env(e.source.text) : std::nullopt;
                if (!v) return fail(e, "secret_unavailable", "environment variable " + e.source.text + " is not set");
                add(e, *v, true);
                break;
            }
            case env_source::kind_t::file: {
                std::string error;
                auto v = read_secret_file(ctx_, e.source.text, error);
                if (!v) return fail(e, "secret_unavailable", error);
                add(e, *v, true);
                break;
            }
            case env_source::kind_t::process:
                return run_helper(e);
            }
            ++index_;
        }
        finish();
    }

private:
    void add(const env_entry& e, const std::string& value, bool secret) {
        result_.entries.push_back(e.name + "=" + value);
        if (secret && !value.empty()) result_.secrets.push_back(value);
    }

    void fail(const env_entry& e, std::string code, std::string why) {
        result_.error_code = std::move(code);
        result_.error_message = "environment variable " + e.name + " from " + source_text(e) + ": " + why;
        finish();
    }

    void run_helper(const env_entry& e) {
        const secret_process_spec& spec = e.source.process;
        const auto& allow = ctx_.policy->secret_process_allowlist;
        if (std::find(allow.begin(), allow.end(), basename_of(spec.command)) == allow.end())
            return fail(e, "policy_secret_process_not_allowed",
                        "\"" + basename_of(spec.command) + "\" is not in policy.secretProcessAllowlist");
        std::string error;
        auto exe = resolve_executable(spec.command, ctx_.search_path, error);
        if (!exe) return fail(e, "secret_unavailable", error);
        process_request req;
        req.executable = *exe;
        req.argv.push_back(spec.command);
        req.argv.insert(req.argv.end(), spec.args.begin(), spec.args.end());
        req.cwd_fd = ctx_.workspace_fd;
        req.cwd_display = ctx_.workspace_path;
        req.stdout_limit = spec.output_limit_bytes;
        req.stderr_limit = 16 * 1024;
        req.combined_limit = spec.output_limit_bytes + req.stderr_limit;
        req.timeout = std::chrono::seconds(spec.timeout_seconds);
        req.containment = ctx_.containment;
        auto slot = asio::get_associated_cancellation_slot(handler_);
        async_run_process(ex_, std::move(req),
                          asio::bind_cancellation_slot(slot, [self = shared_from_this()](process_result r) {
                              self->helper_done(std::move(r));
                          }));
    }

    void helper_done(process_result r) {
        const env_entry& e = entries_[index_];
        // The helper's stdout is the secret: never let it reach a message, and wipe it on failure.
        auto wipe = [&] { std::fill(r.stdout_bytes.begin(), r.stdout_bytes.end(), '\0'); };
        if (r.outcome != process_outcome::exited || r.exit_code != 0) {
            std::string why;
            switch (r.outcome) {
            case process_outcome::spawn_failed: why = r.error_message; break;
            case process_outcome::timed_out: why = "the helper timed out"; break;
            case process_outcome::cancelled: why = "the helper was cancelled"; break;
            case process_outcome::output_limit_exceeded:
                why = "the helper's " + r.limit_stream + " exceeded " + std::to_string(r.limit_bytes) + " bytes";
                break;
            case process_outcome::exited:
                why = r.signal ? "the helper was killed by signal " + std::to_string(*r.signal)
                               : "the helper exited with status " + std::to_string(r.exit_code.value_or(-1));
                break;
            }
            wipe();
            return fail(e, r.outcome == process_outcome::cancelled ? "cancelled" : "secret_unavailable", why);
        }
        std::string value = strip_one_line_ending(std::move(r.stdout_bytes));
        if (value.empty()) return fail(e, "secret_unavailable", "the helper printed nothing");
        if (!is_valid_utf8(value)) {
            std::fill(value.begin(), value.end(), '\0');
            return fail(e, "secret_unavailable", "the helper's output is not valid UTF-8");
        }
        add(e, value, true);
        ++index_;
        next();
    }

    void finish() {
        // Never complete inline from the initiating call.
        post_result(ex_, std::move(handler_), std::move(result_));
    }

    asio::any_io_executor ex_;
    const std::vector<env_entry>& entries_;
    environment_context ctx_;
    asio::any_completion_handler<void(resolved_environment)> handler_;
    std::size_t index_ = 0;
    resolved_environment result_;
};

}  // namespace

std::optional<std::string> read_secret_file(const environment_context& ctx, std::string_view path,
                                            std::string& error) {
    const auto& roots = ctx.policy->secret_file_roots;
    if (roots.empty()) {
        error = "policy.secretFileRoots is empty";
        return std::nullopt;
    }
    std::string full = (!path.empty() && path[0] == '/') ? std::string(path) : ctx.workspace_path + "/" + std::string(path);
    auto real = canonical(full);
    if (!real) {
        error = "cannot open " + std::string(path) + ": " + std::strerror(errno);
        return std::nullopt;
    }
    bool inside = false;
    for (const auto& root : roots) {
        std::string root_full = (!root.empty() && root[0] == '/') ? root : ctx.workspace_path + "/" + root;
        auto root_real = canonical(root_full);
        if (root_real && is_beneath(*real, *root_real)) inside = true;
    }
    if (!inside) {
        error = std::string(path) + " resolves outside every policy.secretFileRoots entry";
        return std::nullopt;
    }
    int fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        error = "cannot open " + std::string(path) + ": " + std::strerror(errno);
        return std::nullopt;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        error = std::string(path) + " is not a regular file";
        return std::nullopt;
    }
    std::string value(limits::max_secret_file_bytes + 1, '\0');
    std::size_t got = 0;
    while (got < value.size()) {
        ssize_t n = ::read(fd, value.data() + got, value.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    value.resize(got);
    if (got > limits::max_secret_file_bytes) {
        std::fill(value.begin(), value.end(), '\0');
        error = std::string(path) + " is larger than " + std::to_string(limits::max_secret_file_bytes) + " bytes";
        return std::nullopt;
    }
    value = strip_one_line_ending(std::move(value));
    if (value.empty()) {
        error = std::string(path) + " is empty";
        return std::nullopt;
    }
    if (!is_valid_utf8(value)) {
        std::fill(value.begin(), value.end(), '\0');
        error = std::string(path) + " is not valid UTF-8";
        return std::nullopt;
    }
    return value;
}

void async_resolve_environment(asio::any_io_executor ex, const std::vector<env_entry>& entries,
                               const environment_context& ctx,
                               asio::any_completion_handler<void(resolved_environment)> handler) {
    std::make_shared<resolver>(std::move(ex), entries, ctx, std::move(handler))->next();
}

}  // namespace agentctl
