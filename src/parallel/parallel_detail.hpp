// What the parts of the `agentctl parallel` translation share (include/agentctl/parallel.hpp).
#pragma once

#include <agentctl/parallel.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::parallel_detail {

/// `{.}` `{/}` `{//}` `{/.}` of one value, as parallel computes them.
std::string transformed(std::string_view value, parallel_template::piece::transform_t t);

/// The replacement strings of `text` (`{}`, `{2.}`, `{#}`, `{%}`, `{name}` with --header
/// `names`); every other brace is text. `quoted`: values are inserted shell-quoted. Empty
/// with `error` at `{= =}`.
std::vector<parallel_template::piece> parse_pieces(std::string_view text, bool quoted,
                                                   const std::vector<std::string>& names, std::string& error);

/// The template filled in for `job`, `slot` standing for `{%}`.
std::string fill_template(const parallel_template& t, const parallel_job& job, std::string_view slot);

/// The words a POSIX shell reads in `line` when it is a simple command (quotes, backslashes,
/// blanks); nothing with `error` when the shell would do more with it (a redirection, a pipe,
/// a variable, a glob, a keyword...), saying to use --shell.
std::optional<std::vector<std::string>> shell_words(std::string_view line, std::string& error);

}  // namespace agentctl::parallel_detail
