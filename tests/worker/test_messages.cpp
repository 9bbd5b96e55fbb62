// src/worker_protocol's messages after the handshake: every field round-trips, output is cut
// into bounded chunks, and a decoder refuses values out of their range.
#include "worker_protocol/messages.hpp"

#include <boost/test/unit_test.hpp>

using namespace agentctl::worker_protocol;

namespace {

// The single frame `append` wrote, checked for its type; its payload.
template <typename Append>
std::string payload_of(message_type type, Append append) {
    std::string out;
    auto e = append(out);
    BOOST_TEST_REQUIRE(!e, (e ? e->message : ""));
    frame_decoder d(payload_limit);
    d.feed(out);
    frame f;
    BOOST_TEST_REQUIRE((d.next(f) == frame_decoder::status::frame));
    BOOST_TEST_REQUIRE((f.type == type));
    BOOST_TEST_REQUIRE(d.buffered() == 0u);
    return f.payload;
}

run_request sample_run() {
    run_request m;
    m.tag = 0x0102030405060708ull;
    m.executable = "/usr/bin/printf";
    m.argv = {"printf", std::string("a\0b\xff", 4), "", "--"};
    m.env = {"FOO=bar", "EMPTY="};
    m.workspace_root = "/work/space";
    m.cwd = "sub dir";
    m.stdin_data = std::string("\0in\n", 4);
    m.stdout_limit = 1024;
    m.stderr_limit = 2048;
    m.combined_limit = 3072;
    m.timeout_ms = 5000;
    m.kill_grace_ms = 2000;
    m.drain_grace_ms = 250;
    m.containment = containment_request::process_group_only;
    return m;
}

run_result sample_result() {
    run_result m;
    m.tag = 9;
    m.outcome = run_outcome::output_limit_exceeded;
    m.signal = 9;
    m.core_dumped = true;
    m.limit_stream = "combined output";
    m.limit_bytes = 3072;
    m.duration_us = 123456;
    m.user_us = 1;
    m.system_us = 2;
    m.max_rss_kib = 3;
    m.used = used_containment::cgroup;
    m.descendants_killed = 4;
    m.error_code = "output_limit_exceeded";
    m.error_message = "combined output passed 3072 bytes";
    m.stdout_size = 3000;
    m.stderr_size = 72;
    return m;
}

std::string run_payload(const run_request& m) {
    return payload_of(message_type::run, [&](std::string& out) { return append_run(out, m); });
}

std::string result_payload(const run_result& m) {
    return payload_of(message_type::result, [&](std::string& out) { return append_result(out, m); });
}

// Whether the decoder refuses `m` as malformed once `change` has been applied to it.
template <typename Message, typename Change, typename Payload, typename Decode>
bool refused_after(Message m, Change change, Payload payload, Decode decode) {
    change(m);
    auto got = decode(payload(m));
    return !got && got.error().code == protocol_errc::malformed_payload;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(messages)

BOOST_AUTO_TEST_CASE(a_run_round_trips_byte_for_byte) {
    const run_request m = sample_run();
    auto got = decode_run(run_payload(m));
    BOOST_TEST_REQUIRE(bool(got), (got ? std::string() : got.error().message));
    BOOST_TEST(got->tag == m.tag);
    BOOST_TEST(got->executable == m.executable);
    BOOST_TEST(got->argv == m.argv);
    BOOST_TEST(got->env == m.env);
    BOOST_TEST(got->workspace_root == m.workspace_root);
    BOOST_TEST(got->cwd == m.cwd);
    BOOST_TEST_REQUIRE(got->stdin_data.has_value());
    BOOST_TEST(*got->stdin_data == *m.stdin_data);
    BOOST_TEST(got->stdout_limit == 1024u);
    BOOST_TEST(got->stderr_limit == 2048u);
    BOOST_TEST(got->combined_limit == 3072u);
    BOOST_TEST(got->timeout_ms == 5000u);
    BOOST_TEST(got->kill_grace_ms == 2000u);
    BOOST_TEST(got->drain_grace_ms == 250u);
    BOOST_TEST((got->containment == containment_request::process_group_only));

    run_request no_stdin = m;
    no_stdin.stdin_data.reset();
    no_stdin.cwd.clear();
    auto plain = decode_run(run_payload(no_stdin));
    BOOST_TEST_REQUIRE(bool(plain));
    BOOST_TEST(!plain->stdin_data.has_value());
    BOOST_TEST(plain->cwd.empty());
}

BOOST_AUTO_TEST_CASE(a_run_out_of_range_is_refused) {
    auto refused = [](auto change) { return refused_after(sample_run(), change, run_payload, decode_run); };
    BOOST_TEST(refused([](run_request& m) { m.executable = "printf"; }));
    BOOST_TEST(refused([](run_request& m) { m.executable.clear(); }));
    BOOST_TEST(refused([](run_request& m) { m.argv.clear(); }));
    BOOST_TEST(refused([](run_request& m) { m.workspace_root = "work"; }));
    BOOST_TEST(refused([](run_request& m) { m.stdout_limit = 0; }));
    BOOST_TEST(refused([](run_request& m) { m.combined_limit = 0; }));
    BOOST_TEST(refused([](run_request& m) { m.timeout_ms = 0; }));
    BOOST_TEST(refused([](run_request& m) { m.containment = containment_request{3}; }));
    BOOST_TEST(!refused([](run_request&) {}));
}

// argv, environment and stdin together over the frame limit: refused before anything is sent.
BOOST_AUTO_TEST_CASE(a_run_too_large_for_a_frame_is_not_sent) {
    run_request m = sample_run();
    m.stdin_data = std::string(payload_limit, 'i');
    std::string out = "kept";
    auto e = append_run(out, m);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == protocol_errc::frame_too_large));
    BOOST_TEST(out == "kept");
}

BOOST_AUTO_TEST_CASE(cancel_started_heartbeat_round_trip) {
    auto c = decode_cancel(payload_of(message_type::cancel, [](std::string& out) {
        return append_cancel(out, cancel_request{77, cancel_kind::graceful});
    }));
    BOOST_TEST_REQUIRE(bool(c));
    BOOST_TEST(c->tag == 77u);
    BOOST_TEST((c->kind == cancel_kind::graceful));

    started_note s;
    s.tag = 5;
    s.pid = 31337;
    s.start_lo = 100;
    s.start_hi = 101;
    s.cgroup = "/sys/fs/cgroup/x/agentctl@1-2-3/abc-1";
    auto got = decode_started(
        payload_of(message_type::started, [&](std::string& out) { return append_started(out, s); }));
    BOOST_TEST_REQUIRE(bool(got));
    BOOST_TEST(got->pid == 31337u);
    BOOST_TEST(got->start_lo == 100u);
    BOOST_TEST(got->start_hi == 101u);
    BOOST_TEST(got->cgroup == s.cgroup);

    auto h = decode_heartbeat(payload_of(message_type::heartbeat, [](std::string& out) {
        return append_heartbeat(out, heartbeat{~std::uint64_t(0)});
    }));
    BOOST_TEST_REQUIRE(bool(h));
    BOOST_TEST(h->sequence == ~std::uint64_t(0));

    auto slots = decode_slots(
        payload_of(message_type::slots, [](std::string& out) { return append_slots(out, slots_limit{8}); }));
    BOOST_TEST_REQUIRE(bool(slots));
    BOOST_TEST(slots->count == 8u);
    BOOST_TEST(!decode_slots(
        payload_of(message_type::slots, [](std::string& out) { return append_slots(out, slots_limit{0}); })));

    auto b = decode_bye(
        payload_of(message_type::bye, [](std::string& out) { return append_bye(out, bye{1000}); }));
    BOOST_TEST_REQUIRE(bool(b));
    BOOST_TEST(b->tasks == 1000u);

    // Out of range.
    std::string bad_kind = payload_of(message_type::cancel, [](std::string& out) {
        return append_cancel(out, cancel_request{1, cancel_kind{7}});
    });
    BOOST_TEST(!decode_cancel(bad_kind));
    started_note no_pid = s;
    no_pid.pid = 0;
    BOOST_TEST(!decode_started(
        payload_of(message_type::started, [&](std::string& out) { return append_started(out, no_pid); })));
    started_note backwards = s;
    backwards.start_lo = 102;
    BOOST_TEST(!decode_started(
        payload_of(message_type::started, [&](std::string& out) { return append_started(out, backwards); })));
    BOOST_TEST((decode_heartbeat("1234567").error().code == protocol_errc::malformed_payload));
    BOOST_TEST((decode_heartbeat("123456789").error().code == protocol_errc::trailing_bytes));
}

BOOST_AUTO_TEST_CASE(a_result_round_trips) {
    const run_result m = sample_result();
    auto got = decode_result(result_payload(m));
    BOOST_TEST_REQUIRE(bool(got), (got ? std::string() : got.error().message));
    BOOST_TEST((got->outcome == run_outcome::output_limit_exceeded));
    BOOST_TEST(!got->exit_code.has_value());
    BOOST_TEST(got->signal.value_or(0) == 9u);
    BOOST_TEST(got->core_dumped);
    BOOST_TEST(got->limit_stream == "combined output");
    BOOST_TEST(got->limit_bytes == 3072u);
    BOOST_TEST(got->duration_us == 123456u);
    BOOST_TEST(got->user_us == 1u);
    BOOST_TEST(got->system_us == 2u);
    BOOST_TEST(got->max_rss_kib == 3u);
    BOOST_TEST((got->used == used_containment::cgroup));
    BOOST_TEST(got->descendants_killed == 4u);
    BOOST_TEST(got->error_code == "output_limit_exceeded");
    BOOST_TEST(got->error_message == m.error_message);
    BOOST_TEST(got->stdout_size == 3000u);
    BOOST_TEST(got->stderr_size == 72u);

    run_result exited;
    exited.outcome = run_outcome::exited;
    exited.exit_code = 0;
    auto zero = decode_result(result_payload(exited));
    BOOST_TEST_REQUIRE(bool(zero));
    BOOST_TEST_REQUIRE(zero->exit_code.has_value());  // 0 is a status, not "none"
    BOOST_TEST(*zero->exit_code == 0u);
    BOOST_TEST(zero->error_code.empty());
}

BOOST_AUTO_TEST_CASE(a_result_out_of_range_is_refused) {
    auto refused = [](auto change) {
        return refused_after(sample_result(), change, result_payload, decode_result);
    };
    BOOST_TEST(refused([](run_result& m) { m.outcome = run_outcome{6}; }));
    BOOST_TEST(refused([](run_result& m) { m.outcome = run_outcome{0}; }));
    BOOST_TEST(refused([](run_result& m) { m.signal = 0; }));
    BOOST_TEST(refused([](run_result& m) { m.signal = 128; }));
    BOOST_TEST(refused([](run_result& m) {
        m.signal.reset();
        m.exit_code = 256;
    }));
    BOOST_TEST(refused([](run_result& m) { m.exit_code = 1; }));  // and a signal
    BOOST_TEST(refused([](run_result& m) { m.used = used_containment{3}; }));
    BOOST_TEST(!refused([](run_result& m) {
        m.signal.reset();
        m.exit_code = 255;
    }));
}

BOOST_AUTO_TEST_CASE(output_is_cut_into_bounded_chunks_in_order) {
    std::string none;
    append_output(none, 1, stream_id::stdout_stream, "");
    BOOST_TEST(none.empty());

    std::string data;
    for (std::size_t i = 0; i < 2 * output_chunk_limit + 1; ++i) data.push_back(static_cast<char>(i * 7));
    std::string stream;
    append_output(stream, 3, stream_id::stderr_stream, data);
    frame_decoder d(payload_limit);
    d.feed(stream);
    frame f;
    std::string joined;
    std::size_t chunks = 0;
    while (d.next(f) == frame_decoder::status::frame) {
        BOOST_TEST_REQUIRE((f.type == message_type::output));
        auto c = decode_output(f.payload);
        BOOST_TEST_REQUIRE(bool(c), (c ? std::string() : c.error().message));
        BOOST_TEST(c->tag == 3u);
        BOOST_TEST((c->stream == stream_id::stderr_stream));
        BOOST_TEST(c->bytes.size() <= output_chunk_limit);
        joined += c->bytes;
        ++chunks;
    }
    BOOST_TEST(!d.error());
    BOOST_TEST(chunks == 3u);
    BOOST_TEST(joined == data);
}

BOOST_AUTO_TEST_CASE(an_empty_or_oversized_chunk_is_refused) {
    auto chunk = [](std::uint8_t stream, std::string_view bytes) {
        std::string p;
        payload_writer w(p);
        w.u64(1);
        w.u8(stream);
        w.bytes(bytes);
        return decode_output(p);
    };
    BOOST_TEST(bool(chunk(1, "x")));
    BOOST_TEST(!chunk(1, ""));
    BOOST_TEST(!chunk(1, std::string(output_chunk_limit + 1, 'x')));
    BOOST_TEST(!chunk(3, "x"));
}

BOOST_AUTO_TEST_SUITE_END()
