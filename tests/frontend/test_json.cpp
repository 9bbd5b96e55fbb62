// The JSON layer: digests, the writer, UTF-8 repair.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "json/sha256.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <vector>

using namespace agentctl;

namespace {
std::string digest(std::string_view s, bool portable) {
    sha256 h;
    if (portable) h.use_portable_only();
    h.update(s);
    return h.hex();
}
}  // namespace

BOOST_AUTO_TEST_CASE(sha256_known_vectors_in_both_implementations) {
    for (bool portable : {false, true}) {
        BOOST_TEST(digest("", portable) ==
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        BOOST_TEST(digest("abc", portable) ==
                   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        BOOST_TEST(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", portable) ==
                   "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        BOOST_TEST(digest(std::string(1000000, 'a'), portable) ==
                   "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
}

BOOST_AUTO_TEST_CASE(sha256_hardware_and_portable_agree_on_any_split) {
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::string data(rng() % 3000, '\0');
        for (auto& c : data) c = static_cast<char>(rng());
        sha256 a, b;
        b.use_portable_only();
        std::size_t at = 0;
        while (at < data.size()) {  // feed in random pieces to exercise the buffering
            std::size_t n = std::min<std::size_t>(rng() % 200 + 1, data.size() - at);
            a.update(std::string_view(data).substr(at, n));
            b.update(std::string_view(data).substr(at, n));
            at += n;
        }
        BOOST_TEST(a.hex() == b.hex());
    }
    BOOST_TEST(sha256_digest("abc") ==
               "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

BOOST_AUTO_TEST_CASE(writer_escapes_and_keeps_member_order) {
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_object();
        w.member("z", "a\"b\\c\n\x01");
        w.member("a", std::int64_t(-3));
        w.key("list");
        w.begin_array();
        w.number(1.0);
        w.number(0.5);
        w.boolean(false);
        w.null();
        w.end_array();
        w.key("v");
        w.value(boost::json::parse(R"({"b":1,"a":[true,"x"]})"));
        w.end_object();
    }
    BOOST_TEST(sink.text ==
               R"({"z":"a\"b\\c\n\u0001","a":-3,"list":[1.0,0.5,false,null],"v":{"b":1,"a":[true,"x"]}})");
    BOOST_TEST(boost::json::parse(sink.text).is_object());
}

// Long strings take the writer's slice path (escapes written in place, 16 KiB at a time,
// flushed at 64 KiB): every byte of it must come back through a JSON parser unchanged.
BOOST_AUTO_TEST_CASE(writer_escapes_long_mixed_strings_exactly) {
    std::mt19937 rng(7);
    for (std::size_t size : {0u, 1u, 16383u, 16384u, 16385u, 100000u, 300001u}) {
        for (int kind = 0; kind < 3; ++kind) {
            std::string text(size, '\0');  // kind 0: all NUL (a binary stream)
            for (auto& c : text) {
                if (kind == 1) c = static_cast<char>(rng() % 0x80);                     // any ASCII
                if (kind == 2) c = rng() % 16 ? 'x' : static_cast<char>(rng() % 0x20);  // rare
            }
            string_sink sink;
            {
                json_writer w(sink);
                w.begin_array();
                w.string(text);
                w.string("\"end\"");
                w.end_array();
            }
            auto v = boost::json::parse(sink.text);
            const auto& back = v.as_array().at(0).as_string();
            BOOST_TEST((std::string_view(back.data(), back.size()) == text),
                       "size " << size << " kind " << kind);
            BOOST_TEST(v.as_array().at(1).as_string() == "\"end\"");
            if (kind == 0) BOOST_TEST(sink.text.size() == size * 6 + 14);
        }
    }
}

// Short strings are scanned for escapes eight bytes at a time: every byte value at every
// position of the first words must be escaped exactly as a byte-by-byte escape does.
BOOST_AUTO_TEST_CASE(writer_escapes_each_byte_at_each_position) {
    auto reference = [](std::string_view s) {
        std::string out = "\"";
        for (unsigned char c : s) {
            if (c == '"' || c == '\\') {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
                out += '\\';
                out += c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            } else if (c < 0x20) {
                static constexpr char hex[] = "0123456789abcdef";
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 15];
            } else {
                out += static_cast<char>(c);
            }
        }
        return out + "\"";
    };
    for (std::size_t size : {1u, 7u, 8u, 9u, 16u, 17u}) {
        for (std::size_t at = 0; at < size; ++at) {
            for (int byte = 0; byte < 256; ++byte) {
                std::string text(size, 'a');
                text[at] = static_cast<char>(byte);
                string_sink sink;
                {
                    json_writer w(sink);
                    w.string(text);
                }
                BOOST_TEST(sink.text == reference(text), "size " << size << " at " << at << " byte " << byte);
            }
        }
    }
}

// Commas go between the values of a container, never between top-level values.
BOOST_AUTO_TEST_CASE(writer_separates_values_inside_containers_only) {
    string_sink sink;
    {
        json_writer w(sink);
        w.begin_array();
        w.begin_object();
        w.end_object();
        w.begin_array();
        w.end_array();
        w.begin_object();
        w.key("a");
        w.begin_array();
        w.null();
        w.begin_array();
        w.end_array();
        w.end_array();
        w.member("b", true);
        w.end_object();
        w.raw_value("7");
        w.end_array();
        w.number(1);
        w.string("x");
    }
    BOOST_TEST(sink.text == R"([{},[],{"a":[null,[]],"b":true},7]1"x")");
}

// Base64 against RFC 4648's vectors, and any bytes round-tripped across the writer's slices.
BOOST_AUTO_TEST_CASE(writer_base64_matches_rfc4648_at_every_size) {
    auto encoded = [](std::string_view bytes) {
        string_sink sink;
        {
            json_writer w(sink);
            w.base64(bytes);
        }
        return sink.text;
    };
    BOOST_TEST(encoded("") == "\"\"");
    BOOST_TEST(encoded("f") == "\"Zg==\"");
    BOOST_TEST(encoded("fo") == "\"Zm8=\"");
    BOOST_TEST(encoded("foo") == "\"Zm9v\"");
    BOOST_TEST(encoded("foobar") == "\"Zm9vYmFy\"");
    BOOST_TEST(encoded(std::string_view("\0\xFF\xFE", 3)) == "\"AP/+\"");
    std::mt19937 rng(11);
    for (std::size_t size : {49151u, 49152u, 49153u, 49154u, 200000u}) {
        std::string bytes(size, '\0');
        for (auto& c : bytes) c = static_cast<char>(rng());
        std::string text = encoded(bytes);
        BOOST_TEST(text.size() == (size + 2) / 3 * 4 + 2);
        // Decode it back by hand: the same bytes.
        static constexpr std::string_view digits =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        std::string back;
        std::uint32_t bits = 0;
        int have = 0;
        for (char c : std::string_view(text).substr(1, text.size() - 2)) {
            if (c == '=') break;
            bits = bits << 6 | static_cast<std::uint32_t>(digits.find(c));
            if ((have += 6) >= 8) back.push_back(static_cast<char>(bits >> (have -= 8)));
        }
        BOOST_TEST((back == bytes), "size " << size);
    }
}

// The writer's encoder (vector steps of 24 bytes where the CPU has AVX2, steps of 6 and 3, the
// padded tail) against a plain one, digit by digit: every length up to a few vector steps, and
// lengths around the writer's 48 KiB slices, each with every tail.
BOOST_AUTO_TEST_CASE(writer_base64_matches_a_plain_encoder_at_every_tail) {
    static constexpr std::string_view digits =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    auto plain = [](std::string_view bytes) {
        std::string text = "\"";
        for (std::size_t i = 0; i < bytes.size(); i += 3) {
            std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
            if (i + 1 < bytes.size())
                v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
            if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
            text += digits[v >> 18];
            text += digits[v >> 12 & 63];
            text += i + 1 < bytes.size() ? digits[v >> 6 & 63] : '=';
            text += i + 2 < bytes.size() ? digits[v & 63] : '=';
        }
        return text + "\"";
    };
    auto encoded = [](std::string_view bytes) {
        string_sink sink;
        {
            json_writer w(sink);
            w.base64(bytes);
        }
        return sink.text;
    };
    std::mt19937 rng(27);
    std::string bytes(3 * 48 * 1024 + 64, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    for (std::size_t i = 0; i < 256; ++i) bytes[i] = static_cast<char>(i);  // every byte value
    std::vector<std::size_t> sizes;
    for (std::size_t n = 0; n <= 160; ++n) sizes.push_back(n);
    for (std::size_t slice_end : {48u * 1024, 2u * 48 * 1024, 3u * 48 * 1024})
        for (std::size_t n = slice_end - 30; n <= slice_end + 30; ++n) sizes.push_back(n);
    for (std::size_t n : sizes) {
        // At the start of the buffer and 5 bytes into it: loads that do not line up.
        for (std::size_t at : {0u, 5u}) {
            std::string_view in(bytes.data() + at, n);
            BOOST_TEST(encoded(in) == plain(in), "size " << n << " at " << at);
        }
    }
}

BOOST_AUTO_TEST_CASE(text_is_utf8_without_nul) {
    BOOST_TEST(is_text(""));
    BOOST_TEST(is_text("h\xC3\xA9llo\n\x1b[31mred\t"));
    BOOST_TEST(!is_text(std::string_view("a\0b", 3)));
    BOOST_TEST(!is_text("a\xFF"));
}

BOOST_AUTO_TEST_CASE(utf8_repair_replaces_each_bad_byte_and_flags_it) {
    bool lossy = false;
    BOOST_TEST(to_utf8_lossy("plain ✓", lossy) == "plain ✓");
    BOOST_TEST(!lossy);
    std::string bad = std::string("a\xC0\xAF") + "b" + "\xED\xA0\x80" + "\xF4\x90\x80\x80" + "\xE2\x82";
    std::string fixed = to_utf8_lossy(bad, lossy);
    BOOST_TEST(lossy);
    BOOST_TEST(is_valid_utf8(fixed));
    BOOST_TEST(fixed.substr(0, 1) == "a");
    BOOST_TEST(!is_valid_utf8(bad));
    std::string all;
    for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
    BOOST_TEST(is_valid_utf8(to_utf8_lossy(all, lossy)));
}

// The ASCII fast path reads 8 bytes at a time: a bad byte or a multi-byte character at any
// offset around those words is still found, and valid text is taken over without a copy.
BOOST_AUTO_TEST_CASE(utf8_repair_is_exact_at_every_offset_and_reuses_valid_text) {
    for (std::size_t pos = 0; pos < 40; ++pos) {
        std::string bad(40, 'x');
        bad[pos] = '\xFF';
        std::string expected = std::string(pos, 'x') + "\xEF\xBF\xBD" + std::string(39 - pos, 'x');
        bool lossy = false;
        BOOST_TEST(to_utf8_lossy(bad, lossy) == expected);
        BOOST_TEST(lossy);
        BOOST_TEST(!is_valid_utf8(bad));

        std::string good = std::string(pos, 'x') + "✓" + std::string(40 - pos, 'y');
        BOOST_TEST(is_valid_utf8(good));
        std::string truncated = good.substr(0, pos + 2);  // the check mark cut after 2 of 3 bytes
        BOOST_TEST(!is_valid_utf8(truncated));
    }
    std::string big(1 << 20, 'a');
    const char* data = big.data();
    bool lossy = false;
    make_utf8_lossy(big, lossy);
    BOOST_TEST(!lossy);
    BOOST_TEST(big.size() == std::size_t(1) << 20);
    BOOST_TEST(static_cast<const void*>(big.data()) == static_cast<const void*>(data));
    std::string repaired = "ok\xFF";
    make_utf8_lossy(repaired, lossy);
    BOOST_TEST(lossy);
    BOOST_TEST(repaired == "ok\xEF\xBF\xBD");
}

// Found by fuzzing: Boost.JSON 1.81 reads some decimals one unit in the last place off, so a
// value written exactly by json_writer read back as another double. read_json is exact.
BOOST_AUTO_TEST_CASE(read_json_converts_numbers_exactly) {
    auto r = read_json("[9.333333333333299e+59, 0.1, 2.5e-3, 1e308, -0.0]");
    BOOST_TEST_REQUIRE(r.value.has_value());
    const auto& a = r.value->as_array();
    BOOST_TEST(a[0].as_double() == 9.333333333333299e+59);
    BOOST_TEST(a[1].as_double() == 0.1);
    BOOST_TEST(to_json(*r.value) == "[9.333333333333299e+59,0.1,0.0025,1e+308,-0.0]");
    BOOST_TEST(*read_json(to_json(*r.value)).value == *r.value);
    auto ints = read_json("[18446744073709551615, -9223372036854775808, 7]");
    BOOST_TEST_REQUIRE(ints.value.has_value());
    BOOST_TEST(ints.value->as_array()[0].is_uint64());
    BOOST_TEST(ints.value->as_array()[1].is_int64());
    // What Boost.JSON accepts and JSON data here cannot hold, each with its offset.
    auto bad =
        read_json(R"({"a": 1, "a": 2, "big": 933333333333330000000000000000000000000013942795739375949140,)"
                  R"( "inf": 1e999, "s": "x\u0000y"})",
                  "doc");
    BOOST_TEST(!bad.value.has_value());
    std::vector<std::string> codes;
    for (const auto& f : bad.findings) codes.push_back(f.code);
    BOOST_TEST(
        (codes == std::vector<std::string>{"duplicate_key", "out_of_range", "out_of_range", "nul_byte"}));
    BOOST_TEST(bad.findings[0].offset == 9u);  // the second key's quote
    BOOST_TEST(bad.findings[0].message == "duplicate key `a` in doc");
    auto syntax = read_json("{\"a\": [1, }");
    BOOST_TEST(syntax.syntax.failed());
    BOOST_TEST(syntax.syntax_offset == 10u);
    BOOST_TEST(read_json("1 2").syntax.failed());
}

// Found by fuzzing: a message quoting 40 bytes of a scalar cut a character in two, and the
// diagnostic was no longer UTF-8 (the JSON writer needs it to be).
BOOST_AUTO_TEST_CASE(shortened_text_keeps_whole_characters) {
    const std::string text =
        "ab\xc3\xa9"
        "cd\xe2\x82\xac";  // "abécd€": 2 + 2 + 2 + 3 bytes
    BOOST_TEST(utf8_prefix(text, 100) == text);
    BOOST_TEST(utf8_prefix(text, 3) == "ab");
    BOOST_TEST(utf8_prefix(text, 4) == "ab\xc3\xa9");
    BOOST_TEST(utf8_prefix(text, 7) ==
               "ab\xc3\xa9"
               "cd");
    BOOST_TEST(utf8_prefix(text, 8) ==
               "ab\xc3\xa9"
               "cd");
    BOOST_TEST(utf8_prefix(text, 0) == "");
    auto r = parse_workflow(std::string(39, '7') +
                                "\xcb\xbf"
                                "5\n",
                            "wf.yaml");
    BOOST_TEST_REQUIRE(!r.diags.empty());
    BOOST_TEST(is_valid_utf8(r.diags.items()[0].message), r.diags.items()[0].message);
    // A file name is bytes: the diagnostic's JSON is still valid.
    diagnostic d;
    d.code = "file_unreadable";
    d.message = "cannot read caf\xe9";
    d.location.file = "caf\xe9";
    string_sink sink;
    {
        json_writer w(sink);
        write_diagnostic(w, d);
    }
    BOOST_TEST(is_valid_utf8(sink.text));
    BOOST_TEST(sink.text.find("caf\xef\xbf\xbd") != std::string::npos);
}
