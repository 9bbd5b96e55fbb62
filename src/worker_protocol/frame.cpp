// Frames and payload fields of the worker protocol (docs/WORKER.md, "Frames").
#include "worker_protocol/frame.hpp"

#include <cassert>
#include <limits>

namespace agentctl::worker_protocol {
namespace {

void put_le(std::string& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
    return v;
}

}  // namespace

std::string_view to_string(message_type t) {
    switch (t) {
        case message_type::hello:
            return "hello";
        case message_type::welcome:
            return "welcome";
        case message_type::refuse:
            return "refuse";
        case message_type::run:
            return "run";
        case message_type::cancel:
            return "cancel";
        case message_type::started:
            return "started";
        case message_type::output:
            return "output";
        case message_type::result:
            return "result";
        case message_type::heartbeat:
            return "heartbeat";
        case message_type::slots:
            return "slots";
        case message_type::bye:
            return "bye";
    }
    return "unknown";
}

std::string_view to_string(protocol_errc e) {
    switch (e) {
        case protocol_errc::frame_too_large:
            return "frame_too_large";
        case protocol_errc::unknown_type:
            return "unknown_type";
        case protocol_errc::truncated_stream:
            return "truncated_stream";
        case protocol_errc::malformed_payload:
            return "malformed_payload";
        case protocol_errc::trailing_bytes:
            return "trailing_bytes";
        case protocol_errc::unexpected_message:
            return "unexpected_message";
        case protocol_errc::bad_magic:
            return "bad_magic";
        case protocol_errc::protocol_version:
            return "protocol_version";
        case protocol_errc::build_digest:
            return "build_digest";
    }
    return "unknown";
}

std::optional<protocol_error> append_frame(std::string& out, message_type type, std::string_view payload,
                                           std::uint32_t limit) {
    if (payload.size() > limit)
        return protocol_error{protocol_errc::frame_too_large,
                              "a " + std::string(to_string(type)) + " frame of " +
                                  std::to_string(payload.size()) + " bytes is over the limit of " +
                                  std::to_string(limit) + " bytes"};
    out.reserve(out.size() + header_size + payload.size());
    put_le(out, payload.size(), 4);
    out.push_back(static_cast<char>(type));
    out.append(payload);
    return std::nullopt;
}

void frame_decoder::feed(std::string_view bytes) {
    if (error_) return;
    // Drop what was returned already once it is most of the buffer, so a long stream of
    // small frames neither grows the buffer nor moves the unread bytes on every frame.
    if (start_ > 0 && start_ >= buffer_.size() / 2) {
        buffer_.erase(0, start_);
        start_ = 0;
    }
    buffer_.append(bytes);
}

frame_decoder::status frame_decoder::next(frame& out) {
    if (error_) return status::error;
    std::string_view rest(buffer_);
    rest.remove_prefix(start_);
    if (rest.size() < header_size) return status::need_more;
    std::uint64_t length = get_le(rest, 4);
    auto type = static_cast<std::uint8_t>(rest[4]);
    if (type == 0 || type > last_message_type) {
        error_ = protocol_error{protocol_errc::unknown_type,
                                "a frame of unknown type " + std::to_string(type) + " (the peer is not " +
                                    "an agentctl worker or driver of this protocol, or the stream is " +
                                    "out of step)"};
        return status::error;
    }
    if (length > limit_) {
        error_ = protocol_error{protocol_errc::frame_too_large,
                                "a " + std::string(to_string(message_type{type})) + " frame announces " +
                                    std::to_string(length) + " bytes, over the limit of " +
                                    std::to_string(limit_) + " bytes"};
        return status::error;
    }
    if (rest.size() - header_size < length) return status::need_more;
    out.type = message_type{type};
    out.payload.assign(rest.substr(header_size, length));
    start_ += header_size + length;
    if (start_ == buffer_.size()) {
        buffer_.clear();
        start_ = 0;
    }
    return status::frame;
}

std::optional<protocol_error> frame_decoder::finish() {
    if (error_) return error_;
    if (buffered() > 0)
        error_ = protocol_error{
            protocol_errc::truncated_stream,
            "the stream ended inside a frame (" + std::to_string(buffered()) + " bytes of it had arrived)"};
    return error_;
}

void payload_writer::u8(std::uint8_t v) {
    out_.push_back(static_cast<char>(v));
}
void payload_writer::u32(std::uint32_t v) {
    put_le(out_, v, 4);
}
void payload_writer::u64(std::uint64_t v) {
    put_le(out_, v, 8);
}

void payload_writer::bytes(std::string_view v) {
    assert(v.size() <= std::numeric_limits<std::uint32_t>::max());
    u32(static_cast<std::uint32_t>(v.size()));
    out_.append(v);
}

void payload_writer::list(const std::vector<std::string>& v) {
    assert(v.size() <= std::numeric_limits<std::uint32_t>::max());
    u32(static_cast<std::uint32_t>(v.size()));
    for (const auto& s : v) bytes(s);
}

void payload_writer::optional_bytes(const std::optional<std::string>& v) {
    u8(v ? 1 : 0);
    if (v) bytes(*v);
}

void payload_writer::optional_u64(const std::optional<std::uint64_t>& v) {
    u8(v ? 1 : 0);
    if (v) u64(*v);
}

bool payload_reader::take(std::size_t n, std::string_view& out) {
    if (failed_) return false;
    if (rest_.size() < n) {
        fail("a field of " + std::to_string(n) + " bytes runs past the payload's end (" +
             std::to_string(rest_.size()) + " left)");
        return false;
    }
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
}

std::uint8_t payload_reader::u8() {
    std::string_view v;
    return take(1, v) ? static_cast<std::uint8_t>(v[0]) : 0;
}

std::uint32_t payload_reader::u32() {
    std::string_view v;
    return take(4, v) ? static_cast<std::uint32_t>(get_le(v, 4)) : 0;
}

std::uint64_t payload_reader::u64() {
    std::string_view v;
    return take(8, v) ? get_le(v, 8) : 0;
}

std::string payload_reader::bytes() {
    std::uint32_t n = u32();
    std::string_view v;
    return take(n, v) ? std::string(v) : std::string();
}

std::vector<std::string> payload_reader::list() {
    std::uint32_t count = u32();
    // Each element takes at least its 4-byte length: a count the rest cannot hold is refused
    // before a vector of that size is made.
    if (!failed_ && count > rest_.size() / 4) {
        fail("a list of " + std::to_string(count) + " elements cannot fit in the " +
             std::to_string(rest_.size()) + " bytes left");
        return {};
    }
    std::vector<std::string> out;
    out.reserve(count);
    for (std::uint32_t i = 0; i < count && !failed_; ++i) out.push_back(bytes());
    if (failed_) out.clear();
    return out;
}

bool payload_reader::flag() {
    std::uint8_t v = u8();
    if (v > 1) fail("a flag of value " + std::to_string(v) + " (0 or 1 expected)");
    return v == 1;
}

std::optional<std::string> payload_reader::optional_bytes() {
    if (!flag() || failed_) return std::nullopt;
    std::string v = bytes();
    if (failed_) return std::nullopt;
    return v;
}

std::optional<std::uint64_t> payload_reader::optional_u64() {
    if (!flag() || failed_) return std::nullopt;
    std::uint64_t v = u64();
    if (failed_) return std::nullopt;
    return v;
}

void payload_reader::fail(std::string what) {
    if (failed_) return;  // the first problem is the one to report
    failed_ = true;
    why_ = std::move(what);
}

std::optional<protocol_error> payload_reader::finish(std::string_view what) const {
    if (failed_)
        return protocol_error{protocol_errc::malformed_payload,
                              "a malformed " + std::string(what) + " message: " + why_};
    if (!rest_.empty())
        return protocol_error{protocol_errc::trailing_bytes, "a " + std::string(what) + " message with " +
                                                                 std::to_string(rest_.size()) +
                                                                 " bytes after its last field"};
    return std::nullopt;
}

}  // namespace agentctl::worker_protocol
