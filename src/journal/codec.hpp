// How records become bytes: task results as JSON without their streams, string lists as JSON
// arrays, and the CRC-32C that guards every stored stream. Private to src/journal.
#pragma once

#include <agentctl/runner.hpp>

#include <boost/json/object.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::journal_detail {

/// CRC-32C (Castagnoli), hardware-assisted where the CPU has SSE4.2. `crc` continues a
/// previous call's result over the bytes that follow.
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);
/// The same, byte by byte from a table: what tests compare crc32c() with.
std::uint32_t crc32c_portable(std::string_view bytes, std::uint32_t crc = 0);

/// The two streams of a result, wherever the result keeps them (see stdout_of()).
struct result_streams {
    std::string_view out;
    std::string_view err;
};
result_streams streams_of(const task_result& r);

/// `r` as JSON without its streams: stdout_text/stderr_text are left out, and when the
/// streams are kept in `output`, output.stdout/output.stderr are written as null (in place, so
/// member order survives) and listed under "stripped".
std::string encode_result(const task_result& r);

/// Parses encode_result()'s JSON. False on malformed input.
bool decode_result(std::string_view json, task_result& r);

/// Puts a stream back where encode_result() took it from.
void attach_stream(task_result& r, bool is_stdout, std::string text);

/// The same, a chunk at a time: the returned function appends each chunk read back straight
/// to where attach_stream() would put the stream, with room made once for `length` bytes (the
/// recorded length): one copy per byte, no regrowth. `r` must outlive the function.
std::function<void(std::string_view)> stream_appender(task_result& r, bool is_stdout, std::uint64_t length);

std::string encode_strings(const std::vector<std::string>& items);
std::vector<std::string> decode_strings(std::string_view json);

std::string encode_object(const boost::json::object& o);
boost::json::object decode_object(std::string_view json);

std::optional<task_state> parse_task_state(std::string_view s);

}  // namespace agentctl::journal_detail
