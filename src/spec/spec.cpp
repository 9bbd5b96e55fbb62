#include <agentctl/spec.hpp>

#include <algorithm>
#include <cstdint>

namespace agentctl {

void source_map::set(std::string_view path, int line, int column) {
    if (paths_.size() + path.size() > UINT32_MAX) return;  // its ancestors' places stand in
    entries_.push_back(
        {static_cast<std::uint32_t>(paths_.size()), static_cast<std::uint32_t>(path.size()), line, column});
    paths_.append(path);
}

source_location source_map::find(std::string_view path) const {
    // Strip one component at a time (`.key` or `[i]`) until a recorded path is found; the
    // newest record of a path wins.
    std::string_view key = path;
    for (;;) {
        for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
            if (it->size == key.size() && std::string_view(paths_).substr(it->offset, it->size) == key)
                return {file_, it->line, it->column};
        if (key.empty()) return {file_, 0, 0};
        auto cut = key.find_last_of(".[");
        key = key.substr(0, cut == std::string_view::npos ? 0 : cut);
    }
}

bool source_map::contains(std::string_view path) const {
    for (const auto& e : entries_)
        if (e.size == path.size() && std::string_view(paths_).substr(e.offset, e.size) == path) return true;
    return false;
}

bool action_spec::needs_approval(approval_mode mode) const {
    switch (mode) {
        case approval_mode::never:
            return false;
        case approval_mode::always:
            return !capability_of(kind).empty();
        case approval_mode::high_risk:  // processes are the only high-risk effects here
            return is_process();
        case approval_mode::mutations:  // process execution and workspace mutation
            return is_process() || kind == action_kind::write;
    }
    return true;
}

std::string_view capability_of(action_kind kind) {
    switch (kind) {
        case action_kind::shell_exec:
        case action_kind::extension_process:
            return "process.exec";
        case action_kind::read:
            return "filesystem.read";
        case action_kind::write:
            return "filesystem.write";
        case action_kind::assign:
        case action_kind::assert_that:
            return "";
    }
    return "";
}

bool capability_allowed(const policy_spec& policy, std::string_view capability) {
    if (capability.empty()) return true;
    auto listed = [&](const std::vector<std::string>& list) {
        return std::find(list.begin(), list.end(), capability) != list.end();
    };
    if (listed(policy.tools_deny)) return false;
    return policy.tools_allow.empty() || listed(policy.tools_allow);
}

bool is_reserved_variable(std::string_view name) {
    return name == "foreachIndex" || name == "matrix" || name == "matrixIndex" || name == "loopIndex" ||
           name == "loopPrevious" || name == "jobSlot";
}

const action_spec* workflow::find_action(std::string_view name) const {
    for (const auto& a : actions)
        if (a.name == name) return &a;
    return nullptr;
}

std::string_view to_string(approval_mode m) {
    switch (m) {
        case approval_mode::never:
            return "never";
        case approval_mode::mutations:
            return "mutations";
        case approval_mode::high_risk:
            return "high_risk";
        case approval_mode::always:
            return "always";
    }
    return "mutations";
}

std::string_view to_string(non_interactive_mode m) {
    switch (m) {
        case non_interactive_mode::pause:
            return "pause";
        case non_interactive_mode::deny_approval:
            return "deny_approval";
        case non_interactive_mode::fail:
            return "fail";
    }
    return "pause";
}

std::string_view to_string(action_kind k) {
    switch (k) {
        case action_kind::shell_exec:
            return "builtin.shell.exec";
        case action_kind::extension_process:
            return "extension.process";
        case action_kind::assign:
            return "builtin.assign";
        case action_kind::assert_that:
            return "builtin.assert";
        case action_kind::read:
            return "builtin.read";
        case action_kind::write:
            return "builtin.write";
    }
    return "builtin.shell.exec";
}

std::string_view to_string(isolation_mode m) {
    switch (m) {
        case isolation_mode::process:
            return "process";
        case isolation_mode::container:
            return "container";
    }
    return "process";
}

std::string_view to_string(engine_choice e) {
    switch (e) {
        case engine_choice::auto_select:
            return "auto";
        case engine_choice::docker:
            return "docker";
        case engine_choice::podman:
            return "podman";
    }
    return "auto";
}

std::string_view to_string(idempotency i) {
    switch (i) {
        case idempotency::pure:
            return "pure";
        case idempotency::idempotent:
            return "idempotent";
        case idempotency::keyed:
            return "keyed";
        case idempotency::at_most_once:
            return "at_most_once";
        case idempotency::unknown:
            return "unknown";
    }
    return "unknown";
}

std::string_view to_string(retry_reason r) {
    switch (r) {
        case retry_reason::spawn_error:
            return "spawn_error";
        case retry_reason::exit_nonzero:
            return "exit_nonzero";
        case retry_reason::timeout:
            return "timeout";
    }
    return "spawn_error";
}

std::string_view to_string(failure_mode m) {
    switch (m) {
        case failure_mode::stop:
            return "stop";
        case failure_mode::continue_run:
            return "continue";
    }
    return "stop";
}

}  // namespace agentctl
