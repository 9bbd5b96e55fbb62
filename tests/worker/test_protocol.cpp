// src/worker_protocol without a process: frames cut from any split of a stream, the size
// limits, payload fields, the handshake, and purity.
#include "worker_protocol/frame.hpp"
#include "worker_protocol/handshake.hpp"

#include "../support/symbols.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

namespace fs = std::filesystem;
using namespace agentctl::worker_protocol;

namespace {

std::string frame_bytes(message_type type, std::string_view payload) {
    std::string out;
    BOOST_TEST_REQUIRE(!append_frame(out, type, payload));
    return out;
}

// Every byte value, NUL and newline included.
std::string all_bytes() {
    std::string s;
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
    return s;
}

std::string digest_of(char fill) {
    return std::string(build_digest_size, fill);
}

// The frames a decoder yields for `stream` fed in pieces of the given sizes (the last piece
// takes the rest), and whether it ended on an error.
struct decoded_stream {
    std::vector<frame> frames;
    std::optional<protocol_error> error;
};

decoded_stream decode_in_pieces(const std::string& stream, const std::vector<std::size_t>& pieces,
                                std::uint32_t limit = payload_limit) {
    frame_decoder d(limit);
    decoded_stream out;
    std::size_t at = 0;
    auto drain = [&] {
        frame f;
        for (;;) {
            auto s = d.next(f);
            if (s == frame_decoder::status::frame) {
                out.frames.push_back(f);
                continue;
            }
            if (s == frame_decoder::status::error) out.error = d.error();
            return;
        }
    };
    for (std::size_t n : pieces) {
        n = std::min(n, stream.size() - at);
        d.feed(std::string_view(stream).substr(at, n));
        at += n;
        drain();
    }
    d.feed(std::string_view(stream).substr(at));
    drain();
    if (!out.error) out.error = d.finish();
    return out;
}

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

hello good_hello() {
    hello h;
    h.build_digest = digest_of('\x11');
    h.run_id = "run-0123456789abcdef";
    h.heartbeat_ms = 1000;
    return h;
}

welcome good_welcome() {
    welcome w;
    w.build_digest = digest_of('\x11');
    w.node = "node01";
    w.pid = 4242;
    w.cpus = 8;
    w.containment = worker_containment::cgroup;
    return w;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(frames)

BOOST_AUTO_TEST_CASE(header_is_length_little_endian_then_type) {
    std::string f = frame_bytes(message_type::run, std::string(0x010203, 'x'));
    BOOST_TEST_REQUIRE(f.size() == header_size + 0x010203);
    BOOST_TEST(static_cast<int>(static_cast<unsigned char>(f[0])) == 0x03);
    BOOST_TEST(static_cast<int>(static_cast<unsigned char>(f[1])) == 0x02);
    BOOST_TEST(static_cast<int>(static_cast<unsigned char>(f[2])) == 0x01);
    BOOST_TEST(static_cast<int>(f[3]) == 0);
    BOOST_TEST(static_cast<int>(f[4]) == static_cast<int>(message_type::run));
}

BOOST_AUTO_TEST_CASE(every_type_and_every_byte_value_round_trips) {
    std::string stream;
    std::vector<std::pair<message_type, std::string>> sent;
    for (std::uint8_t t = 1; t <= last_message_type; ++t) {
        auto type = message_type{t};
        std::string payload = t % 2 ? all_bytes() : std::string();  // empty payloads too
        stream += frame_bytes(type, payload);
        sent.emplace_back(type, payload);
    }
    auto got = decode_in_pieces(stream, {});
    BOOST_TEST(!got.error);
    BOOST_TEST_REQUIRE(got.frames.size() == sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {
        BOOST_TEST(static_cast<int>(got.frames[i].type) == static_cast<int>(sent[i].first));
        BOOST_TEST(got.frames[i].payload == sent[i].second);
    }
}

// A pipe may deliver any split: byte by byte, a header cut in two, a frame and a half.
BOOST_AUTO_TEST_CASE(any_split_of_the_stream_gives_the_same_frames) {
    std::string stream = frame_bytes(message_type::heartbeat, "12345678") +
                         frame_bytes(message_type::output, "") +
                         frame_bytes(message_type::result, all_bytes());
    const std::size_t total = stream.size();
    for (std::size_t cut = 0; cut <= total; ++cut) {
        auto got = decode_in_pieces(stream, {cut});
        BOOST_TEST_REQUIRE(!got.error, "cut at " << cut);
        BOOST_TEST_REQUIRE(got.frames.size() == 3u, "cut at " << cut);
        BOOST_TEST(got.frames[2].payload == all_bytes());
    }
    auto bytewise = decode_in_pieces(stream, std::vector<std::size_t>(total, 1));
    BOOST_TEST(!bytewise.error);
    BOOST_TEST_REQUIRE(bytewise.frames.size() == 3u);
    BOOST_TEST(bytewise.frames[0].payload == "12345678");
    BOOST_TEST(bytewise.frames[1].payload.empty());
}

BOOST_AUTO_TEST_CASE(a_frame_is_returned_only_once_complete) {
    std::string f = frame_bytes(message_type::cancel, "abcdef");
    frame_decoder d(payload_limit);
    frame out;
    d.feed(std::string_view(f).substr(0, 4));
    BOOST_TEST((d.next(out) == frame_decoder::status::need_more));
    d.feed(std::string_view(f).substr(4, 5));
    BOOST_TEST((d.next(out) == frame_decoder::status::need_more));
    d.feed(std::string_view(f).substr(9));
    BOOST_TEST_REQUIRE((d.next(out) == frame_decoder::status::frame));
    BOOST_TEST(out.payload == "abcdef");
    BOOST_TEST((d.next(out) == frame_decoder::status::need_more));
    BOOST_TEST(d.buffered() == 0u);
    BOOST_TEST(!d.finish());
}

// The limit is checked on the header: the payload is neither waited for nor stored.
BOOST_AUTO_TEST_CASE(an_oversized_header_fails_before_its_payload) {
    std::string header;
    header.push_back(static_cast<char>(0x01));  // 4 097 = handshake_payload_limit + 1
    header.push_back(static_cast<char>(0x10));
    header.push_back(0);
    header.push_back(0);
    header.push_back(static_cast<char>(message_type::hello));
    frame_decoder d;  // the handshake's limit
    BOOST_TEST(d.limit() == handshake_payload_limit);
    d.feed(header);
    frame out;
    BOOST_TEST_REQUIRE((d.next(out) == frame_decoder::status::error));
    BOOST_TEST((d.error()->code == protocol_errc::frame_too_large));
    BOOST_TEST(d.error()->message.find("4097") != std::string::npos, d.error()->message);
    // Exactly at the limit is a frame.
    std::string at_limit = frame_bytes(message_type::hello, std::string(handshake_payload_limit, 'h'));
    BOOST_TEST(decode_in_pieces(at_limit, {}, handshake_payload_limit).frames.size() == 1u);
}

BOOST_AUTO_TEST_CASE(the_limit_rises_after_the_handshake) {
    std::string big = frame_bytes(message_type::run, std::string(1024 * 1024, 'r'));
    BOOST_TEST(
        (decode_in_pieces(big, {}, handshake_payload_limit).error->code == protocol_errc::frame_too_large));
    frame_decoder d;
    d.set_limit(payload_limit);
    d.feed(big);
    frame out;
    BOOST_TEST((d.next(out) == frame_decoder::status::frame));
    BOOST_TEST(out.payload.size() == 1024u * 1024u);
}

BOOST_AUTO_TEST_CASE(the_encoder_refuses_what_the_decoder_would) {
    std::string out = "kept";
    auto e = append_frame(out, message_type::hello, std::string(handshake_payload_limit + 1, 'h'),
                          handshake_payload_limit);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == protocol_errc::frame_too_large));
    BOOST_TEST(out == "kept");
    BOOST_TEST(!append_frame(out, message_type::output, std::string(output_chunk_limit, 'o')));
}

// A program that prints text instead of frames (a shell's motd, an error message) fails at
// the first header, not after waiting for a gigabyte.
BOOST_AUTO_TEST_CASE(text_and_unknown_types_are_refused_at_the_first_header) {
    auto text = decode_in_pieces("srun: error: Unable to allocate resources\n", {});
    BOOST_TEST_REQUIRE(text.error.has_value());
    BOOST_TEST((text.error->code == protocol_errc::unknown_type ||
                text.error->code == protocol_errc::frame_too_large));
    BOOST_TEST(text.frames.empty());
    for (int type : {0, last_message_type + 1, 255}) {
        std::string f("\0\0\0\0", 4);
        f.push_back(static_cast<char>(type));
        auto got = decode_in_pieces(f, {});
        BOOST_TEST_REQUIRE(got.error.has_value());
        BOOST_TEST((got.error->code == protocol_errc::unknown_type), type);
    }
}

BOOST_AUTO_TEST_CASE(an_error_is_final) {
    frame_decoder d(payload_limit);
    std::string bad("\0\0\0\0\0", 5);
    d.feed(bad + frame_bytes(message_type::heartbeat, ""));
    frame out;
    BOOST_TEST((d.next(out) == frame_decoder::status::error));
    d.feed(frame_bytes(message_type::heartbeat, ""));
    BOOST_TEST((d.next(out) == frame_decoder::status::error));
    BOOST_TEST((d.finish()->code == protocol_errc::unknown_type));
}

BOOST_AUTO_TEST_CASE(a_stream_that_ends_inside_a_frame_is_truncated) {
    std::string f = frame_bytes(message_type::result, "0123456789");
    for (std::size_t keep : {std::size_t(1), header_size - 1, header_size, f.size() - 1}) {
        auto got = decode_in_pieces(f.substr(0, keep), {});
        BOOST_TEST_REQUIRE(got.error.has_value(), keep);
        BOOST_TEST((got.error->code == protocol_errc::truncated_stream), keep);
    }
    BOOST_TEST(!decode_in_pieces(f, {}).error);
    BOOST_TEST(!decode_in_pieces("", {}).error);
}

// A long stream of small frames fed piece by piece keeps the buffer small.
BOOST_AUTO_TEST_CASE(consumed_bytes_are_dropped) {
    frame_decoder d(payload_limit);
    std::string f = frame_bytes(message_type::heartbeat, "12345678");
    frame out;
    std::size_t frames = 0;
    for (int i = 0; i < 10000; ++i) {
        // A frame and a half, then the other half with the next.
        d.feed(std::string_view(f).substr(0, 7));
        while (d.next(out) == frame_decoder::status::frame) ++frames;
        d.feed(std::string_view(f).substr(7));
        while (d.next(out) == frame_decoder::status::frame) ++frames;
        BOOST_TEST_REQUIRE(d.buffered() < f.size());
    }
    BOOST_TEST(frames == 10000u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(payloads)

BOOST_AUTO_TEST_CASE(fields_round_trip) {
    std::string p;
    payload_writer w(p);
    w.u8(0xfe);
    w.u32(0xdeadbeef);
    w.u64(0x0102030405060708ull);
    w.bytes(all_bytes());
    w.bytes("");
    w.list({"/bin/echo", "", std::string("a\0b", 3), "--"});
    w.list({});
    w.optional_bytes(std::nullopt);
    w.optional_bytes(std::string());
    w.optional_u64(std::nullopt);
    w.optional_u64(std::uint64_t(1) << 63);
    payload_reader r(p);
    BOOST_TEST(r.u8() == 0xfe);
    BOOST_TEST(r.u32() == 0xdeadbeefu);
    BOOST_TEST(r.u64() == 0x0102030405060708ull);
    BOOST_TEST(r.bytes() == all_bytes());
    BOOST_TEST(r.bytes().empty());
    auto list = r.list();
    BOOST_TEST_REQUIRE(list.size() == 4u);
    BOOST_TEST(list[2] == std::string("a\0b", 3));
    BOOST_TEST(r.list().empty());
    BOOST_TEST(!r.optional_bytes().has_value());
    auto empty = r.optional_bytes();
    BOOST_TEST_REQUIRE(empty.has_value());
    BOOST_TEST(empty->empty());
    BOOST_TEST(!r.optional_u64().has_value());
    BOOST_TEST(r.optional_u64().value_or(0) == std::uint64_t(1) << 63);
    BOOST_TEST(!r.finish("test"));
}

BOOST_AUTO_TEST_CASE(a_field_past_the_end_fails_the_reader_without_allocating) {
    // A length of 4 GiB - 1 with three bytes behind it: refused, not allocated.
    std::string p(
        "\xff\xff\xff\xff"
        "abc",
        7);
    payload_reader r(p);
    BOOST_TEST(r.bytes().empty());
    BOOST_TEST(r.failed());
    BOOST_TEST(r.u64() == 0u);  // every later read gives zero
    auto e = r.finish("run");
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == protocol_errc::malformed_payload));
    BOOST_TEST(e->message.find("run") != std::string::npos, e->message);

    // A list count that the rest cannot hold.
    std::string l(
        "\x00\x00\x00\x40"
        "xxxx",
        8);
    payload_reader lr(l);
    BOOST_TEST(lr.list().empty());
    BOOST_TEST((lr.finish("run")->code == protocol_errc::malformed_payload));

    // One byte short, at every width.
    payload_reader short_bytes(
        std::string_view("\x03\x00\x00\x00"
                         "ab",
                         6));
    BOOST_TEST(short_bytes.bytes().empty());
    BOOST_TEST((short_bytes.finish("output")->code == protocol_errc::malformed_payload));
    payload_reader short_u64(std::string_view("1234567", 7));
    short_u64.u64();
    BOOST_TEST(short_u64.failed());

    payload_reader short_u32(std::string_view("\x01\x02", 2));
    short_u32.u32();
    BOOST_TEST((short_u32.finish("cancel")->code == protocol_errc::malformed_payload));
}

BOOST_AUTO_TEST_CASE(bytes_after_the_last_field_are_refused) {
    std::string p;
    payload_writer w(p);
    w.u64(7);
    p.push_back('x');
    payload_reader r(p);
    r.u64();
    auto e = r.finish("heartbeat");
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == protocol_errc::trailing_bytes));
}

BOOST_AUTO_TEST_CASE(a_flag_is_zero_or_one) {
    payload_reader r(std::string_view("\x02", 1));
    r.flag();
    BOOST_TEST((r.finish("result")->code == protocol_errc::malformed_payload));
    payload_reader opt(std::string_view("\x07", 1));
    BOOST_TEST(!opt.optional_u64().has_value());
    BOOST_TEST(opt.failed());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(handshake)

BOOST_AUTO_TEST_CASE(hello_welcome_and_refuse_round_trip) {
    std::string stream;
    BOOST_TEST_REQUIRE(!append_hello(stream, good_hello()));
    BOOST_TEST_REQUIRE(!append_welcome(stream, good_welcome()));
    BOOST_TEST_REQUIRE(!append_refuse(stream, refuse{refusal_reason::build_digest, "another build"}));
    auto got = decode_in_pieces(stream, {}, handshake_payload_limit);
    BOOST_TEST_REQUIRE(!got.error);
    BOOST_TEST_REQUIRE(got.frames.size() == 3u);
    BOOST_TEST((got.frames[0].type == message_type::hello));
    auto h = decode_hello(got.frames[0].payload);
    BOOST_TEST_REQUIRE(bool(h));
    BOOST_TEST(h->magic == std::string(magic));
    BOOST_TEST(h->version == protocol_version);
    BOOST_TEST(h->build_digest == digest_of('\x11'));
    BOOST_TEST(h->run_id == "run-0123456789abcdef");
    BOOST_TEST(h->heartbeat_ms == 1000u);
    auto w = decode_welcome(got.frames[1].payload);
    BOOST_TEST_REQUIRE(bool(w));
    BOOST_TEST(w->node == "node01");
    BOOST_TEST(w->pid == 4242u);
    BOOST_TEST(w->cpus == 8u);
    BOOST_TEST((w->containment == worker_containment::cgroup));
    auto r = decode_refuse(got.frames[2].payload);
    BOOST_TEST_REQUIRE(bool(r));
    BOOST_TEST((r->reason == refusal_reason::build_digest));
    BOOST_TEST(r->message == "another build");
}

BOOST_AUTO_TEST_CASE(the_worker_accepts_only_its_own_build) {
    const std::string own = digest_of('\x11');
    BOOST_TEST(!check_hello(good_hello(), own));
    BOOST_TEST(!check_welcome(good_welcome(), own));

    hello other = good_hello();
    other.build_digest = digest_of('\x22');
    auto e = check_hello(other, own);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == protocol_errc::build_digest));
    // Both digests are named, so a user can tell which binary is which.
    BOOST_TEST(e->message.find("222222222222") != std::string::npos, e->message);
    BOOST_TEST(e->message.find("111111111111") != std::string::npos, e->message);

    hello version = good_hello();
    version.version = protocol_version + 1;
    version.build_digest = digest_of('\x22');  // the version is checked first
    BOOST_TEST((check_hello(version, own)->code == protocol_errc::protocol_version));

    hello stranger = version;
    stranger.magic = "not-agentctl";  // and the magic before it
    BOOST_TEST((check_hello(stranger, own)->code == protocol_errc::bad_magic));

    welcome w = good_welcome();
    w.build_digest = digest_of('\x33');
    BOOST_TEST((check_welcome(w, own)->code == protocol_errc::build_digest));
}

BOOST_AUTO_TEST_CASE(malformed_handshakes_are_refused) {
    auto payload_of = [](const std::string& f) { return f.substr(header_size); };
    std::string f;

    hello short_digest = good_hello();
    short_digest.build_digest = "abc";
    BOOST_TEST_REQUIRE(!append_hello(f, short_digest));
    BOOST_TEST((decode_hello(payload_of(f)).error().code == protocol_errc::malformed_payload));

    f.clear();
    hello no_beat = good_hello();
    no_beat.heartbeat_ms = 0;
    BOOST_TEST_REQUIRE(!append_hello(f, no_beat));
    BOOST_TEST((decode_hello(payload_of(f)).error().code == protocol_errc::malformed_payload));

    f.clear();
    BOOST_TEST_REQUIRE(!append_hello(f, good_hello()));
    BOOST_TEST((decode_hello(payload_of(f) + "x").error().code == protocol_errc::trailing_bytes));
    BOOST_TEST((decode_hello(payload_of(f).substr(0, 30)).error().code == protocol_errc::malformed_payload));

    // A payload that starts with another string is not a hello at all.
    std::string other;
    payload_writer w(other);
    w.bytes("GET / HTTP/1.1");
    BOOST_TEST((decode_hello(other).error().code == protocol_errc::bad_magic));

    f.clear();
    welcome none = good_welcome();
    none.cpus = 0;
    BOOST_TEST_REQUIRE(!append_welcome(f, none));
    BOOST_TEST((decode_welcome(payload_of(f)).error().code == protocol_errc::malformed_payload));

    f.clear();
    welcome odd = good_welcome();
    odd.containment = worker_containment{3};
    BOOST_TEST_REQUIRE(!append_welcome(f, odd));
    BOOST_TEST((decode_welcome(payload_of(f)).error().code == protocol_errc::malformed_payload));

    f.clear();
    BOOST_TEST_REQUIRE(!append_refuse(f, refuse{refusal_reason{9}, "?"}));
    BOOST_TEST((decode_refuse(payload_of(f)).error().code == protocol_errc::malformed_payload));

    // A hello that does not fit the handshake's limit is not sent.
    hello huge = good_hello();
    huge.run_id.assign(handshake_payload_limit, 'r');
    std::string out;
    BOOST_TEST((append_hello(out, huge)->code == protocol_errc::frame_too_large));
    BOOST_TEST(out.empty());
}

BOOST_AUTO_TEST_CASE(refusals_carry_their_reason_back) {
    for (auto code :
         {protocol_errc::bad_magic, protocol_errc::protocol_version, protocol_errc::build_digest}) {
        refuse r = refusal_for(protocol_error{code, "why"});
        std::string f;
        BOOST_TEST_REQUIRE(!append_refuse(f, r));
        auto back = decode_refuse(f.substr(header_size));
        BOOST_TEST_REQUIRE(bool(back));
        protocol_error e = error_of(*back);
        BOOST_TEST((e.code == code));
        BOOST_TEST(e.message.find("why") != std::string::npos, e.message);
    }
    BOOST_TEST(
        (refusal_for(protocol_error{protocol_errc::trailing_bytes, ""}).reason == refusal_reason::malformed));
}

BOOST_AUTO_TEST_CASE(each_side_receives_only_its_messages) {
    using t = message_type;
    const std::set<t> worker_before = {t::hello};
    const std::set<t> worker_after = {t::run, t::cancel, t::heartbeat, t::slots};
    const std::set<t> driver_before = {t::welcome, t::refuse};
    const std::set<t> driver_after = {t::started, t::output, t::result, t::heartbeat, t::bye};
    for (std::uint8_t i = 1; i <= last_message_type; ++i) {
        t type{i};
        BOOST_TEST((!check_arrival(side::worker, false, type)) == (worker_before.count(type) > 0),
                   to_string(type));
        BOOST_TEST((!check_arrival(side::worker, true, type)) == (worker_after.count(type) > 0),
                   to_string(type));
        BOOST_TEST((!check_arrival(side::driver, false, type)) == (driver_before.count(type) > 0),
                   to_string(type));
        BOOST_TEST((!check_arrival(side::driver, true, type)) == (driver_after.count(type) > 0),
                   to_string(type));
    }
    BOOST_TEST((check_arrival(side::worker, false, t::run)->code == protocol_errc::unexpected_message));
}

// Both ends as they will run: the worker reads the hello byte by byte under the handshake's
// limit, answers, and both raise the limit for the frames that follow.
BOOST_AUTO_TEST_CASE(a_whole_handshake_then_a_large_frame) {
    const std::string own = digest_of('\x11');
    std::string to_worker;
    BOOST_TEST_REQUIRE(!append_hello(to_worker, good_hello()));
    BOOST_TEST_REQUIRE(!append_frame(to_worker, message_type::run, std::string(2 * 1024 * 1024, 'r')));

    frame_decoder at_worker;
    bool ready = false;
    std::size_t runs = 0;
    std::string to_driver;
    for (char c : to_worker) {
        at_worker.feed(std::string_view(&c, 1));
        frame f;
        while (at_worker.next(f) == frame_decoder::status::frame) {
            BOOST_TEST_REQUIRE(!check_arrival(side::worker, ready, f.type));
            if (!ready) {
                auto h = decode_hello(f.payload);
                BOOST_TEST_REQUIRE(bool(h));
                BOOST_TEST_REQUIRE(!check_hello(*h, own));
                BOOST_TEST_REQUIRE(!append_welcome(to_driver, good_welcome()));
                at_worker.set_limit(payload_limit);
                ready = true;
            } else {
                ++runs;
            }
        }
        BOOST_TEST_REQUIRE(!at_worker.error());
    }
    BOOST_TEST(runs == 1u);

    frame_decoder at_driver;
    at_driver.feed(to_driver);
    frame f;
    BOOST_TEST_REQUIRE((at_driver.next(f) == frame_decoder::status::frame));
    BOOST_TEST(!check_arrival(side::driver, false, f.type));
    auto w = decode_welcome(f.payload);
    BOOST_TEST_REQUIRE(bool(w));
    BOOST_TEST(!check_welcome(*w, own));
}

// The large frame a driver of the same build may send is refused when it comes first: a
// driver that skipped the hello is not trusted with more than the handshake's limit.
BOOST_AUTO_TEST_CASE(a_run_before_the_hello_is_refused) {
    std::string stream;
    BOOST_TEST_REQUIRE(!append_frame(stream, message_type::run, "small"));
    frame_decoder d;
    d.feed(stream);
    frame f;
    BOOST_TEST_REQUIRE((d.next(f) == frame_decoder::status::frame));
    auto e = check_arrival(side::worker, false, f.type);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->message.find("before the handshake") != std::string::npos, e->message);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(purity)

BOOST_AUTO_TEST_CASE(sources_include_only_standard_headers) {
    std::string root = env_or_empty("AGENTCTL_SOURCE_ROOT");
    BOOST_TEST_REQUIRE(!root.empty(), "AGENTCTL_SOURCE_ROOT is not set (run through meson test)");
    const fs::path dir = fs::path(root) / "src" / "worker_protocol";
    const std::set<std::string> allowed = {"cassert",  "cstddef", "cstdint",     "limits",
                                           "optional", "string",  "string_view", "type_traits",
                                           "utility",  "variant", "vector"};
    const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
    std::size_t scanned = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        auto ext = e.path().extension();
        if (ext != ".cpp" && ext != ".hpp") continue;
        ++scanned;
        std::ifstream in(e.path());
        std::string line;
        for (int number = 1; std::getline(in, line); ++number) {
            std::smatch m;
            if (!std::regex_search(line, m, include)) continue;
            const std::string header = m[2].str();
            bool own = m[1] == "\"" && header.rfind("worker_protocol/", 0) == 0;
            BOOST_TEST((own || (m[1] == "<" && allowed.count(header))),
                       e.path().filename().string() << ":" << number << ": includes " << header);
        }
    }
    BOOST_TEST(scanned >= 6u);
}

BOOST_AUTO_TEST_CASE(objects_call_no_system_function) {
    std::string lib = env_or_empty("AGENTCTL_WORKER_PROTOCOL_LIB");
    BOOST_TEST_REQUIRE(!lib.empty(), "AGENTCTL_WORKER_PROTOCOL_LIB is not set (run through meson test)");
    auto objects = agentctl::test::undefined_symbols({lib});
    BOOST_TEST_REQUIRE(objects.has_value(), "nm did not run on " << lib);
    std::size_t checked = 0;
    for (const auto& [member, names] : *objects) {
        for (const auto& name : names) {
            ++checked;
            BOOST_TEST(!agentctl::test::is_one_of(name, agentctl::test::system_functions,
                                                  agentctl::test::system_parts),
                       member << " needs `" << name << "`");
        }
    }
    BOOST_TEST(checked > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
