// The front end's fuzz targets, shared by the libFuzzer programs in fuzz/ and by the
// regression test that replays every input fuzzing ever crashed on (tests/frontend/fuzz).
//
// Each target feeds one input to one part of the front end and checks what must hold for any
// input; it returns "" or what did not hold. Crashes, hangs and sanitizer reports are found by
// the fuzzer itself.
#pragma once

#include <string>
#include <string_view>

namespace agentctl::fuzz {

/// The fast path for plain YAML reads what yaml-cpp reads; parse_workflow + check_document;
/// for a valid plan, its JSON and text, compiled twice (the same bytes), the JSON parses back.
/// The bytes as an inputs file (JSON and YAML) and as an items file (lines and NUL-separated,
/// in one piece and in two).
std::string workflow(std::string_view data);

/// The template language: parse_template, render_text and render against fixed inputs and
/// bindings, parse_condition and evaluate.
std::string templates(std::string_view data);

/// UTF-8 repair and the JSON writer: repaired text is valid UTF-8 and unchanged when it was
/// valid; a string written by json_writer parses back to itself; a JSON document read by
/// Boost.JSON and written by json_writer parses back to the same value.
std::string json(std::string_view data);

}  // namespace agentctl::fuzz
