// Inside src/worker_protocol: each message's fields are listed once, as a generic lambda
// `fields(io, message)`, and walked by a field_writer to encode or a field_reader to decode, so
// an encoder and its decoder cannot disagree on order or types.
#pragma once

#include "worker_protocol/frame.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace agentctl::worker_protocol::detail {

struct field_writer {
    payload_writer& w;
    void operator()(std::uint32_t v) { w.u32(v); }
    void operator()(std::uint64_t v) { w.u64(v); }
    void operator()(bool v) { w.u8(v ? 1 : 0); }
    void operator()(const std::string& v) { w.bytes(v); }
    void operator()(const std::vector<std::string>& v) { w.list(v); }
    void operator()(const std::optional<std::string>& v) { w.optional_bytes(v); }
    void operator()(const std::optional<std::uint32_t>& v) {
        w.optional_u64(v ? std::optional<std::uint64_t>(*v) : std::nullopt);
    }
    /// An enum is one byte; its values start at 1.
    template <typename Enum>
    requires std::is_enum_v<Enum>
    void operator()(Enum v) { w.u8(static_cast<std::uint8_t>(v)); }
};

struct field_reader {
    payload_reader& r;
    void operator()(std::uint32_t& v) { v = r.u32(); }
    void operator()(std::uint64_t& v) { v = r.u64(); }
    void operator()(bool& v) { v = r.flag(); }
    void operator()(std::string& v) { v = r.bytes(); }
    void operator()(std::vector<std::string>& v) { v = r.list(); }
    void operator()(std::optional<std::string>& v) { v = r.optional_bytes(); }
    void operator()(std::optional<std::uint32_t>& v) {
        std::optional<std::uint64_t> wide = r.optional_u64();
        v.reset();
        if (wide && *wide > UINT32_MAX)
            r.fail("a value of " + std::to_string(*wide) + " where at most " + std::to_string(UINT32_MAX) +
                   " fits");
        else if (wide)
            v = static_cast<std::uint32_t>(*wide);
    }
    /// An enum's byte must be one of its values: 1 to its `last`.
    template <typename Enum>
    requires std::is_enum_v<Enum>
    void operator()(Enum& v) {
        std::uint8_t b = r.u8();
        if (!r.failed() && (b == 0 || b > static_cast<std::uint8_t>(Enum::last)))
            r.fail("an unknown enumerated value " + std::to_string(b));
        v = Enum{b};
    }
};

/// `m` as one frame of `type`, its fields as `fields` lists them.
template <typename Message, typename Fields>
std::optional<protocol_error> append_message(std::string& out, message_type type, const Message& m,
                                             Fields fields, std::uint32_t limit) {
    std::string payload;
    payload_writer w(payload);
    field_writer io{w};
    fields(io, m);
    return append_frame(out, type, payload, limit);
}

/// A message from `payload` as `fields` lists them; then `check(reader, message)`, which may
/// fail the reader (a value out of range) or return an error of its own; then nothing may be
/// left. `what` names the message in errors.
template <typename Message, typename Fields, typename Check>
decoded<Message> decode_message(std::string_view payload, std::string_view what, Fields fields, Check check) {
    payload_reader r(payload);
    Message m;
    field_reader io{r};
    fields(io, m);
    if (std::optional<protocol_error> e = check(r, m)) return *e;
    if (auto e = r.finish(what)) return *e;
    return m;
}

}  // namespace agentctl::worker_protocol::detail
