// The messages after the handshake (docs/WORKER.md, "Messages"): each one's fields in wire
// order, listed once (fields.hpp), and the range checks of its decoder.
#include "worker_protocol/messages.hpp"

#include "worker_protocol/fields.hpp"

namespace agentctl::worker_protocol {
namespace {

constexpr auto run_fields = [](auto& io, auto& m) {
    io(m.tag);
    io(m.executable);
    io(m.argv);
    io(m.env);
    io(m.workspace_root);
    io(m.cwd);
    io(m.stdin_data);
    io(m.stdout_limit);
    io(m.stderr_limit);
    io(m.combined_limit);
    io(m.timeout_ms);
    io(m.kill_grace_ms);
    io(m.drain_grace_ms);
    io(m.containment);
};
constexpr auto cancel_fields = [](auto& io, auto& m) {
    io(m.tag);
    io(m.kind);
};
constexpr auto started_fields = [](auto& io, auto& m) {
    io(m.tag);
    io(m.pid);
    io(m.start_lo);
    io(m.start_hi);
    io(m.cgroup);
};
constexpr auto output_fields = [](auto& io, auto& m) {
    io(m.tag);
    io(m.stream);
    io(m.bytes);
};
constexpr auto result_fields = [](auto& io, auto& m) {
    io(m.tag);
    io(m.outcome);
    io(m.exit_code);
    io(m.signal);
    io(m.core_dumped);
    io(m.limit_stream);
    io(m.limit_bytes);
    io(m.duration_us);
    io(m.user_us);
    io(m.system_us);
    io(m.max_rss_kib);
    io(m.used);
    io(m.descendants_killed);
    io(m.error_code);
    io(m.error_message);
    io(m.stdout_size);
    io(m.stderr_size);
};
constexpr auto heartbeat_fields = [](auto& io, auto& m) { io(m.sequence); };
constexpr auto slots_fields = [](auto& io, auto& m) { io(m.count); };
constexpr auto bye_fields = [](auto& io, auto& m) { io(m.tasks); };

// Fails the reader with `what` unless `ok` (the first problem is the one reported).
void require(payload_reader& r, bool ok, const std::string& what) {
    if (!r.failed() && !ok) r.fail(what);
}

bool absolute(const std::string& path) {
    return !path.empty() && path.front() == '/';
}

// A decoder's check that fails the reader only (no early error of its own).
template <typename Message, typename Check>
auto failing_only(Check check) {
    return [check](payload_reader& r, const Message& m) -> std::optional<protocol_error> {
        check(r, m);
        return std::nullopt;
    };
}

template <typename Message, typename Fields>
std::optional<protocol_error> append(std::string& out, message_type type, const Message& m, Fields fields) {
    return detail::append_message(out, type, m, fields, payload_limit);
}

}  // namespace

std::optional<protocol_error> append_run(std::string& out, const run_request& m) {
    return append(out, message_type::run, m, run_fields);
}

decoded<run_request> decode_run(std::string_view payload) {
    return detail::decode_message<run_request>(
        payload, "run", run_fields, failing_only<run_request>([](payload_reader& r, const run_request& m) {
            require(r, absolute(m.executable), "an executable that is not an absolute path");
            require(r, !m.argv.empty(), "an empty argv");
            require(r, absolute(m.workspace_root), "a workspace root that is not an absolute path");
            require(r, m.stdout_limit >= 1 && m.stderr_limit >= 1 && m.combined_limit >= 1,
                    "an output limit of 0");
            require(r, m.timeout_ms >= 1, "a timeout of 0");
        }));
}

std::optional<protocol_error> append_cancel(std::string& out, const cancel_request& m) {
    return append(out, message_type::cancel, m, cancel_fields);
}

decoded<cancel_request> decode_cancel(std::string_view payload) {
    return detail::decode_message<cancel_request>(
        payload, "cancel", cancel_fields, failing_only<cancel_request>([](payload_reader&, const auto&) {}));
}

std::optional<protocol_error> append_started(std::string& out, const started_note& m) {
    return append(out, message_type::started, m, started_fields);
}

decoded<started_note> decode_started(std::string_view payload) {
    return detail::decode_message<started_note>(
        payload, "started", started_fields,
        failing_only<started_note>([](payload_reader& r, const started_note& m) {
            require(r, m.pid > 0, "a pid of 0");
            require(r, m.start_lo <= m.start_hi, "a start window that ends before it begins");
        }));
}

void append_output(std::string& out, std::uint64_t tag, stream_id stream, std::string_view bytes) {
    while (!bytes.empty()) {
        output_chunk chunk{tag, stream, std::string(bytes.substr(0, output_chunk_limit))};
        bytes.remove_prefix(chunk.bytes.size());
        // A chunk is far below the frame limit: this cannot fail.
        append(out, message_type::output, chunk, output_fields);
    }
}

decoded<output_chunk> decode_output(std::string_view payload) {
    return detail::decode_message<output_chunk>(
        payload, "output", output_fields,
        failing_only<output_chunk>([](payload_reader& r, const output_chunk& m) {
            require(r, !m.bytes.empty() && m.bytes.size() <= output_chunk_limit,
                    "an output chunk of " + std::to_string(m.bytes.size()) + " bytes");
        }));
}

std::optional<protocol_error> append_result(std::string& out, const run_result& m) {
    return append(out, message_type::result, m, result_fields);
}

decoded<run_result> decode_result(std::string_view payload) {
    return detail::decode_message<run_result>(
        payload, "result", result_fields,
        failing_only<run_result>([](payload_reader& r, const run_result& m) {
            require(r, !m.exit_code || *m.exit_code <= 255, "an exit code above 255");
            require(r, !m.signal || (*m.signal >= 1 && *m.signal <= 127), "a signal outside 1..127");
            require(r, !(m.exit_code && m.signal), "both an exit code and a signal");
        }));
}

std::optional<protocol_error> append_heartbeat(std::string& out, const heartbeat& m) {
    return append(out, message_type::heartbeat, m, heartbeat_fields);
}

decoded<heartbeat> decode_heartbeat(std::string_view payload) {
    return detail::decode_message<heartbeat>(payload, "heartbeat", heartbeat_fields,
                                             failing_only<heartbeat>([](payload_reader&, const auto&) {}));
}

std::optional<protocol_error> append_slots(std::string& out, const slots_limit& m) {
    return append(out, message_type::slots, m, slots_fields);
}

decoded<slots_limit> decode_slots(std::string_view payload) {
    return detail::decode_message<slots_limit>(
        payload, "slots", slots_fields,
        failing_only<slots_limit>(
            [](payload_reader& r, const slots_limit& m) { require(r, m.count >= 1, "a slot count of 0"); }));
}

std::optional<protocol_error> append_bye(std::string& out, const bye& m) {
    return append(out, message_type::bye, m, bye_fields);
}

decoded<bye> decode_bye(std::string_view payload) {
    return detail::decode_message<bye>(payload, "bye", bye_fields,
                                       failing_only<bye>([](payload_reader&, const auto&) {}));
}

}  // namespace agentctl::worker_protocol
