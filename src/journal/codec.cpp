#include "journal/codec.hpp"

#include <agentctl/json.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <array>
#include <cstring>

namespace agentctl::journal_detail {

namespace json = boost::json;

namespace {

constexpr std::uint32_t crc32c_poly = 0x82f63b78;  // reflected Castagnoli

std::array<std::uint32_t, 256> make_table() {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? crc32c_poly : 0);
        t[i] = c;
    }
    return t;
}

std::uint32_t crc32c_table(const unsigned char* p, std::size_t n, std::uint32_t crc) {
    static const auto table = make_table();
    while (n--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

// The hardware path runs three independent CRC streams over adjacent blocks (the crc32
// instruction has a latency of three cycles and a throughput of one), then joins them: the
// register after A||B is the register after A shifted over len(B) zero bytes, xor the
// register after B from zero. The shift is a linear map, tabulated per block length.
// (After Mark Adler's crc32c.c.)
using shift_table = std::array<std::array<std::uint32_t, 256>, 4>;

std::uint32_t gf2_times(const std::uint32_t* mat, std::uint32_t vec) {
    std::uint32_t sum = 0;
    for (; vec; vec >>= 1, ++mat)
        if (vec & 1) sum ^= *mat;
    return sum;
}

void gf2_square(std::uint32_t* square, const std::uint32_t* mat) {
    for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// The operator that feeds `len` zero bytes (a power of two) to a CRC register.
void zeros_operator(std::uint32_t* even, std::size_t len) {
    std::uint32_t odd[32];
    odd[0] = crc32c_poly;  // one zero bit
    for (int n = 1; n < 32; ++n) odd[n] = 1u << (n - 1);
    gf2_square(even, odd);  // two bits
    gf2_square(odd, even);  // four bits
    for (;;) {
        gf2_square(even, odd);  // 1, 4, 16, ... bytes
        len >>= 1;
        if (len == 0) return;
        gf2_square(odd, even);  // 2, 8, 32, ... bytes
        len >>= 1;
        if (len == 0) break;
    }
    for (int n = 0; n < 32; ++n) even[n] = odd[n];
}

shift_table make_shift(std::size_t len) {
    std::uint32_t op[32];
    zeros_operator(op, len);
    shift_table t{};
    for (std::uint32_t n = 0; n < 256; ++n)
        for (int k = 0; k < 4; ++k) t[k][n] = gf2_times(op, n << (8 * k));
    return t;
}

std::uint32_t shift(const shift_table& t, std::uint32_t crc) {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

constexpr std::size_t long_block = 8192;
constexpr std::size_t short_block = 256;

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint64_t crc32c_u64(std::uint64_t crc, const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_ia32_crc32di(crc, v);
}

template <std::size_t Block>
__attribute__((target("sse4.2"))) void three_way(const shift_table& t, std::uint64_t& crc,
                                                 const unsigned char*& p, std::size_t& n) {
    while (n >= 3 * Block) {
        std::uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (const unsigned char* end = p + Block; p < end; p += 8) {
            c0 = crc32c_u64(c0, p);
            c1 = crc32c_u64(c1, p + Block);
            c2 = crc32c_u64(c2, p + 2 * Block);
        }
        std::uint32_t joined = shift(t, static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1);
        crc = shift(t, joined) ^ static_cast<std::uint32_t>(c2);
        p += 2 * Block;
        n -= 3 * Block;
    }
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(const unsigned char* p, std::size_t n,
                                                             std::uint32_t crc) {
    static const shift_table long_shift = make_shift(long_block);
    static const shift_table short_shift = make_shift(short_block);
    std::uint64_t c = crc;
    three_way<long_block>(long_shift, c, p, n);
    three_way<short_block>(short_shift, c, p, n);
    for (; n >= 8; p += 8, n -= 8) c = crc32c_u64(c, p);
    auto c32 = static_cast<std::uint32_t>(c);
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

}  // namespace

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
    auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    crc = ~crc;
#if defined(__x86_64__)
    static const bool hw = __builtin_cpu_supports("sse4.2");
    if (hw) return ~crc32c_sse42(p, bytes.size(), crc);
#endif
    return ~crc32c_table(p, bytes.size(), crc);
}

std::uint32_t crc32c_portable(std::string_view bytes, std::uint32_t crc) {
    return ~crc32c_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), ~crc);
}

result_streams streams_of(const task_result& r) {
    return {stdout_of(r), stderr_of(r)};
}

namespace {

// Streams kept in `output` as strings, which encode_result() writes as null.
bool stream_in_output(const task_result& r, std::string_view key) {
    if (!r.streams_in_output || !r.output.is_object()) return false;
    auto* v = r.output.get_object().if_contains(key);
    return v && v->is_string();
}

}  // namespace

std::string encode_result(const task_result& r) {
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_object();
        w.member("state", to_string(r.state));
        w.member("attempts", static_cast<std::uint64_t>(r.attempts));
        if (r.exit_code) w.member("exit_code", *r.exit_code);
        if (r.signal) w.member("signal", *r.signal);
        if (r.stdout_lossy) w.member("stdout_lossy", true);
        if (r.stderr_lossy) w.member("stderr_lossy", true);
        w.member("duration_ms", r.duration_ms);
        if (!r.command.empty()) w.member("command", r.command);
        if (!r.argv.empty()) {
            w.key("argv");
            w.begin_array();
            for (const auto& a : r.argv) w.string(a);
            w.end_array();
        }
        if (!r.isolation.empty()) w.member("isolation", r.isolation);
        if (r.backend != "local") w.member("backend", r.backend);
        if (r.slurm_job_id) w.member("slurm_job_id", *r.slurm_job_id);
        if (!r.slurm_node.empty()) w.member("slurm_node", r.slurm_node);
        if (!r.slurm_worker.empty()) w.member("slurm_worker", r.slurm_worker);
        if (!r.slurm_state.empty()) w.member("slurm_state", r.slurm_state);
        if (!r.engine.empty()) w.member("engine", r.engine);
        if (!r.containment.empty()) w.member("containment", r.containment);
        if (r.descendants_killed)
            w.member("descendants_killed", static_cast<std::uint64_t>(r.descendants_killed));
        w.key("usage");
        w.begin_object();
        w.member("user_us", r.usage.user_us);
        w.member("system_us", r.usage.system_us);
        w.member("max_rss_kib", r.usage.max_rss_kib);
        w.end_object();
        if (!r.limit_stream.empty()) {
            w.member("limit_stream", r.limit_stream);
            w.member("limit_bytes", r.limit_bytes);
        }
        if (r.output_bytes) w.member("output_bytes", r.output_bytes);
        if (r.output_passed_through) w.member("output_passed_through", true);
        if (r.error) {
            w.key("error");
            w.begin_object();
            w.member("code", to_string(r.error->code));
            w.member("message", r.error->message);
            w.end_object();
        }
        if (r.streams_in_output) w.member("streams_in_output", true);
        // An aggregate recorded without its items: they are its children's finals (schema 3).
        if (r.output_released) w.member("output_released", true);
        bool strip_out = stream_in_output(r, "stdout"), strip_err = stream_in_output(r, "stderr");
        if (strip_out || strip_err) {
            w.key("stripped");
            w.begin_array();
            if (strip_out) w.string("stdout");
            if (strip_err) w.string("stderr");
            w.end_array();
            w.key("output");
            w.begin_object();
            for (const auto& m : r.output.get_object()) {
                w.key(m.key());
                if ((strip_out && m.key() == "stdout") || (strip_err && m.key() == "stderr"))
                    w.null();
                else
                    w.value(m.value());
            }
            w.end_object();
        } else {
            w.member("output", r.output);
        }
        w.end_object();
    }
    return std::move(sink.text);
}

namespace {

std::string string_at(const json::object& o, std::string_view key) {
    auto* v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::uint64_t uint_at(const json::object& o, std::string_view key) {
    auto* v = o.if_contains(key);
    if (!v) return 0;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    return 0;
}

std::optional<int> int_at(const json::object& o, std::string_view key) {
    auto* v = o.if_contains(key);
    if (!v || !v->is_int64()) return std::nullopt;
    return static_cast<int>(v->get_int64());
}

}  // namespace

std::optional<task_state> parse_task_state(std::string_view s) {
    for (auto st : {task_state::succeeded, task_state::failed, task_state::timed_out, task_state::cancelled,
                    task_state::output_limit_exceeded, task_state::spawn_failed, task_state::skipped})
        if (to_string(st) == s) return st;
    return std::nullopt;
}

bool decode_result(std::string_view text, task_result& r) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return false;
    json::object& o = v.get_object();
    auto state = parse_task_state(string_at(o, "state"));
    if (!state) return false;
    r = task_result{};
    r.state = *state;
    r.attempts = static_cast<std::uint32_t>(uint_at(o, "attempts"));
    r.exit_code = int_at(o, "exit_code");
    r.signal = int_at(o, "signal");
    r.stdout_lossy = o.contains("stdout_lossy");
    r.stderr_lossy = o.contains("stderr_lossy");
    r.duration_ms = uint_at(o, "duration_ms");
    r.command = string_at(o, "command");
    r.isolation = string_at(o, "isolation");
    if (auto* a = o.if_contains("argv"); a && a->is_array())
        for (const auto& x : a->get_array())
            if (x.is_string()) r.argv.emplace_back(x.get_string());
    if (o.contains("backend")) r.backend = string_at(o, "backend");
    if (o.contains("slurm_job_id")) r.slurm_job_id = uint_at(o, "slurm_job_id");
    r.slurm_node = string_at(o, "slurm_node");
    r.slurm_worker = string_at(o, "slurm_worker");
    r.slurm_state = string_at(o, "slurm_state");
    r.engine = string_at(o, "engine");
    r.containment = string_at(o, "containment");
    r.descendants_killed = static_cast<std::uint32_t>(uint_at(o, "descendants_killed"));
    if (auto* u = o.if_contains("usage"); u && u->is_object()) {
        r.usage.user_us = uint_at(u->get_object(), "user_us");
        r.usage.system_us = uint_at(u->get_object(), "system_us");
        r.usage.max_rss_kib = uint_at(u->get_object(), "max_rss_kib");
    }
    r.limit_stream = string_at(o, "limit_stream");
    r.limit_bytes = uint_at(o, "limit_bytes");
    r.output_bytes = uint_at(o, "output_bytes");
    r.output_passed_through = o.contains("output_passed_through");
    if (auto* e = o.if_contains("error"); e && e->is_object())
        r.error = task_error{error_code_from_string(string_at(e->get_object(), "code")).value_or(error_code::internal_error),
                             string_at(e->get_object(), "message")};
    r.streams_in_output = o.contains("streams_in_output");
    r.output_released = o.contains("output_released");
    if (auto* out = o.if_contains("output")) r.output = std::move(*out);
    if (r.streams_in_output && r.output.is_object()) {
        // Stripped streams read back as "" until attach_stream() fills them in.
        if (auto* s = o.if_contains("stripped"); s && s->is_array())
            for (const auto& k : s->get_array())
                if (k.is_string()) r.output.get_object()[k.get_string()] = "";
    }
    return true;
}

void attach_stream(task_result& r, bool is_stdout, std::string text) {
    std::string_view key = is_stdout ? "stdout" : "stderr";
    if (r.streams_in_output && r.output.is_object()) {
        if (auto* v = r.output.get_object().if_contains(key); v && v->is_string()) {
            *v = json::string(text);
            return;
        }
    }
    (is_stdout ? r.stdout_text : r.stderr_text) = std::move(text);
}

std::function<void(std::string_view)> stream_appender(task_result& r, bool is_stdout, std::uint64_t length) {
    // A damaged length must not ask for more than a stream can hold: the room is a hint only.
    const auto room = static_cast<std::size_t>(std::min(length, limits::max_stream_limit_bytes));
    std::string_view key = is_stdout ? "stdout" : "stderr";
    if (r.streams_in_output && r.output.is_object()) {
        if (auto* v = r.output.get_object().if_contains(key); v && v->is_string()) {
            json::string& text = v->get_string();
            text.clear();
            text.reserve(room);
            return [&text](std::string_view chunk) { text.append(chunk); };
        }
    }
    std::string& text = is_stdout ? r.stdout_text : r.stderr_text;
    text.clear();
    text.reserve(room);
    return [&text](std::string_view chunk) { text.append(chunk); };
}

std::string encode_strings(const std::vector<std::string>& items) {
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_array();
        for (const auto& s : items) {
            if (is_valid_utf8(s)) {
                w.string(s);
            } else {
                bool lossy = false;
                w.string(to_utf8_lossy(s, lossy));
            }
        }
        w.end_array();
    }
    return std::move(sink.text);
}

std::vector<std::string> decode_strings(std::string_view text) {
    std::vector<std::string> out;
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_array()) return out;
    for (const auto& s : v.get_array())
        if (s.is_string()) out.emplace_back(s.get_string());
    return out;
}

std::string encode_object(const boost::json::object& o) {
    return to_json(o);
}

boost::json::object decode_object(std::string_view text) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return {};
    return std::move(v.get_object());
}

}  // namespace agentctl::journal_detail
