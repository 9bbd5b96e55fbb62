// Streaming JSON output with a fixed member order, so every document we print is byte-stable.
#pragma once

#include <agentctl/diagnostic.hpp>

#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// Where serialised JSON goes, in pieces.
class json_sink {
public:
    virtual ~json_sink() = default;
    virtual void write(std::string_view bytes) = 0;
};

/// Collects everything into a string.
class string_sink final : public json_sink {
public:
    void write(std::string_view bytes) override { text.append(bytes); }
    std::string text;
};

/// Writes JSON tokens, adding commas and colons itself. Buffers internally; call flush()
/// (or destroy the writer) before reading what the sink got. Strings must be valid UTF-8
/// (see to_utf8_lossy); control characters are escaped.
class json_writer {
public:
    explicit json_writer(json_sink& sink) : sink_(sink) {}
    ~json_writer() { flush(); }
    json_writer(const json_writer&) = delete;
    json_writer& operator=(const json_writer&) = delete;

    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    void key(std::string_view k);

    void string(std::string_view s);
    /// A string holding `bytes` in base64 (RFC 4648, padded): any bytes, 4 characters per 3.
    void base64(std::string_view bytes);
    void boolean(bool b);
    void number(std::int64_t n);
    void number(std::uint64_t n);
    void number(int n) { number(static_cast<std::int64_t>(n)); }
    void number(double d);
    void null();
    void value(const boost::json::value& v);

    /// `key` then `string`.
    void member(std::string_view k, std::string_view s) {
        key(k);
        string(s);
    }
    void member(std::string_view k, const char* s) {
        key(k);
        string(s);
    }
    void member(std::string_view k, bool b) {
        key(k);
        boolean(b);
    }
    void member(std::string_view k, std::int64_t n) {
        key(k);
        number(n);
    }
    void member(std::string_view k, std::uint64_t n) {
        key(k);
        number(n);
    }
    void member(std::string_view k, int n) {
        key(k);
        number(n);
    }
    void member(std::string_view k, const boost::json::value& v) {
        key(k);
        value(v);
    }

    /// Inserts already-serialised JSON as the next value.
    void raw_value(std::string_view json);
    /// Inserts already-serialised members of an object (`"a":1,"b":2`: what another writer
    /// wrote between an object's braces) into the open object; nothing when empty.
    void raw_members(std::string_view members);
    void flush();

private:
    // A comma goes before a value inside a container unless it opens the container or follows
    // a key: one flag and a depth instead of a stack (this runs once per value).
    void before_value() {
        if (need_comma_) put(',');
        need_comma_ = depth_ > 0;
    }
    void open(char bracket) {
        before_value();
        put(bracket);
        ++depth_;
        need_comma_ = false;
    }
    void close(char bracket) {
        put(bracket);
        --depth_;
        need_comma_ = depth_ > 0;
    }
    void put_string(std::string_view s);
    void put_large(std::string_view s);
    // Small pieces (punctuation, keys, numbers) are appended inline; the buffer is flushed
    // once it reaches flush_at, so it stays about that size.
    void put(std::string_view s) {
        if (s.size() >= flush_at) return put_large(s);
        buffer_.append(s);
        if (buffer_.size() >= flush_at) flush();
    }
    void put(char c) {
        buffer_.push_back(c);
        if (buffer_.size() >= flush_at) flush();
    }
    static constexpr std::size_t flush_at = 64 * 1024;

    json_sink& sink_;
    std::string buffer_;       // pending bytes; small writers (one value) never allocate much
    std::string encoded_;      // base64(): one slice's digits, made on first use
    std::size_t depth_ = 0;    // open containers
    bool need_comma_ = false;  // a value was written in the innermost container, no key since
};

/// A duration in milliseconds as JSON seconds: an integer when whole (10), else a decimal (0.2).
void write_seconds(json_writer& w, std::int64_t ms);

/// A duration in milliseconds for people: "10s", "0.2s", "1.25s".
std::string seconds_text(std::int64_t ms);

/// A valid UTF-8 copy of `bytes`: each invalid sequence becomes U+FFFD and sets `lossy`.
std::string to_utf8_lossy(std::string_view bytes, bool& lossy);
/// The same in place: valid text is left as it is (no copy).
void make_utf8_lossy(std::string& bytes, bool& lossy);
void make_utf8_lossy(boost::json::string& bytes, bool& lossy);

/// Whether `bytes` is valid UTF-8.
bool is_valid_utf8(std::string_view bytes);

/// Whether `bytes` reads as text: valid UTF-8 without a NUL byte (a NUL marks binary data, as
/// for git and grep). What `--output json` writes as a JSON string rather than in base64.
bool is_text(std::string_view bytes);

/// The longest prefix of `text` of at most `max_bytes` that does not end inside a UTF-8
/// sequence: for shortening text shown in messages.
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes);

/// `{code, severity, message, file, line, column, path, help}`.
void write_diagnostic(json_writer& w, const diagnostic& d);
void write_diagnostics(json_writer& w, const diagnostics& ds);

/// One value serialised on its own, canonically (object members in stored order).
std::string to_json(const boost::json::value& v);

/// A problem in JSON text that Boost.JSON's parser accepts.
struct json_finding {
    std::string code;        ///< duplicate_key, nul_byte, out_of_range or item_too_long
    std::size_t offset = 0;  ///< byte offset into the text
    std::string message;
    std::string help;
};

/// JSON text read with Boost.JSON's parser, adding what it does not check: duplicate keys
/// (the first is kept), NUL characters in strings, integers beyond 64 bits and doubles out of
/// range. Numbers are converted with std::from_chars (Boost.JSON 1.81 can be one unit in the
/// last place off). A string value (not a key) longer than `max_string_bytes` is a finding
/// too (item_too_long). `value` is set when the text is JSON without findings; `syntax` (and
/// `syntax_offset`) when it is not JSON. `root_name` names the whole value in messages.
struct json_read_result {
    std::optional<boost::json::value> value;
    std::vector<json_finding> findings;  ///< at most 100
    boost::system::error_code syntax;
    std::size_t syntax_offset = 0;
};
json_read_result read_json(std::string_view text, std::string_view root_name = "the value",
                           std::size_t max_depth = 100,
                           std::size_t max_string_bytes = std::numeric_limits<std::size_t>::max());

/// "sha256:<hex>" of `bytes`.
std::string sha256_digest(std::string_view bytes);

}  // namespace agentctl
