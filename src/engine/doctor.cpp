// agentctl doctor: the preflight of every process action, without running any of them.
#include <agentctl/doctor.hpp>

#include "engine/container_engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace asio = boost::asio;

namespace agentctl {
namespace {

std::optional<std::string> canonical(const std::string& path) {
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf)) return std::nullopt;
    return std::string(buf);
}

std::string under(const std::string& base, std::string_view path) {
    return (!path.empty() && path[0] == '/') ? std::string(path) : base + "/" + std::string(path);
}

bool beneath(const std::string& path, const std::string& root) {
    return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                            (root == "/" || path[root.size()] == '/'));
}

class doctor {
public:
    doctor(const plan& p, doctor_options options) : plan_(p), options_(std::move(options)) {}

    asio::awaitable<doctor_report> run() {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_await asio::this_coro::throw_if_cancelled(false);
        std::string root = under(options_.base_dir, plan_.policy.workspace_root);
        if (auto real = canonical(root)) {
            report_.workspace = *real;
            workspace_fd_ = ::open(real->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
        if (workspace_fd_ < 0)
            add("", "cwd", root, "missing", "the workspace root is not an accessible directory: " +
                                                 std::string(std::strerror(errno)));
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            check_executable(a);
            check_cwd(a);
            for (const auto& e : a.env) check_env(a, e);
            if (a.isolation == isolation_mode::container && a.container) co_await check_engines(a);
        }
        if (workspace_fd_ >= 0) ::close(workspace_fd_);
        for (const auto& c : report_.checks) report_.ready &= !(c.blocking && c.failed());
        co_return std::move(report_);
    }

private:
    void add(std::string action, std::string check, std::string subject, std::string status, std::string detail,
             bool blocking = true) {
        report_.checks.push_back(doctor_check{std::move(action), std::move(check), std::move(subject),
                                              std::move(status), std::move(detail), blocking});
    }

    void check_executable(const action_spec& a) {
        if (a.isolation == isolation_mode::container) {
            add(a.name, "executable", a.command, "unchecked",
                "runs inside the image; the engine reports it when the container starts");
            return;
        }
        std::string error;
        if (auto path = resolve_executable(a.command, options_.search_path, error)) {
            struct stat st {};
            if (::stat(path->c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path->c_str(), X_OK) == 0)
                add(a.name, "executable", *path, "ok", "a regular executable file");
            else
                add(a.name, "executable", *path, "missing", "not a regular executable file");
        } else {
            add(a.name, "executable", a.command, "missing", error);
        }
    }

    void check_cwd(const action_spec& a) {
        std::string cwd = a.cwd ? *a.cwd : ".";
        if (cwd.find("${{") != std::string::npos) {
            add(a.name, "cwd", cwd, "unchecked", "rendered per task");
            return;
        }
        if (workspace_fd_ < 0) {
            add(a.name, "cwd", cwd, "missing", "the workspace root is missing");
            return;
        }
        std::string error;
        int fd = cwd == "." ? ::dup(workspace_fd_) : open_beneath(workspace_fd_, cwd, error);
        if (fd < 0) {
            add(a.name, "cwd", cwd, "missing", error.empty() ? std::strerror(errno) : error);
            return;
        }
        ::close(fd);
        add(a.name, "cwd", cwd, "ok", "a directory beneath the workspace root");
    }

    void check_env(const action_spec& a, const env_entry& e) {
        const env_source& s = e.source;
        switch (s.kind) {
        case env_source::kind_t::value:
            add(a.name, "env", e.name, "ok", "a literal value");
            return;
        case env_source::kind_t::env:
            if (options_.host_env && options_.host_env(s.text))
                add(a.name, "env", e.name, "ok", "from agentctl's environment variable " + s.text);
            else
                add(a.name, "env", e.name, "missing", "agentctl's environment variable " + s.text + " is not set");
            return;
        case env_source::kind_t::file: {
            auto detail = secret_file_problem(s.text);
            add(a.name, "env", e.name, detail ? "missing" : "ok",
                detail ? *detail : "the secret file " + s.text + " is readable (not read)");
            return;
        }
        case env_source::kind_t::process: {
            std::string error;
            auto path = resolve_executable(s.process.command, options_.search_path, error);
            if (path && ::access(path->c_str(), X_OK) == 0)
                add(a.name, "env", e.name, "ok", "the secret helper " + *path + " is executable (not run)");
            else
                add(a.name, "env", e.name, "missing",
                    "the secret helper " + s.process.command + ": " + (path ? "not executable" : error));
            return;
        }
        }
    }

    // The checks of secrets.cpp without reading the value.
    std::optional<std::string> secret_file_problem(const std::string& path) const {
        const auto& roots = plan_.policy.secret_file_roots;
        if (roots.empty()) return "policy.secretFileRoots is empty";
        auto real = canonical(under(report_.workspace, path));
        if (!real) return "the secret file " + path + " cannot be opened: " + std::strerror(errno);
        bool inside = false;
        for (const auto& root : roots)
            if (auto r = canonical(under(report_.workspace, root)); r && beneath(*real, *r)) inside = true;
        if (!inside) return "the secret file " + path + " resolves outside every policy.secretFileRoots entry";
        struct stat st {};
        if (::stat(real->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "the secret file " + path + " is not a regular file";
        if (::access(real->c_str(), R_OK) != 0) return "the secret file " + path + " is not readable";
        return std::nullopt;
    }

    // Every candidate engine is asked (doctor reports them all); `auto` needs one.
    asio::awaitable<void> check_engines(const action_spec& a) {
        const container_spec& spec = *a.container;
        auto names = container::engine_names(spec.runtime);
        std::size_t first = report_.checks.size();
        bool any_ok = false;
        for (const auto& name : names) {
            std::string error;
            auto eng = container::find_engine(name, options_.search_path, error);
            if (!eng) {
                add(a.name, "engine", name, "unavailable", error);
                continue;
            }
            if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
                add(a.name, "engine", name, "unchecked", "cancelled before " + eng->path + " was asked");
                continue;
            }
            auto probe = co_await container::probe_image(*eng, spec.image, options_.host_env);
            if (probe.ok) {
                any_ok = true;
                add(a.name, "engine", name, "ok",
                    eng->path + " has the pinned image " + spec.image +
                        (probe.image_id == spec.image ? "" : " (" + probe.image_id + ")"));
            } else {
                add(a.name, "engine", name, "unavailable",
                    probe.message + "; start the engine and load the pinned image (agentctl never pulls)");
            }
        }
        if (any_ok)
            for (std::size_t i = first; i < report_.checks.size(); ++i) report_.checks[i].blocking = false;
    }

    const plan& plan_;
    doctor_options options_;
    doctor_report report_;
    int workspace_fd_ = -1;
};

}  // namespace

namespace detail {

void async_doctor_impl(asio::any_io_executor ex, const plan& p, doctor_options options,
                       asio::any_completion_handler<void(doctor_report)> handler) {
    auto d = std::make_shared<doctor>(p, std::move(options));
    auto slot = asio::get_associated_cancellation_slot(handler);
    asio::co_spawn(ex, d->run(),
                   asio::bind_cancellation_slot(slot, [d, h = std::move(handler)](std::exception_ptr e,
                                                                                  doctor_report r) mutable {
                       if (e) {
                           r.ready = false;
                           r.checks.push_back(doctor_check{"", "internal", "", "unavailable", "the check failed unexpectedly", true});
                       }
                       auto ex = asio::get_associated_executor(h);
                       asio::dispatch(ex, [h = std::move(h), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
                   }));
}

}  // namespace detail

void write_doctor_report(json_writer& w, const doctor_report& report) {
    w.begin_object();
    w.member("ready", report.ready);
    w.member("workspace", report.workspace);
    w.key("checks");
    w.begin_array();
    for (const auto& c : report.checks) {
        w.begin_object();
        w.member("action", c.action);
        w.member("check", c.check);
        w.member("subject", c.subject);
        w.member("status", c.status);
        w.member("detail", c.detail);
        w.member("blocking", c.blocking);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

}  // namespace agentctl
