// The first frames of a worker connection: the driver's hello, the worker's welcome or refusal,
// and which messages each side may receive before and after them. Pure (docs/WORKER.md,
// "Handshake: the same build on both ends").
#pragma once

#include "worker_protocol/frame.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::worker_protocol {

/// Starts every hello and welcome: a peer that is not agentctl is caught at its first frame.
inline constexpr std::string_view magic = "agentctl-worker";
/// Changes whenever a message's fields or meaning change.
inline constexpr std::uint32_t protocol_version = 3;
/// A build digest is the SHA-256 of the agentctl executable's bytes: 32 bytes.
inline constexpr std::size_t build_digest_size = 32;

/// driver -> worker, the first frame.
struct hello {
    std::string magic{worker_protocol::magic};
    std::uint32_t version = protocol_version;
    std::string build_digest;           ///< build_digest_size bytes
    std::string run_id;                 ///< for the worker's diagnostics
    std::uint32_t heartbeat_ms = 1000;  ///< >= 1: each side's idle interval; 3 missed end the connection
};

/// How the worker contains the trees it starts (what `result` will say, per task).
enum class worker_containment : std::uint8_t { cgroup = 1, process_group = 2, last = process_group };

/// worker -> driver: the hello was accepted.
struct welcome {
    std::string magic{worker_protocol::magic};
    std::uint32_t version = protocol_version;
    std::string build_digest;  ///< the worker's own; must equal the driver's
    std::string node;          ///< the worker's host name
    std::uint32_t pid = 0;     ///< the worker's pid on its node
    std::uint32_t cpus = 0;    ///< >= 1: the CPUs it may use, its slots
    worker_containment containment = worker_containment::process_group;
};

/// Why a worker refused a hello.
enum class refusal_reason : std::uint8_t {
    bad_magic = 1,
    protocol_version = 2,
    build_digest = 3,
    malformed = 4,
    last = malformed
};

/// worker -> driver: the hello was refused; the worker exits having run nothing.
struct refuse {
    refusal_reason reason = refusal_reason::malformed;
    std::string message;  ///< names both sides' values
};

/// Append the message as one frame to `out`; frame_too_large (out unchanged) when its fields
/// do not fit the handshake's limit.
std::optional<protocol_error> append_hello(std::string& out, const hello& m);
std::optional<protocol_error> append_welcome(std::string& out, const welcome& m);
std::optional<protocol_error> append_refuse(std::string& out, const refuse& m);

/// The message from a frame's payload: malformed_payload or trailing_bytes when it is not
/// exactly one (a digest of another size, a heartbeat of 0, cpus 0, an unknown enum value).
decoded<hello> decode_hello(std::string_view payload);
decoded<welcome> decode_welcome(std::string_view payload);
decoded<refuse> decode_refuse(std::string_view payload);

/// The worker's check of a hello, in this order: magic (bad_magic), protocol version
/// (protocol_version), build digest against `own_digest` (build_digest). Nothing when
/// accepted. The message names both values.
std::optional<protocol_error> check_hello(const hello& m, std::string_view own_digest);
/// The driver's check of a welcome, the same three.
std::optional<protocol_error> check_welcome(const welcome& m, std::string_view own_digest);

/// The refusal a worker sends for a check_hello (or decode_hello) error.
refuse refusal_for(const protocol_error& e);
/// A refusal as the driver reports it: the reason's code and the worker's message.
protocol_error error_of(const refuse& r);

/// Which end of the connection receives.
enum class side { driver, worker };

/// Whether `type` may arrive at `receiver` now: before the handshake only hello (at the
/// worker) and welcome or refuse (at the driver); after it run, cancel and heartbeat at the
/// worker, started, output, result and heartbeat at the driver. unexpected_message otherwise.
std::optional<protocol_error> check_arrival(side receiver, bool handshake_done, message_type type);

/// The first 12 hex digits of a digest, for messages.
std::string digest_text(std::string_view digest);

}  // namespace agentctl::worker_protocol
