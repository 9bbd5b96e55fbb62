#include <agentctl/json.hpp>

#include <cstdint>
#include <cstring>

namespace agentctl {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t valid_sequence(std::string_view s, std::size_t i) {
    auto byte = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
    unsigned char c = byte(i);
    if (c < 0x80) return 1;
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c == 0xE0) {
        n = 3;
        lo = 0xA0;
    } else if (c >= 0xE1 && c <= 0xEC)
        n = 3;
    else if (c == 0xED) {
        n = 3;
        hi = 0x9F;
    } else if (c >= 0xEE && c <= 0xEF)
        n = 3;
    else if (c == 0xF0) {
        n = 4;
        lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3)
        n = 4;
    else if (c == 0xF4) {
        n = 4;
        hi = 0x8F;
    } else
        return 0;
    if (i + n > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t j = 2; j < n; ++j)
        if (byte(i + j) < 0x80 || byte(i + j) > 0xBF) return 0;
    return n;
}

// Bytes from `i` on that are ASCII, 32 then 8 at a time: the common case, and by far the
// cheapest (every captured stream is checked whole, docs/CAPTURE.md).
std::size_t ascii_run(std::string_view s, std::size_t i) {
    const std::size_t start = i;
    while (i + 32 <= s.size()) {
        std::uint64_t words[4];
        std::memcpy(words, s.data() + i, 32);
        if ((words[0] | words[1] | words[2] | words[3]) & 0x8080808080808080ull) break;
        i += 32;
    }
    while (i + 8 <= s.size()) {
        std::uint64_t word;
        std::memcpy(&word, s.data() + i, 8);
        if (word & 0x8080808080808080ull) break;
        i += 8;
    }
    while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
    return i - start;
}

// Length of the longest valid UTF-8 prefix of s[i..].
std::size_t valid_prefix(std::string_view s, std::size_t i) {
    const std::size_t start = i;
    while (i < s.size()) {
        i += ascii_run(s, i);
        if (i == s.size()) break;
        std::size_t n = valid_sequence(s, i);
        if (n == 0) break;
        i += n;
    }
    return i - start;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
    return valid_prefix(bytes, 0) == bytes.size();
}

bool is_text(std::string_view bytes) {
    return std::memchr(bytes.data(), 0, bytes.size()) == nullptr && is_valid_utf8(bytes);
}

std::string to_utf8_lossy(std::string_view bytes, bool& lossy) {
    std::string out;
    out.reserve(bytes.size());
    std::size_t i = 0;
    while (i < bytes.size()) {
        std::size_t n = valid_prefix(bytes, i);
        out.append(bytes.substr(i, n));
        i += n;
        if (i < bytes.size()) {
            out.append("\xEF\xBF\xBD");  // U+FFFD for one invalid byte
            lossy = true;
            ++i;
        }
    }
    return out;
}

std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return text;
    std::size_t cut = max_bytes;
    // Back up over continuation bytes to the start of the sequence the cut falls into.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return text.substr(0, cut);
}

void make_utf8_lossy(std::string& bytes, bool& lossy) {
    if (!is_valid_utf8(bytes)) bytes = to_utf8_lossy(std::string_view(bytes), lossy);
}

void make_utf8_lossy(boost::json::string& bytes, bool& lossy) {
    if (is_valid_utf8(bytes)) return;
    std::string text = to_utf8_lossy(std::string_view(bytes), lossy);
    bytes.assign(text.data(), text.size());
}

}  // namespace agentctl
