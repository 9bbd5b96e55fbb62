// The messages after the handshake (docs/WORKER.md, "Messages"): fields in a fixed order, and
// the range checks of each decoder.
#include "worker_protocol/messages.hpp"

namespace agentctl::worker_protocol {
namespace {

template <typename Enum>
Enum read_enum(payload_reader& r, Enum last, std::string_view what) {
    std::uint8_t v = r.u8();
    if (!r.failed() && (v == 0 || v > static_cast<std::uint8_t>(last)))
        r.fail("an unknown " + std::string(what) + " " + std::to_string(v));
    return Enum{v};
}

std::optional<std::uint32_t> read_bounded(payload_reader& r, std::uint32_t lo, std::uint32_t hi,
                                          std::string_view what) {
    std::optional<std::uint64_t> v = r.optional_u64();
    if (!v) return std::nullopt;
    if (*v < lo || *v > hi) {
        r.fail("a " + std::string(what) + " of " + std::to_string(*v));
        return std::nullopt;
    }
    return static_cast<std::uint32_t>(*v);
}

void write_bounded(payload_writer& w, const std::optional<std::uint32_t>& v) {
    w.optional_u64(v ? std::optional<std::uint64_t>(*v) : std::nullopt);
}

void require(payload_reader& r, bool ok, const std::string& what) {
    if (!r.failed() && !ok) r.fail(what);
}

bool absolute(const std::string& path) {
    return !path.empty() && path.front() == '/';
}

template <typename T>
decoded<T> finish(payload_reader& r, T value, std::string_view what) {
    if (auto e = r.finish(what)) return *e;
    return value;
}

std::optional<protocol_error> append_payload(std::string& out, message_type type,
                                             const std::string& payload) {
    return append_frame(out, type, payload, payload_limit);
}

}  // namespace

std::optional<protocol_error> append_run(std::string& out, const run_request& m) {
    std::string p;
    payload_writer w(p);
    w.u64(m.tag);
    w.bytes(m.executable);
    w.list(m.argv);
    w.list(m.env);
    w.bytes(m.workspace_root);
    w.bytes(m.cwd);
    w.optional_bytes(m.stdin_data);
    w.u64(m.stdout_limit);
    w.u64(m.stderr_limit);
    w.u64(m.combined_limit);
    w.u64(m.timeout_ms);
    w.u64(m.kill_grace_ms);
    w.u64(m.drain_grace_ms);
    w.u8(static_cast<std::uint8_t>(m.containment));
    return append_payload(out, message_type::run, p);
}

decoded<run_request> decode_run(std::string_view payload) {
    payload_reader r(payload);
    run_request m;
    m.tag = r.u64();
    m.executable = r.bytes();
    m.argv = r.list();
    m.env = r.list();
    m.workspace_root = r.bytes();
    m.cwd = r.bytes();
    m.stdin_data = r.optional_bytes();
    m.stdout_limit = r.u64();
    m.stderr_limit = r.u64();
    m.combined_limit = r.u64();
    m.timeout_ms = r.u64();
    m.kill_grace_ms = r.u64();
    m.drain_grace_ms = r.u64();
    m.containment = read_enum(r, containment_request::process_group_only, "containment");
    require(r, absolute(m.executable), "an executable that is not an absolute path");
    require(r, !m.argv.empty(), "an empty argv");
    require(r, absolute(m.workspace_root), "a workspace root that is not an absolute path");
    require(r, m.stdout_limit >= 1 && m.stderr_limit >= 1 && m.combined_limit >= 1, "an output limit of 0");
    require(r, m.timeout_ms >= 1, "a timeout of 0");
    return finish(r, std::move(m), "run");
}

std::optional<protocol_error> append_cancel(std::string& out, const cancel_request& m) {
    std::string p;
    payload_writer w(p);
    w.u64(m.tag);
    w.u8(static_cast<std::uint8_t>(m.kind));
    return append_payload(out, message_type::cancel, p);
}

decoded<cancel_request> decode_cancel(std::string_view payload) {
    payload_reader r(payload);
    cancel_request m;
    m.tag = r.u64();
    m.kind = read_enum(r, cancel_kind::terminal, "cancel kind");
    return finish(r, m, "cancel");
}

std::optional<protocol_error> append_started(std::string& out, const started_note& m) {
    std::string p;
    payload_writer w(p);
    w.u64(m.tag);
    w.u32(m.pid);
    w.u64(m.start_lo);
    w.u64(m.start_hi);
    w.bytes(m.cgroup);
    return append_payload(out, message_type::started, p);
}

decoded<started_note> decode_started(std::string_view payload) {
    payload_reader r(payload);
    started_note m;
    m.tag = r.u64();
    m.pid = r.u32();
    m.start_lo = r.u64();
    m.start_hi = r.u64();
    m.cgroup = r.bytes();
    require(r, m.pid > 0, "a pid of 0");
    require(r, m.start_lo <= m.start_hi, "a start window that ends before it begins");
    return finish(r, std::move(m), "started");
}

void append_output(std::string& out, std::uint64_t tag, stream_id stream, std::string_view bytes) {
    while (!bytes.empty()) {
        std::string_view piece = bytes.substr(0, output_chunk_limit);
        bytes.remove_prefix(piece.size());
        std::string p;
        p.reserve(8 + 1 + 4 + piece.size());
        payload_writer w(p);
        w.u64(tag);
        w.u8(static_cast<std::uint8_t>(stream));
        w.bytes(piece);
        // A chunk is far below the frame limit: this cannot fail.
        append_payload(out, message_type::output, p);
    }
}

decoded<output_chunk> decode_output(std::string_view payload) {
    payload_reader r(payload);
    output_chunk m;
    m.tag = r.u64();
    m.stream = read_enum(r, stream_id::stderr_stream, "stream");
    m.bytes = r.bytes();
    require(r, !m.bytes.empty() && m.bytes.size() <= output_chunk_limit,
            "an output chunk of " + std::to_string(m.bytes.size()) + " bytes");
    return finish(r, std::move(m), "output");
}

std::optional<protocol_error> append_result(std::string& out, const run_result& m) {
    std::string p;
    payload_writer w(p);
    w.u64(m.tag);
    w.u8(static_cast<std::uint8_t>(m.outcome));
    write_bounded(w, m.exit_code);
    write_bounded(w, m.signal);
    w.u8(m.core_dumped ? 1 : 0);
    w.bytes(m.limit_stream);
    w.u64(m.limit_bytes);
    w.u64(m.duration_us);
    w.u64(m.user_us);
    w.u64(m.system_us);
    w.u64(m.max_rss_kib);
    w.u8(static_cast<std::uint8_t>(m.used));
    w.u32(m.descendants_killed);
    w.bytes(m.error_code);
    w.bytes(m.error_message);
    w.u64(m.stdout_size);
    w.u64(m.stderr_size);
    return append_payload(out, message_type::result, p);
}

decoded<run_result> decode_result(std::string_view payload) {
    payload_reader r(payload);
    run_result m;
    m.tag = r.u64();
    m.outcome = read_enum(r, run_outcome::spawn_failed, "outcome");
    m.exit_code = read_bounded(r, 0, 255, "exit code");
    m.signal = read_bounded(r, 1, 127, "signal");
    m.core_dumped = r.flag();
    m.limit_stream = r.bytes();
    m.limit_bytes = r.u64();
    m.duration_us = r.u64();
    m.user_us = r.u64();
    m.system_us = r.u64();
    m.max_rss_kib = r.u64();
    m.used = read_enum(r, used_containment::process_group, "containment");
    m.descendants_killed = r.u32();
    m.error_code = r.bytes();
    m.error_message = r.bytes();
    m.stdout_size = r.u64();
    m.stderr_size = r.u64();
    require(r, !(m.exit_code && m.signal), "both an exit code and a signal");
    return finish(r, std::move(m), "result");
}

std::optional<protocol_error> append_heartbeat(std::string& out, const heartbeat& m) {
    std::string p;
    payload_writer w(p);
    w.u64(m.sequence);
    return append_payload(out, message_type::heartbeat, p);
}

decoded<heartbeat> decode_heartbeat(std::string_view payload) {
    payload_reader r(payload);
    heartbeat m;
    m.sequence = r.u64();
    return finish(r, m, "heartbeat");
}

}  // namespace agentctl::worker_protocol
