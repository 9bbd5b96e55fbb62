// builtin.read and builtin.write (docs/DESIGN.md, "Files").
#include "runner/file_actions.hpp"

#include "exec/workspace.hpp"

#include <agentctl/json.hpp>

#include <boost/json/object.hpp>

namespace json = boost::json;

namespace agentctl {
namespace {

task_result failure(error_code code, std::string message) {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{code, std::move(message)};
    return r;
}

task_result success(json::object output) {
    task_result r;
    r.state = task_state::succeeded;
    r.output = std::move(output);
    return r;
}

// `with.NAME` as a string, or why not.
expected<std::string> string_member(const attempt_request& request, std::string_view name) {
    const json::value* v = request.with.is_object() ? request.with.get_object().if_contains(name) : nullptr;
    if (v && v->is_string()) return std::string(v->get_string());
    return task_error{error_code::input_invalid, std::string(to_string(request.action().kind)) +
                                                     " needs a string `" + std::string(name) + "`, found " +
                                                     (v ? to_json(*v) : std::string("none"))};
}

bool has_parent_component(std::string_view path) {
    while (true) {
        auto slash = path.find('/');
        if (path.substr(0, slash) == "..") return true;
        if (slash == std::string_view::npos) return false;
        path.remove_prefix(slash + 1);
    }
}

std::string absolute(const exec::directory& workspace, const std::string& path) {
    return !path.empty() && path.front() == '/' ? path : workspace.path() + "/" + path;
}

// A file's text, as the reference reads it: at most max_read_file_bytes of UTF-8. `missing`
// is set (and nothing returned) when the file does not exist and `missing` is given.
expected<std::string> read_text(const exec::directory& dir, std::string_view relative,
                                const std::string& shown, bool* missing = nullptr) {
    exec::file_read r = exec::read_file_beneath(dir, relative, max_read_file_bytes);
    switch (r.problem) {
        case exec::read_problem::none:
            break;
        case exec::read_problem::missing:
            if (missing) {
                *missing = true;
                return std::string();
            }
            return task_error{error_code::file_error, shown + " does not exist"};
        case exec::read_problem::escapes:
            return task_error{error_code::path_not_allowed,
                              shown + " leads out of " + dir.path() + " (through a symlink)"};
        case exec::read_problem::not_regular:
            return task_error{error_code::file_error, shown + " is not a regular file"};
        case exec::read_problem::too_large:
            return task_error{error_code::file_error,
                              shown + " is larger than " + std::to_string(max_read_file_bytes) +
                                  " bytes, the most builtin.read and builtin.write read"};
        case exec::read_problem::unreadable:
            return task_error{error_code::file_error, shown + " cannot be read: " + r.detail};
    }
    if (!is_valid_utf8(r.data)) return task_error{error_code::file_error, shown + " is not UTF-8 text"};
    return std::move(r.data);
}

// Where a write goes: its writable root opened (made when a relative one is missing and
// `make`), and the path below it.
struct write_target {
    std::optional<exec::directory> root;  ///< empty: the root does not exist (and was not made)
    std::string below;
};

expected<write_target> find_target(const launch_context& ctx, const std::string& path, bool make) {
    const auto& roots = ctx.compiled->policy.writable_roots;
    if (roots.empty())
        return task_error{error_code::path_not_allowed,
                          "cannot write " + path + ": policy.writableRoots is empty"};
    const std::string full = absolute(ctx.workspace, path);
    for (const auto& root : roots) {
        auto below = exec::relative_below(full, absolute(ctx.workspace, root));
        if (!below) continue;
        write_target t;
        t.below = std::move(*below);
        if (!root.empty() && root.front() == '/') {
            auto opened = exec::directory::open(root);
            if (!opened)
                return task_error{error_code::file_error, "cannot write " + path + ": writable root " + root +
                                                              " cannot be opened (" + opened.error().message +
                                                              ")"};
            t.root = std::move(*opened);
            return t;
        }
        if (make) {
            auto made = exec::make_directories_beneath(ctx.workspace, root);
            if (!made)
                return task_error{made.error().code, "cannot write " + path + ": " + made.error().message};
            t.root = std::move(*made);
        } else if (auto opened = ctx.workspace.open_beneath(root)) {
            t.root = std::move(*opened);
        }
        return t;
    }
    std::string listed;
    for (const auto& root : roots) listed += (listed.empty() ? "" : ", ") + root;
    return task_error{error_code::path_not_allowed,
                      "cannot write " + path +
                          ": it is not beneath a writable root (policy.writableRoots: " + listed + ")"};
}

}  // namespace

std::string write_diff(const std::optional<std::string>& before, std::string_view after) {
    std::string_view old = before ? std::string_view(*before) : std::string_view();
    if (old == after) return "";
    auto prefixed = [](std::string_view text, char mark) {
        std::string out(1, mark);
        for (char c : text) {
            out += c;
            if (c == '\n') out += mark;
        }
        return out;
    };
    return "--- before\n+++ after\n" + prefixed(old, '-') + "\n" + prefixed(after, '+');
}

task_result run_read(const launch_context& ctx, const attempt_request& request) {
    auto path = string_member(request, "path");
    if (!path) return failure(path.error().code, path.error().message);
    if (has_parent_component(*path))
        return failure(error_code::path_not_allowed, "cannot read " + *path + ": it contains '..'");
    std::string relative = *path;
    if (!relative.empty() && relative.front() == '/') {
        auto below = exec::relative_below(relative, ctx.workspace.path());
        if (!below)
            return failure(
                error_code::path_not_allowed,
                "cannot read " + *path + ": it is not beneath the workspace root " + ctx.workspace.path());
        relative = std::move(*below);
    }
    auto content = read_text(ctx.workspace, relative, *path);
    if (!content) return failure(content.error().code, "cannot read: " + content.error().message);
    return success(
        json::object{{"status", "unchanged"}, {"changed", false}, {"content", std::move(*content)}});
}

task_result run_write(const launch_context& ctx, const attempt_request& request, artifact_ledger& ledger) {
    auto path = string_member(request, "path");
    if (!path) return failure(path.error().code, path.error().message);
    auto content = string_member(request, "content");
    if (!content) return failure(content.error().code, content.error().message);
    if (has_parent_component(*path))
        return failure(error_code::path_not_allowed, "cannot write " + *path + ": it contains '..'");
    const bool check = ctx.settings.check;
    auto target = find_target(ctx, *path, !check);
    if (!target) return failure(target.error().code, target.error().message);

    // The folders below the root: made for a write, only looked at for a check.
    auto slash = target->below.rfind('/');
    std::string folder = slash == std::string::npos ? "" : target->below.substr(0, slash);
    std::string name = slash == std::string::npos ? target->below : target->below.substr(slash + 1);
    std::optional<exec::directory> parent;
    if (target->root) {
        if (!check) {
            auto made = exec::make_directories_beneath(*target->root, folder);
            if (!made)
                return failure(made.error().code, "cannot write " + *path + ": " + made.error().message);
            parent = std::move(*made);
        } else if (auto opened = target->root->open_beneath(folder)) {
            parent = std::move(*opened);
        }
    }

    std::optional<std::string> before;
    if (parent) {
        bool missing = false;
        auto text = read_text(*parent, name, *path, &missing);
        if (!text)
            return failure(text.error().code, "cannot write " + *path + ": " + text.error().message +
                                                  " (builtin.write reads the file it replaces)");
        if (!missing) before = std::move(*text);
    }
    const bool changed = before != *content;
    json::object output{
        {"status", changed ? "changed" : "unchanged"},
        {"changed", changed},
        {"before", before ? json::value(*before) : json::value(nullptr)},
        {"after", *content},
        {"diff", ctx.settings.diff ? json::value(write_diff(before, *content)) : json::value(nullptr)},
        {"path", *path},
        {"predictability", "fully_predictable"}};
    if (check || !changed) return success(std::move(output));

    if (content->size() > max_written_file_bytes)
        return failure(error_code::file_error,
                       "cannot write " + *path + ": its content (" + std::to_string(content->size()) +
                           " bytes) is larger than " + std::to_string(max_written_file_bytes) +
                           " bytes, the most builtin.write writes; nothing was written");
    if (const auto& budget = ctx.compiled->budgets.max_artifact_bytes;
        budget && ledger.written + content->size() > *budget)
        return failure(error_code::budget_exceeded,
                       "budgets.maxArtifactBytes (" + std::to_string(*budget) + ") cannot cover writing " +
                           *path + " (" + std::to_string(content->size()) + " bytes; " +
                           std::to_string(*budget - std::min(*budget, ledger.written)) +
                           " left); nothing was written");
    if (auto error = exec::replace_file(*parent, name, *content))
        return failure(error->code, "cannot write " + *path + ": " + error->message);
    ledger.written += content->size();
    return success(std::move(output));
}

}  // namespace agentctl
