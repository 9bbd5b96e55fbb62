// GNU parallel's replacement strings and quoting: parsing a command into a template, filling
// it in for a job exactly as parallel does, and reading the result as a shell would read a
// simple command (docs/PARALLEL.md, "Replacement strings").
#include "parallel/parallel_detail.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace agentctl {

using piece = parallel_template::piece;

std::string parallel_shell_quote(std::string_view word) {
    // parallel's shell_quote_scalar_default: safe characters stay as they are.
    bool safe = std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("-_.+/").find(c) != std::string_view::npos;
    });
    if (word.empty()) return "''";
    if (safe) return std::string(word);
    std::string out = "'";
    for (char c : word) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
    out += "'";
    // "Remove unneeded '' at ends", as parallel does.
    if (out.compare(0, 2, "''") == 0) out.erase(0, 2);
    if (out.size() >= 2 && out.compare(out.size() - 2, 2, "''") == 0) out.erase(out.size() - 2);
    return out;
}

namespace parallel_detail {

// `s:\.[^/.]*$::`: the last dot and what follows, when no slash follows it.
std::string without_extension(std::string_view s) {
    auto dot = s.rfind('.');
    if (dot == std::string_view::npos || s.find('/', dot) != std::string_view::npos) return std::string(s);
    return std::string(s.substr(0, dot));
}

// `s:.*/::` with Perl's `.`, which does not match a newline: the first line that holds a
// slash loses everything up to its last slash.
std::string basename_of(std::string_view s) {
    std::size_t line = 0;
    while (line <= s.size()) {
        std::size_t end = s.find('\n', line);
        if (end == std::string_view::npos) end = s.size();
        std::string_view text = s.substr(line, end - line);
        auto slash = text.rfind('/');
        if (slash != std::string_view::npos)
            return std::string(s.substr(0, line)) + std::string(s.substr(line + slash + 1));
        line = end + 1;
    }
    return std::string(s);
}

// Perl's File::Basename::dirname on Unix.
std::string dirname_of(std::string_view path) {
    auto parse = [](std::string_view p) {
        auto slash = p.rfind('/');
        std::string dir = slash == std::string_view::npos ? "./" : std::string(p.substr(0, slash + 1));
        std::string base =
            slash == std::string_view::npos ? std::string(p) : std::string(p.substr(slash + 1));
        return std::pair{dir, base};
    };
    // `s{(.)/*\z}{$1}s`: trailing slashes go, the first character stays.
    auto strip = [](std::string d) {
        while (d.size() > 1 && d.back() == '/') d.pop_back();
        return d;
    };
    auto [dir, base] = parse(path);
    dir = strip(dir);
    if (base.empty()) dir = strip(parse(dir).first);
    return dir;
}

std::string transformed(std::string_view value, piece::transform_t t) {
    switch (t) {
        case piece::transform_t::none:
            return std::string(value);
        case piece::transform_t::noext:
            return without_extension(value);
        case piece::transform_t::basename:
            return basename_of(value);
        case piece::transform_t::dirname:
            return dirname_of(value);
        case piece::transform_t::basename_noext:
            return without_extension(basename_of(value));
    }
    return std::string(value);
}

namespace {

// `{}` `{.}` `{/}` `{//}` `{/.}` after the position (or the header name), or nothing.
std::optional<piece::transform_t> transform_named(std::string_view suffix) {
    if (suffix.empty()) return piece::transform_t::none;
    if (suffix == ".") return piece::transform_t::noext;
    if (suffix == "/") return piece::transform_t::basename;
    if (suffix == "//") return piece::transform_t::dirname;
    if (suffix == "/.") return piece::transform_t::basename_noext;
    return std::nullopt;
}

// What is between `{` and `}`, as a replacement string, or nothing when it is not one (then
// the braces are text, as in parallel).
std::optional<piece> replacement(std::string_view inside, const std::vector<std::string>& names) {
    piece p;
    p.kind = piece::kind_t::value;
    if (inside == "#") {
        p.kind = piece::kind_t::seq;
        return p;
    }
    if (inside == "%") {
        p.kind = piece::kind_t::slot;
        return p;
    }
    if (auto t = transform_named(inside)) {
        p.transform = *t;
        return p;
    }
    std::size_t i = inside.front() == '-' ? 1 : 0;
    std::size_t digits = i;
    while (digits < inside.size() && inside[digits] >= '0' && inside[digits] <= '9') ++digits;
    if (digits > i) {
        auto t = transform_named(inside.substr(digits));
        int n = 0;
        auto [at, ec] = std::from_chars(inside.data() + i, inside.data() + digits, n);
        if (!t || ec != std::errc() || at != inside.data() + digits || n == 0) return std::nullopt;
        p.position = i ? -n : n;
        p.transform = *t;
        return p;
    }
    // --header: `{name}` and `{name.}` ... stand for that name's position.
    for (std::size_t k = 0; k < names.size(); ++k) {
        std::string_view name = names[k];
        if (inside.substr(0, name.size()) != name) continue;
        if (auto t = transform_named(inside.substr(name.size()))) {
            p.position = static_cast<int>(k) + 1;
            p.transform = *t;
            return p;
        }
    }
    return std::nullopt;
}

}  // namespace

std::vector<piece> parse_pieces(std::string_view text, bool quoted, const std::vector<std::string>& names,
                                std::string& error) {
    std::vector<piece> out;
    auto add_text = [&](std::string_view t) {
        if (t.empty()) return;
        if (out.empty() || out.back().kind != piece::kind_t::text) out.push_back({});
        out.back().text += t;
    };
    std::size_t at = 0;
    while (at < text.size()) {
        auto open = text.find('{', at);
        if (open == std::string_view::npos) break;
        if (text.substr(open, 2) == "{=") {
            error =
                "`{= ... =}` (a Perl expression) is not supported: agentctl runs no Perl; compute the value "
                "beforehand (for example with sed or awk into the input), or use --shell and the shell's own "
                "expansions";
            return {};
        }
        auto close = text.find('}', open + 1);
        if (close == std::string_view::npos) break;
        std::string_view inside = text.substr(open + 1, close - open - 1);
        // The innermost brace pair: `{{}}` holds `{}`.
        auto inner_open = inside.rfind('{');
        if (inner_open != std::string_view::npos) {
            add_text(text.substr(at, open + 1 + inner_open - at));
            at = open + 1 + inner_open;
            continue;
        }
        auto r = inside.empty() ? std::optional<piece>(piece{piece::kind_t::value, "", 0})
                                : replacement(inside, names);
        if (!r) {
            add_text(text.substr(at, close + 1 - at));
            at = close + 1;
            continue;
        }
        add_text(text.substr(at, open - at));
        r->quoted = quoted && r->kind == piece::kind_t::value;
        out.push_back(*r);
        at = close + 1;
    }
    add_text(text.substr(at));
    return out;
}

}  // namespace parallel_detail

namespace {

// A position's value, transformed; nothing when the job has no such position.
std::optional<std::string> value_at(const parallel_job& job, int position, piece::transform_t t) {
    const int n = static_cast<int>(job.args.size());
    int index = position > 0 ? position - 1 : n + position;
    if (index < 0 || index >= n) return std::nullopt;
    return parallel_detail::transformed(job.args[static_cast<std::size_t>(index)], t);
}

void fill_piece(const piece& p, const parallel_job& job, std::string_view slot, std::string& out) {
    switch (p.kind) {
        case piece::kind_t::text:
            out += p.text;
            return;
        case piece::kind_t::seq:
            out += std::to_string(job.seq);
            return;
        case piece::kind_t::slot:
            out += slot;
            return;
        case piece::kind_t::value:
            break;
    }
    auto one = [&](const std::optional<std::string>& v) {
        // A position the job lacks is nothing at all, not a quoted empty string.
        if (v) out += p.quoted ? parallel_shell_quote(*v) : *v;
    };
    if (p.position != 0) return one(value_at(job, p.position, p.transform));
    for (std::size_t k = 0; k < job.args.size(); ++k) {
        if (k) out += ' ';
        one(parallel_detail::transformed(job.args[k], p.transform));
    }
}

}  // namespace

namespace parallel_detail {

std::string fill_template(const parallel_template& t, const parallel_job& job, std::string_view slot) {
    std::string out;
    for (std::size_t w = 0; w < t.words.size(); ++w) {
        if (w) out += ' ';
        if (!t.quote_words) {
            for (const auto& p : t.words[w]) fill_piece(p, job, slot, out);
            continue;
        }
        std::string word;
        for (const auto& p : t.words[w]) fill_piece(p, job, slot, word);
        out += parallel_shell_quote(word);
    }
    return out;
}

std::optional<std::vector<std::string>> shell_words(std::string_view line, std::string& error) {
    // What makes the line more than a simple command: the shell would do something with it.
    auto needs_shell = [&](std::string_view what) {
        error = "the command uses the shell (" + std::string(what) +
                "): add --shell to run each command line through sh -c, as GNU parallel does";
        return std::nullopt;
    };
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    enum { plain, single, dbl } state = plain;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (state == single) {
            if (c == '\'')
                state = plain;
            else
                word += c;
            continue;
        }
        if (state == dbl) {
            if (c == '"') {
                state = plain;
            } else if (c == '\\' && i + 1 < line.size() &&
                       std::string_view("$`\"\\\n").find(line[i + 1]) != std::string_view::npos) {
                if (line[i + 1] != '\n') word += line[i + 1];
                ++i;
            } else if (c == '$' || c == '`') {
                return needs_shell(std::string("`") + c + "` inside double quotes");
            } else {
                word += c;
            }
            continue;
        }
        switch (c) {
            case ' ':
            case '\t':
            case '\n':
                if (in_word) words.push_back(std::move(word));
                word.clear();
                in_word = false;
                continue;
            case '\'':
                state = single;
                in_word = true;
                continue;
            case '"':
                state = dbl;
                in_word = true;
                continue;
            case '\\':
                if (i + 1 < line.size() && line[i + 1] != '\n') {
                    word += line[i + 1];
                    in_word = true;
                }
                ++i;
                continue;
            default:
                break;
        }
        if (std::string_view("|&;<>()$`*?[").find(c) != std::string_view::npos)
            return needs_shell(std::string("`") + c + "`");
        if (!in_word && (c == '#' || c == '~'))
            return needs_shell(std::string("`") + c + "` at a word's start");
        if (c == '=' && words.empty() && !word.empty() && std::all_of(word.begin(), word.end(), [](char n) {
                return std::isalnum(static_cast<unsigned char>(n)) || n == '_';
            }))
            return needs_shell("a variable assignment before the command");
        word += c;
        in_word = true;
    }
    if (state != plain) {
        error = "the command has an unterminated quote";
        return std::nullopt;
    }
    if (in_word) words.push_back(std::move(word));
    static const std::vector<std::string_view> reserved = {"!",     "{",  "}",    "if",   "then", "else",
                                                           "elif",  "fi", "case", "esac", "for",  "while",
                                                           "until", "do", "done", "in",   "[[",   "function"};
    if (!words.empty() && std::find(reserved.begin(), reserved.end(), words.front()) != reserved.end())
        return needs_shell("`" + words.front() + "` is a shell keyword");
    return words;
}

}  // namespace parallel_detail

std::string parallel_template::fill(const parallel_job& job, std::uint32_t slot) const {
    return parallel_detail::fill_template(*this, job, std::to_string(slot));
}

bool parallel_template::uses(piece::kind_t kind) const {
    for (const auto& w : words)
        for (const auto& p : w)
            if (p.kind == kind) return true;
    return false;
}

}  // namespace agentctl
