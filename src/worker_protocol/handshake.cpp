// The handshake of the worker protocol (docs/WORKER.md, "Handshake: the same build on both ends").
#include "worker_protocol/handshake.hpp"

#include "worker_protocol/fields.hpp"

namespace agentctl::worker_protocol {
namespace {

// Each message's fields, in wire order (fields.hpp).
constexpr auto hello_fields = [](auto& io, auto& m) {
    io(m.magic);
    io(m.version);
    io(m.build_digest);
    io(m.run_id);
    io(m.heartbeat_ms);
};
constexpr auto welcome_fields = [](auto& io, auto& m) {
    io(m.magic);
    io(m.version);
    io(m.build_digest);
    io(m.node);
    io(m.pid);
    io(m.cpus);
    io(m.containment);
};
constexpr auto refuse_fields = [](auto& io, auto& m) {
    io(m.reason);
    io(m.message);
};

// A payload that starts with another string is not a hello or welcome at all: bad_magic, not
// whatever field error the rest would give. Then the digest's size.
std::optional<protocol_error> check_start(payload_reader& r, std::string_view what, const std::string& m,
                                          const std::string& digest) {
    if (m != magic && !m.empty())
        return protocol_error{
            protocol_errc::bad_magic,
            "the " + std::string(what) + " does not start with \"" + std::string(magic) + "\""};
    if (!r.failed() && digest.size() != build_digest_size)
        r.fail("a build digest of " + std::to_string(digest.size()) + " bytes (" +
               std::to_string(build_digest_size) + " expected)");
    return std::nullopt;
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
    return detail::append_message(out, message_type::hello, m, hello_fields, handshake_payload_limit);
}

std::optional<protocol_error> append_welcome(std::string& out, const welcome& m) {
    return detail::append_message(out, message_type::welcome, m, welcome_fields, handshake_payload_limit);
}

std::optional<protocol_error> append_refuse(std::string& out, const refuse& m) {
    return detail::append_message(out, message_type::refuse, m, refuse_fields, handshake_payload_limit);
}

decoded<hello> decode_hello(std::string_view payload) {
    return detail::decode_message<hello>(payload, "hello", hello_fields,
                                         [](payload_reader& r, const hello& m) {
                                             auto e = check_start(r, "hello", m.magic, m.build_digest);
                                             if (!e && !r.failed() && m.heartbeat_ms == 0)
                                                 r.fail("a heartbeat interval of 0 ms");
                                             return e;
                                         });
}

decoded<welcome> decode_welcome(std::string_view payload) {
    return detail::decode_message<welcome>(payload, "welcome", welcome_fields,
                                           [](payload_reader& r, const welcome& m) {
                                               auto e = check_start(r, "welcome", m.magic, m.build_digest);
                                               if (!e && !r.failed() && m.cpus == 0)
                                                   r.fail("a worker with 0 CPUs");
                                               return e;
                                           });
}

decoded<refuse> decode_refuse(std::string_view payload) {
    return detail::decode_message<refuse>(
        payload, "refuse", refuse_fields,
        [](payload_reader&, const refuse&) -> std::optional<protocol_error> { return std::nullopt; });
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
        allowed = handshake_done
                      ? (type == t::run || type == t::cancel || type == t::heartbeat || type == t::slots)
                      : type == t::hello;
    else
        allowed = handshake_done ? (type == t::started || type == t::output || type == t::result ||
                                    type == t::heartbeat || type == t::bye)
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
