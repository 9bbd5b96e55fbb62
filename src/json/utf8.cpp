#include <agentctl/json.hpp>

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
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return 0;
    if (i + n > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t j = 2; j < n; ++j)
        if (byte(i + j) < 0x80 || byte(i + j) > 0xBF) return 0;
    return n;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
    for (std::size_t i = 0; i < bytes.size();) {
        std::size_t n = valid_sequence(bytes, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string to_utf8_lossy(std::string_view bytes, bool& lossy) {
    std::string out;
    out.reserve(bytes.size());
    std::size_t i = 0;
    while (i < bytes.size()) {
        std::size_t n = valid_sequence(bytes, i);
        if (n == 0) {
            out.append("\xEF\xBF\xBD");  // U+FFFD for one invalid byte
            lossy = true;
            ++i;
        } else {
            out.append(bytes.substr(i, n));
            i += n;
        }
    }
    return out;
}

}  // namespace agentctl
