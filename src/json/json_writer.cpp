#include <agentctl/json.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace agentctl {

void json_writer::put_large(std::string_view s) {  // large pieces go straight through
    flush();
    sink_.write(s);
}

void json_writer::flush() {
    if (buffer_.empty()) return;
    sink_.write(buffer_);
    buffer_.clear();
}

void json_writer::begin_object() {
    open('{');
}

void json_writer::end_object() {
    close('}');
}

void json_writer::begin_array() {
    open('[');
}

void json_writer::end_array() {
    close(']');
}

void json_writer::key(std::string_view k) {
    before_value();
    put_string(k);
    put(':');
    need_comma_ = false;
}

void json_writer::string(std::string_view s) {
    before_value();
    put_string(s);
}

namespace {

// What each byte becomes inside a JSON string: 0 itself, else the length of its escape.
constexpr std::array<unsigned char, 256> escape_length = [] {
    std::array<unsigned char, 256> t{};
    for (int c = 0; c < 0x20; ++c) t[c] = 6;  // \u00XX
    for (unsigned char c : {'\b', '\f', '\n', '\r', '\t'}) t[c] = 2;
    t['"'] = 2;
    t['\\'] = 2;
    return t;
}();

// The length of the prefix of `s` that needs no escape. Eight bytes at a time: a word holds
// a byte below 0x20, a '"' or a '\\' exactly when one of the three tests sets a high bit
// (a borrow only spreads from a byte that was found already).
std::size_t unescaped_prefix(std::string_view s) {
    constexpr std::uint64_t ones = 0x0101010101010101, highs = 0x8080808080808080;
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        const std::uint64_t quote = w ^ (ones * '"');
        const std::uint64_t backslash = w ^ (ones * '\\');
        const std::uint64_t found =
            ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash);
        if (found & highs) break;
    }
    while (i < s.size() && escape_length[static_cast<unsigned char>(s[i])] == 0) ++i;
    return i;
}

}  // namespace

void json_writer::put_string(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    // Most strings (keys, ids, rendered values) need no escape and are short: one scan and
    // one append with both quotes.
    std::size_t i = unescaped_prefix(s);
    if (i == s.size() && s.size() < flush_at) {
        buffer_.push_back('"');
        buffer_.append(s);
        buffer_.push_back('"');
        if (buffer_.size() >= flush_at) flush();
        return;
    }
    put('"');
    if (i > 0) put(s.substr(0, i));
    // Runs without escapes are copied whole; escapes are written through a pointer into room
    // made for the worst case of a slice (6 bytes per byte), so that output full of control
    // bytes (a binary stream) costs a table lookup and a few stores per byte.
    constexpr std::size_t slice = 16 * 1024;
    while (i < s.size()) {
        std::size_t run = i + unescaped_prefix(s.substr(i));
        if (run > i) put(s.substr(i, run - i));
        i = run;
        if (i == s.size()) break;
        std::size_t end = std::min(s.size(), i + slice);
        std::size_t used = buffer_.size();
        buffer_.resize(used + (end - i) * 6);
        char* out = buffer_.data() + used;
        for (; i < end; ++i) {
            unsigned char c = static_cast<unsigned char>(s[i]);
            switch (escape_length[c]) {
                case 0:
                    *out++ = static_cast<char>(c);
                    break;
                case 2:
                    *out++ = '\\';
                    *out++ = c == '\b'   ? 'b'
                             : c == '\f' ? 'f'
                             : c == '\n' ? 'n'
                             : c == '\r' ? 'r'
                             : c == '\t' ? 't'
                                         : static_cast<char>(c);
                    break;
                default:
                    std::memcpy(out, "\\u00", 4);
                    out[4] = hex[c >> 4];
                    out[5] = hex[c & 15];
                    out += 6;
            }
        }
        buffer_.resize(static_cast<std::size_t>(out - buffer_.data()));
        if (buffer_.size() >= flush_at) flush();
    }
    put('"');
}

namespace {

constexpr char base64_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The two digits of every 12-bit value: 3 bytes become 4 digits in two lookups (8 KiB, stays
// in cache), instead of four lookups and four one-byte stores.
constexpr std::array<std::array<char, 2>, 4096> base64_pairs = [] {
    std::array<std::array<char, 2>, 4096> t{};
    for (std::size_t v = 0; v < t.size(); ++v) t[v] = {base64_digits[v >> 6], base64_digits[v & 63]};
    return t;
}();

// Eight bytes at `p` as a big-endian number: the first byte in the top bits, as base64 reads them.
std::uint64_t load_big_endian(const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
    return w;
}

#if defined(__x86_64__)
// With AVX2, 24 bytes become 32 digits per step, all in vector registers (docs/CAPTURE.md,
// "Reading streams back"): each 128-bit lane takes 12 bytes, spreads each 3 bytes over 4 byte
// slots, moves each 6-bit value to the bottom of its slot with two 16-bit multiplies, and turns
// the values 0..63 into digits by adding an offset picked by a 16-entry shuffle. Encodes
// `bytes[i..]` while 28 bytes can be loaded there and a whole step fits before `end`; returns
// where it stopped, `out` moved past what it wrote.
__attribute__((target("avx2"))) std::size_t base64_avx2(std::string_view bytes, std::size_t i,
                                                        std::size_t end, char*& out) {
    // Per lane, bytes a b c of each group of 3 as b a c b: the two 16-bit halves of each slot then
    // hold (a b) and (b c), the bits each pair of digits comes from.
    const __m256i spread =
        _mm256_broadcastsi128_si256(_mm_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10));
    // Digit 0 sits in bits 10..15 of (a b), digit 2 in bits 6..11 of (b c): a high multiply
    // shifts them right by 10 and 6. Digit 1 sits in bits 4..9 of (a b), digit 3 in bits 0..5 of
    // (b c): a low multiply shifts them left by 4 and 8, into the slot's bytes 1 and 3.
    const __m256i high_bits = _mm256_set1_epi32(0x0FC0FC00);
    const __m256i high_shift = _mm256_set1_epi32(0x04000040);
    const __m256i low_bits = _mm256_set1_epi32(0x003F03F0);
    const __m256i low_shift = _mm256_set1_epi32(0x01000010);
    // Digit = value + offset: 'A' - 0 for 0..25, 'a' - 26 for 26..51, '0' - 52 for 52..61, then
    // '+' - 62 and '/' - 63. Index: value - 51 saturated at 0 (0 for 0..51, 1..12 above), plus 1
    // for values above 25, so that 0..25 take entry 0, 26..51 entry 1, 52..61 entries 2..11.
    const char digit = '0' - 52;
    const __m256i offsets =
        _mm256_broadcastsi128_si256(_mm_setr_epi8('A', 'a' - 26, digit, digit, digit, digit, digit, digit,
                                                  digit, digit, digit, digit, '+' - 62, '/' - 63, 0, 0));
    const __m256i above_51 = _mm256_set1_epi8(51);
    const __m256i above_25 = _mm256_set1_epi8(25);
    const char* const data = bytes.data();
    for (; i + 24 <= end && i + 28 <= bytes.size(); i += 24, out += 32) {
        const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
        const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i + 12));
        const __m256i in = _mm256_shuffle_epi8(_mm256_set_m128i(second, first), spread);
        const __m256i values =
            _mm256_or_si256(_mm256_mulhi_epu16(_mm256_and_si256(in, high_bits), high_shift),
                            _mm256_mullo_epi16(_mm256_and_si256(in, low_bits), low_shift));
        const __m256i index =
            _mm256_sub_epi8(_mm256_subs_epu8(values, above_51), _mm256_cmpgt_epi8(values, above_25));
        const __m256i digits = _mm256_add_epi8(values, _mm256_shuffle_epi8(offsets, index));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), digits);
    }
    return i;
}

// Read once at start-up; __builtin_cpu_init first, so that the order of static
// initialisers does not matter.
const bool have_avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}();
#endif

}  // namespace

void json_writer::base64(std::string_view bytes) {
    before_value();
    put('"');
    // Encoded a slice at a time into a scratch buffer made once per writer (never zero-filled
    // again), then written on like any other piece: a large stream is never held twice.
    constexpr std::size_t slice = 48 * 1024;  // a multiple of 24 (and 6): no padding inside
    if (!bytes.empty() && encoded_.empty()) encoded_.resize(slice / 3 * 4);
    auto byte = [&](std::size_t j) {
        return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[j]));
    };
    auto put_pair = [](char* out, std::uint64_t v) { std::memcpy(out, base64_pairs[v & 4095].data(), 2); };
    std::size_t i = 0;
    while (i < bytes.size()) {
        const std::size_t end = std::min(bytes.size(), i + slice);
        char* const first = encoded_.data();
        char* out = first;
#if defined(__x86_64__)
        if (have_avx2) i = base64_avx2(bytes, i, end, out);
#endif
        // 6 bytes to 8 digits per step, from one 8-byte load (its last 2 bytes are not used).
        for (; i + 8 <= end; i += 6, out += 8) {
            const std::uint64_t w = load_big_endian(bytes.data() + i);
            put_pair(out, w >> 52);
            put_pair(out + 2, w >> 40);
            put_pair(out + 4, w >> 28);
            put_pair(out + 6, w >> 16);
        }
        for (; i + 3 <= end; i += 3, out += 4) {
            const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
            put_pair(out, v >> 12);
            put_pair(out + 2, v);
        }
        if (i < end) {  // the last one or two bytes of the whole input
            std::uint32_t v = byte(i) << 16 | (i + 1 < end ? byte(i + 1) << 8 : 0);
            *out++ = base64_digits[v >> 18];
            *out++ = base64_digits[v >> 12 & 63];
            *out++ = i + 1 < end ? base64_digits[v >> 6 & 63] : '=';
            *out++ = '=';
            i = end;
        }
        put(std::string_view(first, static_cast<std::size_t>(out - first)));
    }
    put('"');
}

void json_writer::boolean(bool b) {
    before_value();
    put(b ? "true" : "false");
}

void json_writer::number(std::int64_t n) {
    before_value();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, n);
    put(std::string_view(buf, r.ptr - buf));
}

void json_writer::number(std::uint64_t n) {
    before_value();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, n);
    put(std::string_view(buf, r.ptr - buf));
}

void json_writer::number(double d) {
    before_value();
    if (!std::isfinite(d)) {  // JSON has no NaN or infinity
        put("null");
        return;
    }
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    std::string_view text(buf, r.ptr - buf);
    put(text);
    // Keep a double visibly a double, so a round trip does not turn 1.0 into the integer 1.
    if (text.find_first_of(".e") == std::string_view::npos) put(".0");
}

void json_writer::null() {
    before_value();
    put("null");
}

void json_writer::value(const boost::json::value& v) {
    switch (v.kind()) {
    case boost::json::kind::null: null(); break;
    case boost::json::kind::bool_: boolean(v.get_bool()); break;
    case boost::json::kind::int64: number(v.get_int64()); break;
    case boost::json::kind::uint64: number(v.get_uint64()); break;
    case boost::json::kind::double_: number(v.get_double()); break;
    case boost::json::kind::string: {
        const auto& s = v.get_string();
        string(std::string_view(s.data(), s.size()));
        break;
    }
    case boost::json::kind::array:
        begin_array();
        for (const auto& e : v.get_array()) value(e);
        end_array();
        break;
    case boost::json::kind::object:
        begin_object();
        for (const auto& m : v.get_object()) {
            key(std::string_view(m.key().data(), m.key().size()));
            value(m.value());
        }
        end_object();
        break;
    }
}

void json_writer::raw_value(std::string_view json) {
    before_value();
    put(json);
}

void json_writer::raw_members(std::string_view members) {
    if (members.empty()) return;
    before_value();  // the comma after the object's previous member, if any
    put(members);
}

void write_seconds(json_writer& w, std::int64_t ms) {
    if (ms % 1000 == 0) w.number(ms / 1000);
    else w.number(static_cast<double>(ms) / 1000.0);
}

std::string seconds_text(std::int64_t ms) {
    std::string text = std::to_string(ms / 1000);
    if (std::int64_t frac = ms % 1000) {
        char digits[4] = {char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10), 0};
        std::string f = digits;
        while (f.back() == '0') f.pop_back();
        text += "." + f;
    }
    return text + "s";
}

std::string to_json(const boost::json::value& v) {
    string_sink sink;
    {
        json_writer w(sink);
        w.value(v);
    }
    return std::move(sink.text);
}

}  // namespace agentctl
