// The handshake of the worker protocol (docs/WORKER.md, "Handshake: the same build on both ends").
#include "worker_protocol/handshake.hpp"

namespace agentctl::worker_protocol {
namespace {

constexpr std::uint8_t last_containment = static_cast<std::uint8_t>(worker_containment::process_group);
constexpr std::uint8_t last_reason = static_cast<std::uint8_t>(refusal_reason::malformed);

std::optional<protocol_error> append_payload(std::string& out, message_type type,
                                             const std::string& payload) {
    return append_frame(out, type, payload, handshake_payload_limit);
}

// The identity every hello and welcome starts with, and its checks.
void write_identity(payload_writer& w, const std::string& m, std::uint32_t version,
                    const std::string& digest) {
    w.bytes(m);
    w.u32(version);
    w.bytes(digest);
}

void check_digest_size(payload_reader& r, const std::string& digest) {
    if (!r.failed() && digest.size() != build_digest_size)
        r.fail("a build digest of " + std::to_string(digest.size()) + " bytes (" +
               std::to_string(build_digest_size) + " expected)");
}

std::optional<protocol_error> check_identity(std::string_view what, const std::string& m,
                                             std::uint32_t version, const std::string& digest,
                                             std::string_view own_digest) {
    if (m != magic)
        return protocol_error{protocol_errc::bad_magic,
                              "the " + std::string(what) + " does not start with \"" + std::string(magic) +
                                  "\": the peer is not an agentctl of this protocol"};
    if (version != protocol_version)
        return protocol_error{protocol_errc::protocol_version,
                              "the peer speaks worker protocol " + std::to_string(version) +
                                  ", this agentctl " + std::to_string(protocol_version)};
    if (digest != own_digest)
        return protocol_error{protocol_errc::build_digest,
                              "the peer is another build of agentctl (build digest " + digest_text(digest) +
                                  ", this one " + digest_text(own_digest) + ")"};
    return std::nullopt;
}

}  // namespace

std::optional<protocol_error> append_hello(std::string& out, const hello& m) {
    std::string p;
    payload_writer w(p);
    write_identity(w, m.magic, m.version, m.build_digest);
    w.bytes(m.run_id);
    w.u32(m.heartbeat_ms);
    return append_payload(out, message_type::hello, p);
}

std::optional<protocol_error> append_welcome(std::string& out, const welcome& m) {
    std::string p;
    payload_writer w(p);
    write_identity(w, m.magic, m.version, m.build_digest);
    w.bytes(m.node);
    w.u32(m.pid);
    w.u32(m.cpus);
    w.u8(static_cast<std::uint8_t>(m.containment));
    return append_payload(out, message_type::welcome, p);
}

std::optional<protocol_error> append_refuse(std::string& out, const refuse& m) {
    std::string p;
    payload_writer w(p);
    w.u8(static_cast<std::uint8_t>(m.reason));
    w.bytes(m.message);
    return append_payload(out, message_type::refuse, p);
}

// The magic is read before anything else and compared by check_*(): a payload that is not a
// hello at all must say bad_magic, not some field error, so it is decoded as far as it goes.
decoded<hello> decode_hello(std::string_view payload) {
    payload_reader r(payload);
    hello m;
    m.magic = r.bytes();
    m.version = r.u32();
    m.build_digest = r.bytes();
    m.run_id = r.bytes();
    m.heartbeat_ms = r.u32();
    if (m.magic != magic && !m.magic.empty())
        return protocol_error{protocol_errc::bad_magic,
                              "the hello does not start with \"" + std::string(magic) + "\""};
    check_digest_size(r, m.build_digest);
    if (!r.failed() && m.heartbeat_ms == 0) r.fail("a heartbeat interval of 0 ms");
    if (auto e = r.finish("hello")) return *e;
    return m;
}

decoded<welcome> decode_welcome(std::string_view payload) {
    payload_reader r(payload);
    welcome m;
    m.magic = r.bytes();
    m.version = r.u32();
    m.build_digest = r.bytes();
    m.node = r.bytes();
    m.pid = r.u32();
    m.cpus = r.u32();
    std::uint8_t containment = r.u8();
    if (m.magic != magic && !m.magic.empty())
        return protocol_error{protocol_errc::bad_magic,
                              "the welcome does not start with \"" + std::string(magic) + "\""};
    check_digest_size(r, m.build_digest);
    if (!r.failed() && m.cpus == 0) r.fail("a worker with 0 CPUs");
    if (!r.failed() && (containment == 0 || containment > last_containment))
        r.fail("an unknown containment " + std::to_string(containment));
    m.containment = worker_containment{containment};
    if (auto e = r.finish("welcome")) return *e;
    return m;
}

decoded<refuse> decode_refuse(std::string_view payload) {
    payload_reader r(payload);
    refuse m;
    std::uint8_t reason = r.u8();
    m.message = r.bytes();
    if (!r.failed() && (reason == 0 || reason > last_reason))
        r.fail("an unknown reason " + std::to_string(reason));
    m.reason = refusal_reason{reason};
    if (auto e = r.finish("refuse")) return *e;
    return m;
}

std::optional<protocol_error> check_hello(const hello& m, std::string_view own_digest) {
    return check_identity("hello", m.magic, m.version, m.build_digest, own_digest);
}

std::optional<protocol_error> check_welcome(const welcome& m, std::string_view own_digest) {
    return check_identity("welcome", m.magic, m.version, m.build_digest, own_digest);
}

refuse refusal_for(const protocol_error& e) {
    refuse r;
    switch (e.code) {
        case protocol_errc::bad_magic:
            r.reason = refusal_reason::bad_magic;
            break;
        case protocol_errc::protocol_version:
            r.reason = refusal_reason::protocol_version;
            break;
        case protocol_errc::build_digest:
            r.reason = refusal_reason::build_digest;
            break;
        default:
            r.reason = refusal_reason::malformed;
            break;
    }
    r.message = e.message;
    return r;
}

protocol_error error_of(const refuse& r) {
    protocol_errc code = protocol_errc::malformed_payload;
    switch (r.reason) {
        case refusal_reason::bad_magic:
            code = protocol_errc::bad_magic;
            break;
        case refusal_reason::protocol_version:
            code = protocol_errc::protocol_version;
            break;
        case refusal_reason::build_digest:
            code = protocol_errc::build_digest;
            break;
        case refusal_reason::malformed:
            code = protocol_errc::malformed_payload;
            break;
    }
    return protocol_error{code, "the worker refused the hello: " + r.message};
}

std::optional<protocol_error> check_arrival(side receiver, bool handshake_done, message_type type) {
    using t = message_type;
    bool allowed = false;
    if (receiver == side::worker)
        allowed =
            handshake_done ? (type == t::run || type == t::cancel || type == t::heartbeat) : type == t::hello;
    else
        allowed = handshake_done
                      ? (type == t::started || type == t::output || type == t::result || type == t::heartbeat)
                      : (type == t::welcome || type == t::refuse);
    if (allowed) return std::nullopt;
    return protocol_error{protocol_errc::unexpected_message,
                          "a " + std::string(to_string(type)) + " message reached the " +
                              (receiver == side::worker ? "worker" : "driver") +
                              (handshake_done ? " after" : " before") + " the handshake"};
}

std::string digest_text(std::string_view digest) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < digest.size() && out.size() < 12; ++i) {
        auto c = static_cast<unsigned char>(digest[i]);
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 0xf]);
    }
    return out.empty() ? "(none)" : out;
}

}  // namespace agentctl::worker_protocol
