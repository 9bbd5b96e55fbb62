// What compiling a JSON Schema (schema.cpp) and applying it (schema_validate.cpp) share: the
// compiled schema and valijson's configuration. Two files, so that no one file instantiates
// both valijson's parser and its validator (docs/TESTING.md, "Build cost").
#pragma once

// valijson reports a bad schema by exception; set alike wherever valijson is included.
#define VALIJSON_USE_EXCEPTIONS 1

#include "plan/schema.hpp"

#include <valijson/schema.hpp>

#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace agentctl {

struct json_schema::impl {
    valijson::Schema schema;
    /// `pattern` regexes by source text, compiled with the polynomial executor. valijson adds
    /// what it does not find here (nothing, since every `pattern` string is compiled).
    mutable std::unordered_map<std::string, std::regex> regexes;
    bool pattern_properties = false;  ///< the schema has `patternProperties`
    bool date_formats = false;        ///< the schema has `format` date, time or date-time
};

namespace detail {

/// `key` as one token of a JSON pointer (RFC 6901): "~" -> "~0", "/" -> "~1".
std::string pointer_token(std::string_view key);

}  // namespace detail
}  // namespace agentctl
