// The messages of a worker connection after the handshake: run, cancel, started, output,
// result, heartbeat (docs/WORKER.md, "Messages"). Pure: plain values, their payloads, and
// the range checks a decoder makes; the worker (src/exec) and the driver (src/runner/worker)
// turn them into and out of process_request / process_result.
#pragma once

#include "worker_protocol/frame.hpp"
#include "worker_protocol/handshake.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::worker_protocol {

/// How the worker contains a task's tree (process_request::containment).
enum class containment_request : std::uint8_t {
    automatic = 1,
    process_group_only = 2,
    last = process_group_only
};

/// driver -> worker: start one process. A process_request without what cannot cross a
/// machine (descriptors, a file identity): the worker opens the cwd beneath the root itself.
struct run_request {
    std::uint64_t tag = 0;                  ///< the driver's number for this launch, unique per worker
    std::string executable;                 ///< absolute
    std::vector<std::string> argv;          ///< argv[0] included; not empty
    std::vector<std::string> env;           ///< "NAME=value": the whole environment
    std::string workspace_root;             ///< absolute
    std::string cwd;                        ///< relative to the root; "" is the root
    std::optional<std::string> stdin_data;  ///< nullopt: stdin is /dev/null
    std::uint64_t stdout_limit = 1;         ///< >= 1
    std::uint64_t stderr_limit = 1;         ///< >= 1
    std::uint64_t combined_limit = 1;       ///< >= 1
    std::uint64_t timeout_ms = 1;           ///< >= 1
    std::uint64_t kill_grace_ms = 0;
    std::uint64_t drain_grace_ms = 0;
    containment_request containment = containment_request::automatic;
};

/// How a cancel ends the task: the ladder (SIGTERM, grace, SIGKILL) or SIGKILL at once.
enum class cancel_kind : std::uint8_t { graceful = 1, terminal = 2, last = terminal };

/// driver -> worker: end the task of `tag` (ignored once its result is sent).
struct cancel_request {
    std::uint64_t tag = 0;
    cancel_kind kind = cancel_kind::terminal;
};

/// worker -> driver: the task was spawned (process_started).
struct started_note {
    std::uint64_t tag = 0;
    std::uint32_t pid = 0;  ///< on the worker's node
    std::uint64_t start_lo = 0;
    std::uint64_t start_hi = 0;
    std::string cgroup;  ///< its leaf, or empty when its process group holds it
};

enum class stream_id : std::uint8_t { stdout_stream = 1, stderr_stream = 2, last = stderr_stream };

/// worker -> driver: a piece of a finished task's output, in order per stream.
struct output_chunk {
    std::uint64_t tag = 0;
    stream_id stream = stream_id::stdout_stream;
    std::string bytes;  ///< 1 to output_chunk_limit bytes
};

/// process_outcome, as the wire spells it.
enum class run_outcome : std::uint8_t {
    exited = 1,
    timed_out,
    cancelled,
    output_limit_exceeded,
    spawn_failed,
    last = spawn_failed,
};

/// How a tree was contained (process_result::used).
enum class used_containment : std::uint8_t { cgroup = 1, process_group = 2, last = process_group };

/// worker -> driver: how the task ended; its output came before, in output_chunks.
struct run_result {
    std::uint64_t tag = 0;
    run_outcome outcome = run_outcome::spawn_failed;
    std::optional<std::uint32_t> exit_code;  ///< 0..255
    std::optional<std::uint32_t> signal;     ///< 1..127
    bool core_dumped = false;
    std::string limit_stream;  ///< output_limit_exceeded: "stdout", "stderr" or "combined output"
    std::uint64_t limit_bytes = 0;
    std::uint64_t duration_us = 0;
    std::uint64_t user_us = 0;
    std::uint64_t system_us = 0;
    std::uint64_t max_rss_kib = 0;
    used_containment used = used_containment::process_group;
    std::uint32_t descendants_killed = 0;
    std::string error_code;  ///< the error code's JSON spelling (docs/ERRORS.md); empty: none
    std::string error_message;
    /// How many bytes of each stream the output chunks carried: the driver checks that it
    /// received exactly these.
    std::uint64_t stdout_size = 0;
    std::uint64_t stderr_size = 0;
};

/// driver -> worker (protocol 2): start at most `count` runs at once; a run beyond them waits
/// in the worker's queue, in arrival order, until one ends (docs/WORKER.md, "Pipelining").
/// Until the first one, every run starts when it arrives.
struct slots_limit {
    std::uint32_t count = 1;  ///< >= 1
};

/// worker -> driver (protocol 3), its last frame: the driver closed its stdin with nothing
/// running, every process the worker started has been reaped, and it exits now
/// (docs/WORKER.md, "The end of a run").
struct bye {
    std::uint64_t tasks = 0;  ///< the runs it started over its life, every one reaped
};

/// Both ways, when a direction has been idle for the heartbeat interval.
struct heartbeat {
    std::uint64_t sequence = 0;
};

/// Append the message as one frame to `out` (out unchanged and frame_too_large when it does
/// not fit payload_limit: a run whose argv, environment and stdin are too large).
std::optional<protocol_error> append_run(std::string& out, const run_request& m);
std::optional<protocol_error> append_cancel(std::string& out, const cancel_request& m);
std::optional<protocol_error> append_started(std::string& out, const started_note& m);
std::optional<protocol_error> append_result(std::string& out, const run_result& m);
std::optional<protocol_error> append_heartbeat(std::string& out, const heartbeat& m);
std::optional<protocol_error> append_slots(std::string& out, const slots_limit& m);
std::optional<protocol_error> append_bye(std::string& out, const bye& m);

/// Appends `bytes` of one stream as output frames of at most output_chunk_limit bytes each
/// (none for no bytes).
void append_output(std::string& out, std::uint64_t tag, stream_id stream, std::string_view bytes);

/// The message from a payload, checked: every enum value known, the run's executable and root
/// absolute, its argv not empty, its limits and timeout >= 1; a chunk not empty and within
/// output_chunk_limit; an exit code within 0..255 and a signal within 1..127.
decoded<run_request> decode_run(std::string_view payload);
decoded<cancel_request> decode_cancel(std::string_view payload);
decoded<started_note> decode_started(std::string_view payload);
decoded<output_chunk> decode_output(std::string_view payload);
decoded<run_result> decode_result(std::string_view payload);
decoded<heartbeat> decode_heartbeat(std::string_view payload);
/// A count of 0 is malformed.
decoded<slots_limit> decode_slots(std::string_view payload);
decoded<bye> decode_bye(std::string_view payload);

/// One end's heartbeats (docs/WORKER.md, "Messages"): a direction idle for `interval` carries
/// a heartbeat, and a peer that sends nothing for missed intervals is gone. The times are the
/// caller's steady clock's, a std::chrono time point and milliseconds (this library reads no
/// clock and includes no <chrono>).
template <typename time_point, typename milliseconds>
struct heartbeats {
    static constexpr int missed = 3;

    milliseconds interval{1000};
    time_point last_received{}, last_sent{};
    std::uint64_t sent = 0;

    /// The peer has sent nothing for `missed` intervals.
    bool peer_gone(time_point now) const { return now - last_received > missed * interval; }
    /// This end has sent nothing for an interval.
    bool idle(time_point now) const { return now - last_sent >= interval; }
    /// How long a peer stays silent before it is gone, in ms: for the message that says so.
    std::string silence_limit() const { return std::to_string(missed * interval.count()) + " ms"; }
    /// The frame of the next heartbeat.
    std::string next_frame() {
        std::string frame;
        append_heartbeat(frame, {++sent});
        return frame;
    }
};

}  // namespace agentctl::worker_protocol
