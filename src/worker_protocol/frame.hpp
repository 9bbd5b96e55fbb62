// The allocation worker's frames: a 5-byte header (payload length, little-endian u32; message
// type, u8) and a payload of fixed-order fields. Pure: no I/O, no clock, the standard library
// only; the worker's loop (src/exec) and the driver (src/runner/worker) both use it.
// docs/WORKER.md, "Frames".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace agentctl::worker_protocol {

inline constexpr std::size_t header_size = 5;
/// Largest payload before the handshake is done: a peer that is not a worker (or text instead
/// of frames) fails at its first header instead of making the reader wait for gigabytes.
inline constexpr std::uint32_t handshake_payload_limit = 4 * 1024;
/// Largest payload after it. Output travels in chunks far below it (output_chunk_limit).
inline constexpr std::uint32_t payload_limit = 16 * 1024 * 1024;
/// Largest piece of a task's output in one `output` frame.
inline constexpr std::size_t output_chunk_limit = 256 * 1024;

enum class message_type : std::uint8_t {
    hello = 1,  ///< driver -> worker, first frame
    welcome,    ///< worker -> driver: hello accepted
    refuse,     ///< worker -> driver: hello refused; the worker exits
    run,        ///< driver -> worker: start one process
    cancel,     ///< driver -> worker: end one process
    started,    ///< worker -> driver: the process was spawned
    output,     ///< worker -> driver: a chunk of its output
    result,     ///< worker -> driver: how it ended (last for its tag)
    heartbeat,  ///< both ways
    slots,      ///< driver -> worker (version 2): how many runs may be running at once
    bye,        ///< worker -> driver (version 3): every process it started is reaped; it exits
};
inline constexpr std::uint8_t last_message_type = static_cast<std::uint8_t>(message_type::bye);
std::string_view to_string(message_type t);

/// What went wrong with a frame or a payload. Any of them ends the connection: a byte stream
/// that went wrong once is never trusted to be in step again.
enum class protocol_errc {
    frame_too_large,     ///< the header announces more than the current limit
    unknown_type,        ///< the header's type is none of message_type
    truncated_stream,    ///< the stream ended inside a frame
    malformed_payload,   ///< a field runs past the payload, or a value is out of its range
    trailing_bytes,      ///< the payload has bytes after its last field
    unexpected_message,  ///< a message not allowed in the connection's state
    bad_magic,           ///< the hello or welcome does not start with `magic`
    protocol_version,    ///< the peer speaks another protocol version
    build_digest,        ///< the peer is another build of agentctl
};
std::string_view to_string(protocol_errc e);

struct protocol_error {
    protocol_errc code;
    std::string message;  ///< for people: what was seen, against what was expected
};

/// A decoded message, or why the payload is not one.
template <typename T>
class decoded {
public:
    decoded(T value) : v_(std::move(value)) {}
    decoded(protocol_error error) : v_(std::move(error)) {}
    explicit operator bool() const { return v_.index() == 0; }
    T& operator*() { return std::get<0>(v_); }
    const T& operator*() const { return std::get<0>(v_); }
    T* operator->() { return &std::get<0>(v_); }
    const T* operator->() const { return &std::get<0>(v_); }
    const protocol_error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, protocol_error> v_;
};

/// One decoded frame.
struct frame {
    message_type type = message_type::heartbeat;
    std::string payload;
};

/// Appends the frame (header, then `payload`) to `out`. Refuses, leaving `out` as it was, a
/// payload over `limit` (frame_too_large).
std::optional<protocol_error> append_frame(std::string& out, message_type type, std::string_view payload,
                                           std::uint32_t limit = payload_limit);

/// Cuts a byte stream into frames, whatever its pieces: one byte at a time or many frames in
/// one read give the same frames. The limit is checked on each header, before its payload is
/// waited for or stored. After an error it yields that error again and nothing else.
class frame_decoder {
public:
    explicit frame_decoder(std::uint32_t limit = handshake_payload_limit) : limit_(limit) {}

    /// The limit for headers not read yet (raise it once the handshake is done).
    void set_limit(std::uint32_t limit) { limit_ = limit; }
    std::uint32_t limit() const { return limit_; }

    /// Takes the next bytes of the stream.
    void feed(std::string_view bytes);

    /// What next() found.
    enum class status { frame, need_more, error };

    /// The next complete frame into `out` (status::frame), or need_more, or error (then
    /// error() says which). The header is checked as soon as its 5 bytes are there.
    status next(frame& out);

    /// Hands every complete frame to `handle` until it returns false or more bytes are needed;
    /// the error if the stream is malformed.
    template <typename Handle>
    std::optional<protocol_error> each_frame(Handle&& handle) {
        frame f;
        for (;;) {
            switch (next(f)) {
                case status::frame:
                    if (!handle(f)) return std::nullopt;
                    break;
                case status::need_more:
                    return std::nullopt;
                case status::error:
                    return error_;
            }
        }
    }

    /// The stream has ended: an error (truncated_stream) when it ended inside a frame.
    std::optional<protocol_error> finish();

    /// Set once next() or finish() returned an error.
    const std::optional<protocol_error>& error() const { return error_; }
    /// Bytes fed and not yet returned in a frame.
    std::size_t buffered() const { return buffer_.size() - start_; }

private:
    std::string buffer_;
    std::size_t start_ = 0;  ///< where the next frame begins in buffer_
    std::uint32_t limit_;
    std::optional<protocol_error> error_;
};

/// Writes payload fields in the protocol's encoding: u8, u32, u64 little-endian; bytes as a
/// u32 length and the bytes; a list as a u32 count and that many bytes; an optional as u8 0/1
/// and the value when 1.
class payload_writer {
public:
    explicit payload_writer(std::string& out) : out_(out) {}
    void u8(std::uint8_t v);
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    /// A value longer than 2^32 - 1 bytes cannot be written: the frame limit refuses far
    /// smaller ones, so callers check sizes against it first (asserted).
    void bytes(std::string_view v);
    void list(const std::vector<std::string>& v);
    void optional_bytes(const std::optional<std::string>& v);
    void optional_u64(const std::optional<std::uint64_t>& v);

private:
    std::string& out_;
};

/// Reads what payload_writer wrote. A field that runs past the end fails the reader: every
/// later read gives a zero value, and finish() reports malformed_payload. Lengths and counts
/// are checked against the bytes left before anything is allocated for them.
class payload_reader {
public:
    explicit payload_reader(std::string_view payload) : rest_(payload) {}
    std::uint8_t u8();
    std::uint32_t u32();
    std::uint64_t u64();
    std::string bytes();
    std::vector<std::string> list();
    std::optional<std::string> optional_bytes();
    std::optional<std::uint64_t> optional_u64();
    /// A boolean: 0 or 1, anything else fails the reader.
    bool flag();

    /// Marks the payload malformed (a value out of its range), saying what.
    void fail(std::string what);
    bool failed() const { return failed_; }

    /// Nothing, when every field was read and no byte is left; else why not. `what` names the
    /// message for the error text.
    std::optional<protocol_error> finish(std::string_view what) const;

private:
    bool take(std::size_t n, std::string_view& out);
    std::string_view rest_;
    bool failed_ = false;
    std::string why_;
};

}  // namespace agentctl::worker_protocol
