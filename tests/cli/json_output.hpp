// Reading the CLI's JSON output in tests: a parse that fails the test with the text it got.
#pragma once

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

namespace cli_test {

inline boost::json::value parse_json(const std::string& text) {
    boost::json::error_code ec;
    boost::json::value v = boost::json::parse(text, ec);
    BOOST_REQUIRE_MESSAGE(!ec, "not JSON: " << text);
    return v;
}

}  // namespace cli_test
