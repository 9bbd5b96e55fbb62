// How records become bytes: the checksum and the result JSON.
#include "harness.hpp"

#include "journal/codec.hpp"

#include <boost/json/serialize.hpp>

#include <functional>
#include <random>

using namespace agentctl;
using namespace journal_test;
namespace jd = agentctl::journal_detail;

BOOST_AUTO_TEST_SUITE(codec)

BOOST_AUTO_TEST_CASE(crc32c_check_value_and_hardware_agrees) {
    BOOST_TEST(jd::crc32c("123456789") == 0xe3069283u);  // the standard check value
    BOOST_TEST(jd::crc32c_portable("123456789") == 0xe3069283u);
    BOOST_TEST(jd::crc32c("") == 0u);
    std::mt19937 rng(1);
    std::string data(200000, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    // Every path of the three-way loops, at odd offsets and lengths.
    for (std::size_t len :
         {0ul, 1ul, 7ul, 8ul, 255ul, 768ul, 769ul, 8191ul, 24576ul, 24577ul, 24583ul, 100000ul, 199990ul}) {
        for (std::size_t off : {0ul, 1ul, 3ul}) {
            std::string_view v(data.data() + off, len);
            BOOST_TEST(jd::crc32c(v) == jd::crc32c_portable(v), "len " << len << " off " << off);
        }
    }
    // Continued over chunks, as a stream is read back.
    std::string_view all(data);
    std::uint32_t c = 0;
    for (std::size_t at = 0; at < all.size(); at += 65536) c = jd::crc32c(all.substr(at, 65536), c);
    BOOST_TEST(c == jd::crc32c(all));
}

BOOST_AUTO_TEST_CASE(results_round_trip_without_streams) {
    task_result r = make_result(task_state::failed, "out text", "err text");
    r.signal = 15;
    r.descendants_killed = 3;
    r.limit_stream = "stdout";
    r.limit_bytes = 10;
    std::string json = jd::encode_result(r);
    BOOST_TEST(json.find("out text") == std::string::npos, "streams are stored apart: " << json);
    BOOST_TEST(json.find("err text") == std::string::npos);
    task_result back;
    BOOST_TEST_REQUIRE(jd::decode_result(json, back));
    jd::attach_stream(back, true, "out text");
    jd::attach_stream(back, false, "err text");
    BOOST_TEST(boost::json::serialize(back.output) == boost::json::serialize(r.output));
    BOOST_TEST(back.signal.value_or(0) == 15);
    BOOST_TEST(back.descendants_killed == 3u);
    BOOST_TEST(back.limit_stream == "stdout");
    BOOST_TEST(back.error->message == r.error->message);
    BOOST_TEST(back.usage.system_us == 200u);

    task_result t = make_result(task_state::succeeded, "a", "b", /*streams_in_output=*/false);
    json = jd::encode_result(t);
    BOOST_TEST_REQUIRE(jd::decode_result(json, back));
    BOOST_TEST(!back.streams_in_output);
    jd::attach_stream(back, true, "a");
    BOOST_TEST(back.stdout_text == "a");
    BOOST_TEST(!jd::decode_result("{\"state\":\"nonsense\"}", back));
    BOOST_TEST(!jd::decode_result("not json", back));
}

// same_encoding() decides "the same JSON" without encoding: it must never say so when the
// encodings differ (a final stored as '' would read back as its end), and it says so for the
// engine's final (the end's result without its streams).
BOOST_AUTO_TEST_CASE(same_encoding_agrees_with_the_encodings) {
    // A member added to task_result must be added to encode_result() and same_encoding() (or
    // be left out of both on purpose, as the streams are), and to the cases below.
#if defined(__x86_64__) && defined(__GLIBCXX__)
    static_assert(sizeof(task_result) == 528, "task_result changed: review same_encoding() and this test");
#endif
    task_result base = make_result(task_state::failed, "out text", "err text");
    base.signal = 15;
    base.stdout_lossy = true;
    base.argv = {"/bin/echo", "a"};
    base.engine = "podman";
    base.backend = "slurm";
    base.slurm_job_id = 77;
    base.slurm_node = "n1";
    base.slurm_state = "FAILED";
    base.descendants_killed = 2;
    base.limit_stream = "stdout";
    base.limit_bytes = 10;
    base.output.as_object()["n"] = 1.5;
    using change = std::function<void(task_result&)>;
    const std::pair<const char*, change> differ[] = {
        {"state", [](task_result& r) { r.state = task_state::timed_out; }},
        {"attempts", [](task_result& r) { r.attempts = 2; }},
        {"exit_code", [](task_result& r) { r.exit_code = 2; }},
        {"signal", [](task_result& r) { r.signal.reset(); }},
        {"stdout_lossy", [](task_result& r) { r.stdout_lossy = false; }},
        {"stderr_lossy", [](task_result& r) { r.stderr_lossy = true; }},
        {"duration_ms", [](task_result& r) { r.duration_ms = 13; }},
        {"command", [](task_result& r) { r.command = "/bin/cat"; }},
        {"argv", [](task_result& r) { r.argv.push_back("b"); }},
        {"isolation", [](task_result& r) { r.isolation = "container"; }},
        {"engine", [](task_result& r) { r.engine = "docker"; }},
        {"containment", [](task_result& r) { r.containment = "engine"; }},
        {"backend", [](task_result& r) { r.backend = "local"; }},
        {"slurm_job_id", [](task_result& r) { r.slurm_job_id = 78; }},
        {"slurm_node", [](task_result& r) { r.slurm_node = "n2"; }},
        {"slurm_state", [](task_result& r) { r.slurm_state = "COMPLETED"; }},
        {"descendants_killed", [](task_result& r) { r.descendants_killed = 0; }},
        {"usage", [](task_result& r) { r.usage.max_rss_kib = 1; }},
        {"limit_stream", [](task_result& r) { r.limit_stream = "stderr"; }},
        {"limit_bytes", [](task_result& r) { r.limit_bytes = 11; }},
        {"output_bytes", [](task_result& r) { r.output_bytes = 0; }},
        {"error code", [](task_result& r) { r.error->code = error_code::timeout; }},
        {"error message", [](task_result& r) { r.error->message += "!"; }},
        {"no error", [](task_result& r) { r.error.reset(); }},
        {"streams_in_output", [](task_result& r) { r.streams_in_output = false; }},
        {"an output member", [](task_result& r) { r.output.as_object()["exitCode"] = 1; }},
        {"a number's sign", [](task_result& r) { r.output.as_object()["n"] = -1.5; }},
        {"output member order",
         [](task_result& r) {
             auto& o = r.output.as_object();
             boost::json::value v = o["status"];
             o.erase("status");
             o["status"] = v;
         }},
        {"the streams left out of output",
         [](task_result& r) {
             r.output.as_object().erase("stdout");
             r.output.as_object().erase("stderr");
         }},
        {"a stream that is not a string", [](task_result& r) { r.output.as_object()["stdout"] = nullptr; }},
    };
    for (const auto& [what, f] : differ) {
        task_result b = base;
        f(b);
        BOOST_TEST(jd::encode_result(b) != jd::encode_result(base),
                   what << ": the case must change the JSON");
        BOOST_TEST(!jd::same_encoding(base, b), what);
        BOOST_TEST(!jd::same_encoding(b, base), what);
    }
    // What the JSON leaves out: the streams (wherever they are kept), reused, streams_released.
    const std::pair<const char*, change> same[] = {
        {"nothing", [](task_result&) {}},
        {"stripped streams",
         [](task_result& r) {
             r.output.as_object()["stdout"] = "";
             r.output.as_object()["stderr"] = "other";
         }},
        {"stdout_text", [](task_result& r) { r.stdout_text = "apart"; }},
        {"reused", [](task_result& r) { r.reused = true; }},
        {"streams_released", [](task_result& r) { r.streams_released = true; }},
    };
    for (const auto& [what, f] : same) {
        task_result b = base;
        f(b);
        BOOST_TEST(jd::encode_result(b) == jd::encode_result(base), what);
        BOOST_TEST(jd::same_encoding(base, b), what);
    }
    // A process's result: streams apart, output without them.
    task_result p = make_result(task_state::succeeded, "a", "b", /*streams_in_output=*/false);
    task_result light = p;
    light.stdout_text.clear();
    light.stderr_text.clear();
    BOOST_TEST(jd::same_encoding(p, light));
    BOOST_TEST(jd::encode_result(p) == jd::encode_result(light));
}

BOOST_AUTO_TEST_SUITE_END()
