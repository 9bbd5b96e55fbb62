#include <agentctl/spec.hpp>

namespace agentctl {

void source_map::set(std::string path, int line, int column) {
    lines_.insert_or_assign(std::move(path), std::pair(line, column));
}

source_location source_map::find(std::string_view path) const {
    // Strip one component at a time (`.key` or `[i]`) until a recorded path is found.
    std::string key(path);
    for (;;) {
        if (auto it = lines_.find(key); it != lines_.end())
            return {file_, it->second.first, it->second.second};
        if (key.empty()) return {file_, 0, 0};
        auto cut = key.find_last_of(".[");
        key.resize(cut == std::string::npos ? 0 : cut);
    }
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

std::string_view to_string(action_kind k) {
    switch (k) {
        case action_kind::shell_exec:
            return "builtin.shell.exec";
        case action_kind::extension_process:
            return "extension.process";
        case action_kind::assign:
            return "builtin.assign";
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
