// Output capture: caps, floods, encodings (docs/TESTING.md).
#include "harness.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>

using namespace exec_test;
using agentctl::process_outcome;

namespace {

// What `probe flood --pattern P --chunk C` writes, for the first `n` bytes.
std::string pattern_bytes(const std::string& pattern, std::size_t n, std::size_t chunk = 65536) {
    const std::string bad = "ok\xC0\x80\xED\xA0\x80\xFFok\n";
    const std::string ansi = "\x1b[31mred\x1b[0m\r\a\x1b]52;c;aGk=\a\n";
    std::string out(n, '\0');
    for (std::size_t k = 0; k < n; ++k) {
        std::size_t i = k % chunk;
        if (pattern == "binary") {
            out[k] = static_cast<char>(i & 0xff);
        } else if (pattern == "invalid-utf8") {
            out[k] = bad[i % bad.size()];
        } else if (pattern == "no-newline") {
            out[k] = 'x';
        } else if (pattern == "ansi") {
            out[k] = ansi[i % ansi.size()];
        } else {
            out[k] = (i % 64 == 63) ? '\n' : static_cast<char>('a' + i % 26);
        }
    }
    return out;
}

agentctl::process_request flood(const std::string& nonce, const std::string& fd, const std::string& bytes,
                                std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"flood", "--fd", fd, "--bytes", bytes};
    args.insert(args.end(), extra.begin(), extra.end());
    return probe_request(nonce, args);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(output, process_fixture)

// T-OUT-01 / T-OUT-02: an endless flood on one stream: exactly the cap is kept, the tree is
// killed at once (not at the timeout), the other stream is intact.
BOOST_AUTO_TEST_CASE(flood_is_cut_at_the_cap_and_killed) {
    for (std::string fd : {"1", "2"}) {
        for (std::uint64_t cap : {std::uint64_t{1000}, std::uint64_t{300000}}) {
            auto req = flood(nonce, fd, "unlimited");
            req.stdout_limit = cap;
            req.stderr_limit = cap;
            req.combined_limit = 4 * cap;
            req.timeout = 30s;
            milliseconds wall{};
            auto r = run_one(req, 20s, &wall);
            const boost::json::string& kept = fd == "1" ? r.stdout_bytes : r.stderr_bytes;
            const boost::json::string& other = fd == "1" ? r.stderr_bytes : r.stdout_bytes;
            BOOST_TEST(r.outcome == process_outcome::output_limit_exceeded);
            BOOST_TEST(r.limit_stream == (fd == "1" ? "stdout" : "stderr"));
            BOOST_TEST(r.limit_bytes == cap);
            BOOST_TEST(kept.size() == cap);
            BOOST_TEST((kept == pattern_bytes("ascii", cap)));
            BOOST_TEST(other.empty());
            BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
            BOOST_TEST(r.error_message.find(std::to_string(cap)) != std::string::npos);
            BOOST_TEST(wall < 5s);
        }
    }
}

// T-OUT-03: both streams interleaved, stderr first, far beyond a pipe buffer, by a child that
// ignores SIGTERM and SIGPIPE: no deadlock, per-stream caps, killed anyway.
BOOST_AUTO_TEST_CASE(interleaved_flood_with_hostile_child) {
    auto req = flood(nonce, "both", "unlimited", {"--ignore-signals"});
    req.stdout_limit = 1024 * 1024;
    req.stderr_limit = 1024 * 1024;
    req.combined_limit = 4 * 1024 * 1024;
    req.kill_grace = 10s;  // an overflow does not wait for the ladder
    milliseconds wall{};
    auto r = run_one(req, 20s, &wall);
    BOOST_TEST(r.outcome == process_outcome::output_limit_exceeded);
    BOOST_TEST((r.limit_stream == "stdout" || r.limit_stream == "stderr"));
    BOOST_TEST(r.stdout_bytes.size() <= 1024u * 1024u);
    BOOST_TEST(r.stderr_bytes.size() <= 1024u * 1024u);
    BOOST_TEST((r.stdout_bytes.size() == 1024u * 1024u || r.stderr_bytes.size() == 1024u * 1024u));
    BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
    BOOST_TEST(wall < 5s);
}

// The combined cap wins when its remaining budget is not larger than the stream's.
BOOST_AUTO_TEST_CASE(combined_cap_is_named) {
    auto req = flood(nonce, "both", "unlimited", {"--chunk", "4096"});
    req.stdout_limit = 1024 * 1024;
    req.stderr_limit = 1024 * 1024;
    req.combined_limit = 100000;
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::output_limit_exceeded);
    BOOST_TEST(r.limit_stream == "combined output");
    BOOST_TEST(r.limit_bytes == 100000u);
    BOOST_TEST(r.stdout_bytes.size() + r.stderr_bytes.size() == 100000u);
}

// T-OUT-04: exactly the cap is not an overflow; one byte more is; nothing, and cap - 1, are fine.
BOOST_AUTO_TEST_CASE(exact_cap_versus_one_more) {
    for (std::uint64_t cap :
         {std::uint64_t{1}, std::uint64_t{1024}, std::uint64_t{1025}, std::uint64_t{200000}}) {
        for (std::string fd : {"1", "2"}) {
            for (std::uint64_t n : {std::uint64_t{0}, cap - 1, cap, cap + 1}) {
                auto req = flood(nonce, fd, std::to_string(n), {"--pattern", "binary", "--chunk", "1000"});
                req.stdout_limit = cap;
                req.stderr_limit = cap;
                req.combined_limit = 2 * cap;
                auto r = run_one(req);
                const boost::json::string& kept = fd == "1" ? r.stdout_bytes : r.stderr_bytes;
                auto label = "cap " + std::to_string(cap) + " bytes " + std::to_string(n) + " fd " + fd;
                if (n <= cap) {
                    BOOST_TEST(r.outcome == process_outcome::exited, label);
                    BOOST_TEST(r.exit_code.value_or(-1) == 0, label);
                    BOOST_TEST(kept.size() == n, label);
                    BOOST_TEST(r.limit_stream.empty(), label);
                } else {
                    BOOST_TEST(r.outcome == process_outcome::output_limit_exceeded, label);
                    BOOST_TEST(kept.size() == cap, label);
                }
                BOOST_TEST((kept == pattern_bytes("binary", kept.size(), 1000)), label);
            }
        }
    }
}

// The combined cap too: both streams together exactly at it is fine, one byte more is not.
BOOST_AUTO_TEST_CASE(exact_combined_cap) {
    for (int extra : {0, 1}) {
        auto req = flood(nonce, "both", std::to_string(20000 + extra), {"--chunk", "5000"});
        req.stdout_limit = 20000;
        req.stderr_limit = 20000;
        req.combined_limit = 20000;
        auto r = run_one(req);
        BOOST_TEST(r.stdout_bytes.size() + r.stderr_bytes.size() == 20000u);
        BOOST_TEST((r.outcome == (extra ? process_outcome::output_limit_exceeded : process_outcome::exited)));
        if (extra) BOOST_TEST(r.limit_stream == "combined output");
    }
}

// T-OUT-05: one long line without a newline; the capture is byte oriented.
BOOST_AUTO_TEST_CASE(long_line_without_newline) {
    auto req = flood(nonce, "1", std::to_string(8 * 1024 * 1024), {"--pattern", "no-newline"});
    req.stdout_limit = 16 * 1024 * 1024;
    req.combined_limit = 16 * 1024 * 1024;
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::exited);
    BOOST_TEST(r.stdout_bytes.size() == 8u * 1024u * 1024u);
    BOOST_TEST(r.stdout_bytes.find_first_not_of('x') == std::string::npos);
}

// T-OUT-06, T-OUT-08: binary (every byte value, NULs), invalid UTF-8 and terminal escapes
// are captured byte-exact.
BOOST_AUTO_TEST_CASE(binary_and_invalid_utf8_are_byte_exact) {
    for (std::string pattern : {"binary", "invalid-utf8", "ansi"}) {
        auto req = flood(nonce, "1", "100000", {"--pattern", pattern, "--chunk", "7000"});
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_REQUIRE(r.stdout_bytes.size() == 100000u);
        BOOST_TEST((r.stdout_bytes == pattern_bytes(pattern, 100000, 7000)), pattern);
    }
}

// The capture buffer is never zero-filled and large ones are mapped in ahead of each read
// (docs/CAPTURE.md, "Fresh memory"): captures one after the other, each in memory an earlier
// and longer one left to the allocator, hold exactly their own bytes, at lengths around the
// page, the 64 KiB step and the cap, cut at the cap or not.
BOOST_AUTO_TEST_CASE(a_capture_never_holds_bytes_of_an_earlier_one) {
    struct step {
        std::string pattern;
        std::size_t bytes;  // 0: a flood without end, cut at the cap
        std::size_t chunk;
    };
    const std::size_t cap = 1024 * 1024;
    const std::vector<step> steps = {
        {"binary", cap, 1000},      {"no-newline", 70000, 65536}, {"ascii", cap - 1, 65536},
        {"binary", 300001, 7000},   {"no-newline", 65536, 65536}, {"ascii", 65537, 4096},
        {"invalid-utf8", 0, 65536}, {"binary", 4097, 1000},       {"no-newline", 200000, 65536},
    };
    for (std::string fd : {"1", "2"}) {
        for (const auto& s : steps) {
            auto req = flood(nonce, fd, s.bytes ? std::to_string(s.bytes) : "unlimited",
                             {"--pattern", s.pattern, "--chunk", std::to_string(s.chunk)});
            req.stdout_limit = cap;
            req.stderr_limit = cap;
            req.combined_limit = 2 * cap;
            req.timeout = 30s;
            auto r = run_one(req);
            const boost::json::string& kept = fd == "1" ? r.stdout_bytes : r.stderr_bytes;
            const boost::json::string& other = fd == "1" ? r.stderr_bytes : r.stdout_bytes;
            std::size_t expected = s.bytes ? s.bytes : cap;
            auto label = s.pattern + " " + std::to_string(s.bytes) + " fd " + fd;
            BOOST_TEST(
                (r.outcome == (s.bytes ? process_outcome::exited : process_outcome::output_limit_exceeded)),
                label);
            BOOST_REQUIRE_MESSAGE(kept.size() == expected, label << ": " << kept.size() << " bytes");
            BOOST_TEST((kept == pattern_bytes(s.pattern, expected, s.chunk)), label);
            BOOST_TEST(other.empty(), label);
        }
    }
}

// T-OUT-12: more than a pipe buffer, then a read of stdin: EOF at once, no deadlock.
BOOST_AUTO_TEST_CASE(output_then_stdin_read_does_not_deadlock) {
    auto req = flood(nonce, "1", "262144", {"--then-read-stdin"});
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::exited);
    BOOST_TEST(r.stdout_bytes.size() == 262144u);
}

// T-OUT-13: 3 MiB written, then a timeout: all of it is returned.
BOOST_AUTO_TEST_CASE(output_before_timeout_is_returned_whole) {
    auto req = flood(nonce, "1", std::to_string(3 * 1024 * 1024), {"--then-sleep", "300"});
    req.stdout_limit = 4 * 1024 * 1024;
    req.combined_limit = 4 * 1024 * 1024;
    req.timeout = 1s;
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::timed_out);
    BOOST_TEST(r.stdout_bytes.size() == 3u * 1024u * 1024u);
    BOOST_TEST((r.stdout_bytes == pattern_bytes("ascii", 3 * 1024 * 1024)));
}

// T-OUT-11: an overflow kills only its own run.
BOOST_AUTO_TEST_CASE(overflow_kills_only_its_own_run) {
    spawn_thread spawner;
    boost::asio::io_context io;
    spawner.attach(io);
    std::vector<agentctl::process_result> results(9);
    int done = 0;
    for (int i = 0; i < 9; ++i) {
        auto req = i == 4 ? flood(nonce, "1", "unlimited") : probe_request(nonce, {"sleep", "0.5"});
        req.stdout_limit = 4096;
        agentctl::async_run_process(io.get_executor(), req, [&, i](agentctl::process_result r) {
            results[static_cast<std::size_t>(i)] = std::move(r);
            ++done;
        });
    }
    io.run_for(20s);
    BOOST_REQUIRE(done == 9);
    for (int i = 0; i < 9; ++i) {
        auto& r = results[static_cast<std::size_t>(i)];
        BOOST_TEST(
            (r.outcome == (i == 4 ? process_outcome::output_limit_exceeded : process_outcome::exited)));
        if (i != 4) BOOST_TEST(r.exit_code.value_or(-1) == 0);
    }
}

BOOST_AUTO_TEST_SUITE_END()
