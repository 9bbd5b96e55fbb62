// How records become bytes: the checksum and the result JSON.
#include "harness.hpp"

#include "journal/codec.hpp"

#include <boost/json/serialize.hpp>

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

// An aggregate recorded without its items says so, and reads back so (schema 3).
BOOST_AUTO_TEST_CASE(an_aggregate_without_its_items_round_trips) {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{error_code::child_failed, "1 of 3 items failed"};
    r.output_released = true;
    std::string json = jd::encode_result(r);
    BOOST_TEST(json.find("\"output_released\":true") != std::string::npos, json);
    task_result back;
    BOOST_TEST_REQUIRE(jd::decode_result(json, back));
    BOOST_TEST(back.output_released);
    BOOST_TEST(back.output.is_null());
    r.output_released = false;
    BOOST_TEST_REQUIRE(jd::decode_result(jd::encode_result(r), back));
    BOOST_TEST(!back.output_released);
}

BOOST_AUTO_TEST_SUITE_END()
