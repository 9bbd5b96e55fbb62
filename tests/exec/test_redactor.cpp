// The streaming secret redactor (src/exec/redactor.hpp): every secret length from 1 to 64 cut
// at every byte by a cap (or a late start), fed in two chunks split at every boundary and byte
// by byte; and random secrets, texts and chunkings against a plain reference.
#include "exec/client.hpp"
#include "exec/redactor.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

using agentctl::capture_ends;
using agentctl::redaction;
using agentctl::secret_matcher;
using agentctl::stream_redactor;

namespace {

// The capture redacted, fed as the chunks that `cuts` (increasing offsets) make of it.
std::string redacted(const std::string& capture, const secret_matcher& m, capture_ends ends,
                     const std::vector<std::size_t>& cuts = {}) {
    stream_redactor r(m, ends);
    std::size_t at = 0;
    for (std::size_t cut : cuts) {
        r.feed(std::string_view(capture).substr(at, cut - at));
        at = cut;
    }
    r.feed(std::string_view(capture).substr(at));
    r.finish();
    std::string out = capture;
    agentctl::apply_redactions(out, r.ranges());
    return out;
}

// A secret of `size` bytes that filler text never contains.
std::string secret_of(std::size_t size, std::mt19937& rng) {
    static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string s;
    for (std::size_t i = 0; i < size; ++i) s += alphabet[rng() % alphabet.size()];
    return s;
}

// The plain reference: every occurrence found by search, the cut ends by comparison, and
// overlapping or adjacent ranges merged.
std::vector<redaction> reference(const std::string& text, const std::vector<std::string>& secrets,
                                 capture_ends ends) {
    std::vector<redaction> found;
    for (const auto& s : secrets) {
        if (s.empty()) continue;
        for (auto at = text.find(s); at != std::string::npos; at = text.find(s, at + 1))
            found.push_back({at, at + s.size()});
        for (std::size_t k = 1; k < s.size() && k <= text.size(); ++k) {
            if (ends.ends_early && text.compare(text.size() - k, k, s, 0, k) == 0)
                found.push_back({text.size() - k, text.size()});
            if (ends.starts_late && text.compare(0, k, s, s.size() - k, k) == 0) found.push_back({0, k});
        }
        if (ends.starts_late && ends.ends_early && !text.empty() && text.size() < s.size() &&
            s.find(text) != std::string::npos)
            found.push_back({0, text.size()});
    }
    std::sort(found.begin(), found.end(),
              [](const redaction& a, const redaction& b) { return a.begin < b.begin; });
    std::vector<redaction> merged;
    for (const auto& r : found) {
        if (!merged.empty() && r.begin <= merged.back().end)
            merged.back().end = std::max(merged.back().end, r.end);
        else
            merged.push_back(r);
    }
    return merged;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redactor)

// The whole-value redaction keeps its rules (agentctl::redact is built on the redactor).
BOOST_AUTO_TEST_CASE(whole_values) {
    secret_matcher m({"abc", "cdef", "", "aa"});
    BOOST_TEST(redacted("xxabcdefyy", m, {}) == "xx[REDACTED]yy");
    BOOST_TEST(redacted("aaaa", m, {}) == "[REDACTED]");
    BOOST_TEST(redacted("abc abc", m, {}) == "[REDACTED] [REDACTED]");
    BOOST_TEST(redacted("abcabc", m, {}) == "[REDACTED]");  // adjacent: one marker
    BOOST_TEST(redacted("nothing", m, {}) == "nothing");
    BOOST_TEST(redacted("", m, {.starts_late = true, .ends_early = true}) == "");
    BOOST_TEST(secret_matcher({"", ""}).empty());
    BOOST_TEST(secret_matcher({"abcd", "xy"}).longest() == 4u);
    // A secret that is a prefix of another, and one inside another.
    secret_matcher nested({"abcdef", "abc", "cd"});
    BOOST_TEST(redacted("-abc-abcdef-cd-", nested, {}) == "-[REDACTED]-[REDACTED]-[REDACTED]-");
    // NUL and bytes above 0x7f are bytes like any other.
    secret_matcher binary({std::string("\0\xff", 2)});
    BOOST_TEST(redacted(std::string("a\0\xff"
                                    "b",
                                    4),
                        binary, {}) == "a[REDACTED]b");
}

// Only a capture that was cut loses a tail that starts a secret, or a head that ends one.
BOOST_AUTO_TEST_CASE(cut_ends_only) {
    secret_matcher m({"abcdef"});
    BOOST_TEST(redacted("xxabc", m, {}) == "xxabc");
    BOOST_TEST(redacted("xxabc", m, {.ends_early = true}) == "xx[REDACTED]");
    BOOST_TEST(redacted("defxx", m, {}) == "defxx");
    BOOST_TEST(redacted("defxx", m, {.starts_late = true}) == "[REDACTED]xx");
    BOOST_TEST(redacted("defxx", m, {.ends_early = true}) == "defxx");
    // The middle of a secret, cut at both ends; not when only one end was cut.
    BOOST_TEST(redacted("cd", m, {.starts_late = true, .ends_early = true}) == "[REDACTED]");
    BOOST_TEST(redacted("cd", m, {.ends_early = true}) == "cd");
    // A tail next to a whole secret becomes the same marker.
    BOOST_TEST(redacted("x abcdefab", m, {.ends_early = true}) == "x [REDACTED]");
    // The longest tail counts: "ab" and "abab" both start "ababc".
    secret_matcher rep({"ababc"});
    BOOST_TEST(redacted("zzabab", rep, {.ends_early = true}) == "zz[REDACTED]");
}

// Every secret length from 1 to 64, the cap at every byte before, inside and at the end of
// it, the capture fed in two chunks split at every boundary and byte by byte: nothing of the
// secret is left, nothing else is lost.
BOOST_AUTO_TEST_CASE(a_secret_cut_by_a_cap_at_every_byte) {
    std::mt19937 rng(25);
    const std::string before(37, '.');
    const std::string after = " tail\n";
    std::size_t checked = 0;
    for (std::size_t size = 1; size <= 64; ++size) {
        std::string secret = secret_of(size, rng);
        // Also compiled with an unrelated secret, so that the automaton has several.
        secret_matcher m({secret, "~unrelated~"});
        std::string text = before + secret + after;
        for (std::size_t cap = before.size(); cap <= before.size() + size; ++cap) {
            std::string capture = text.substr(0, cap);
            std::string expected = cap == before.size() ? before : before + "[REDACTED]";
            std::vector<std::size_t> every_byte;
            for (std::size_t i = 1; i < capture.size(); ++i) every_byte.push_back(i);
            BOOST_TEST(redacted(capture, m, {.ends_early = true}, every_byte) == expected,
                       "secret of " << size << " bytes, cap " << cap - before.size() << " bytes into it");
            for (std::size_t split = 0; split <= capture.size(); ++split) {
                std::string got = redacted(capture, m, {.ends_early = true}, {split});
                if (got != expected)
                    BOOST_ERROR("secret of " << size << " bytes, cap " << cap - before.size()
                                             << " bytes into it, chunks split at " << split << ": " << got);
                ++checked;
            }
        }
        // The same secret when the capture ends after it: whole, and the text after it kept.
        BOOST_TEST(redacted(text, m, {}) == before + "[REDACTED]" + after);
    }
    BOOST_TEST(checked > 64u * 64u);
}

// The same where a capture starts late, at every byte of the secret.
BOOST_AUTO_TEST_CASE(a_secret_cut_by_a_late_start_at_every_byte) {
    std::mt19937 rng(27);
    const std::string before = "head ";
    const std::string after(41, '.');
    std::size_t checked = 0;
    for (std::size_t size = 1; size <= 64; ++size) {
        std::string secret = secret_of(size, rng);
        secret_matcher m({"~unrelated~", secret});
        std::string text = before + secret + after;
        for (std::size_t start = before.size(); start <= before.size() + size; ++start) {
            std::string capture = text.substr(start);
            std::string expected = start == before.size() + size ? after : "[REDACTED]" + after;
            for (std::size_t split = 0; split <= capture.size(); ++split) {
                std::string got = redacted(capture, m, {.starts_late = true}, {split});
                if (got != expected)
                    BOOST_ERROR("secret of " << size << " bytes, start " << start - before.size()
                                             << " bytes into it, chunks split at " << split << ": " << got);
                ++checked;
            }
        }
    }
    BOOST_TEST(checked > 64u * 64u);
}

// Random secrets from a small alphabet (so that they overlap, nest and repeat), random texts,
// random chunks and cut ends: the same ranges as the reference, and settled() never passes a
// range that is still to come.
BOOST_AUTO_TEST_CASE(random_against_the_reference) {
    std::mt19937 rng(2527);
    for (int round = 0; round < 4000; ++round) {
        std::vector<std::string> secrets(1 + rng() % 4);
        for (auto& s : secrets) {
            s.resize(1 + rng() % 6);
            for (auto& c : s) c = static_cast<char>('a' + rng() % 3);
        }
        std::string text(rng() % 40, ' ');
        for (auto& c : text) c = static_cast<char>('a' + rng() % 4);
        capture_ends ends{.starts_late = rng() % 2 == 0, .ends_early = rng() % 2 == 0};
        secret_matcher m(secrets);
        stream_redactor r(m, ends);
        // After each chunk: what was settled, and the ranges known then.
        std::vector<std::pair<std::uint64_t, std::vector<redaction>>> moments;
        for (std::size_t at = 0; at < text.size();) {
            std::size_t len = std::min<std::size_t>(text.size() - at, rng() % 5);
            r.feed(std::string_view(text).substr(at, len));
            at += len;
            BOOST_TEST(r.size() == at);
            moments.emplace_back(r.settled(), r.ranges());
        }
        r.finish();
        std::string context = "text \"" + text + "\", starts_late " + std::to_string(ends.starts_late) +
                              ", ends_early " + std::to_string(ends.ends_early);
        BOOST_TEST(r.ranges() == reference(text, secrets, ends), context);
        BOOST_TEST(r.settled() == text.size());
        // A byte below what was settled is already redacted, or never will be.
        auto covered = [](const std::vector<redaction>& ranges, std::uint64_t byte) {
            return std::any_of(ranges.begin(), ranges.end(),
                               [byte](const redaction& x) { return x.begin <= byte && byte < x.end; });
        };
        for (const auto& [settled, known] : moments)
            for (std::uint64_t byte = 0; byte < settled; ++byte)
                if (covered(known, byte) != covered(r.ranges(), byte))
                    BOOST_ERROR(context << ": byte " << byte << " was settled at " << settled
                                        << " but its redaction changed later");
    }
}

// A message's excerpt of a program's stderr: whole secrets, one its capture was cut in, and
// one with a newline (which the excerpt folds) leave nothing.
BOOST_AUTO_TEST_CASE(excerpts_of_program_output) {
    secret_matcher m({"line1\nline2", "hunter2-secret"});
    BOOST_TEST(agentctl::exec::excerpt("say line1\nline2 and hunter2-secret\n", m) ==
               "say [REDACTED] and [REDACTED]");
    BOOST_TEST(agentctl::exec::excerpt("failed: hunter2-se", m) == "failed: [REDACTED]");
    BOOST_TEST(agentctl::exec::excerpt(std::string(600, '.') + "hunter2-secret", m).find("hunter2") ==
               std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
