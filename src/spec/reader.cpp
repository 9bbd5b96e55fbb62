#include "spec/reader.hpp"

#include <agentctl/json.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace agentctl {
namespace {

using kind_t = yaml::node::kind_t;

bool is_ascii_digit(char c) {
    return c >= '0' && c <= '9';
}

// Consumes [0-9]+ from `s` at `i`; false when there is none.
bool digits(std::string_view s, std::size_t& i) {
    std::size_t start = i;
    while (i < s.size() && is_ascii_digit(s[i])) ++i;
    return i > start;
}

bool is_integer_text(std::string_view s) {
    std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    return digits(s, i) && i == s.size();
}

// [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  and .inf / .nan
bool is_float_text(std::string_view s) {
    std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    std::string_view rest = s.substr(i);
    if (rest == ".inf" || rest == ".Inf" || rest == ".INF") return true;
    if (i == 0 && (s == ".nan" || s == ".NaN" || s == ".NAN")) return true;
    if (i < s.size() && s[i] == '.') {
        ++i;
        if (!digits(s, i)) return false;
    } else {
        if (!digits(s, i)) return false;
        if (i < s.size() && s[i] == '.') {
            ++i;
            digits(s, i);
        }
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
        if (!digits(s, i)) return false;
    }
    return i == s.size();
}

std::string_view type_name(scalar_type t) {
    switch (t) {
        case scalar_type::null:
            return "null";
        case scalar_type::boolean:
            return "boolean";
        case scalar_type::integer:
            return "integer";
        case scalar_type::floating:
            return "number";
        case scalar_type::string:
            return "string";
    }
    return "string";
}

// The last component of a dotted path, to name a field in a message.
std::string_view label(std::string_view path) {
    if (path.empty()) return "document";
    auto dot = path.rfind('.');
    return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::string quoted_excerpt(std::string_view text) {
    constexpr std::size_t max_shown = 40;
    std::string out = "\"";
    out += utf8_prefix(text, max_shown);
    if (text.size() > max_shown) out += "...";
    out += '"';
    return out;
}

std::string join(std::initializer_list<std::string_view> names) {
    std::string out;
    for (auto n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

std::string suggestion(std::string_view word, std::initializer_list<std::string_view> names) {
    std::string near = nearest(word, std::vector<std::string_view>(names));
    // A shortened key ("timout" for "timeoutSeconds") is far from the whole name but near
    // its start of the same length.
    constexpr std::size_t min_prefix = 4;
    if (near.empty() && word.size() >= min_prefix) {
        std::vector<std::string_view> starts;
        for (auto n : names) starts.push_back(n.substr(0, word.size()));
        std::string start = nearest(word, starts);
        for (auto n : names)
            if (!start.empty() && n.substr(0, word.size()) == start) {
                near = n;
                break;
            }
    }
    return near.empty() ? std::string() : "did you mean \"" + near + "\"?";
}

// Parses an optionally signed decimal integer; false when it does not fit in T.
template <class T>
bool parse_decimal(std::string_view s, T& out) {
    if (!s.empty() && s[0] == '+') s.remove_prefix(1);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

scalar_type resolve_plain(std::string_view text) {
    if (text.empty()) return scalar_type::null;
    switch (text[0]) {
        case '~':
        case 'n':
        case 'N':
            if (text == "~" || text == "null" || text == "Null" || text == "NULL") return scalar_type::null;
            return scalar_type::string;
        case 't':
        case 'f':
            if (text == "true" || text == "false") return scalar_type::boolean;
            return scalar_type::string;
        default:
            if (!is_ascii_digit(text[0]) && text[0] != '-' && text[0] != '+' && text[0] != '.')
                return scalar_type::string;
            if (is_integer_text(text)) return scalar_type::integer;
            if (is_float_text(text)) return scalar_type::floating;
            return scalar_type::string;
    }
}

place tree_reader::root() const {
    const auto& n = tree_.nodes[tree_.root];
    if (locations_) locations_->set("", n.line, n.column);
    return {tree_.root, "", n.line, n.column};
}

const yaml::node& tree_reader::node(const place& p) {
    const yaml::node& raw = tree_.nodes[p.node];
    std::uint32_t index = raw.kind == kind_t::alias ? raw.target : p.node;
    const yaml::node& n = tree_.nodes[index];
    // Reported once per tagged node, however often it is read.
    if (n.bad_tag && std::find(reported_tags_.begin(), reported_tags_.end(), index) == reported_tags_.end()) {
        reported_tags_.push_back(index);
        std::string tag(tree_.tag_of(index));
        constexpr std::string_view core = "tag:yaml.org,2002:";
        if (tag.rfind(core, 0) == 0) tag = "!!" + tag.substr(core.size());
        error(p, "invalid_type", "the tag " + tag + " is not supported",
              "remove the tag; quote the value to make it a string");
    }
    return n;
}

std::optional<std::string> tree_reader::peek(const place& p, std::string_view key) const {
    const auto& n = tree_.resolve(p.node);
    if (n.kind != kind_t::mapping) return std::nullopt;
    for (std::size_t i = 0; i + 1 < n.items.size(); i += 2) {
        const auto& k = tree_.resolve(n.items[i]);
        if (k.kind != kind_t::scalar || k.text != key) continue;
        const auto& v = tree_.resolve(n.items[i + 1]);
        if (v.kind == kind_t::scalar) return v.text;
        return std::nullopt;
    }
    return std::nullopt;
}

std::string tree_reader::describe(const place& p) {
    const auto& n = tree_.resolve(p.node);
    switch (n.kind) {
        case kind_t::null:
            return "null";
        case kind_t::sequence:
            return "a sequence";
        case kind_t::mapping:
            return "a mapping";
        case kind_t::scalar:
        case kind_t::alias:
            break;
    }
    auto type = n.plain ? resolve_plain(n.text) : scalar_type::string;
    return std::string(type_name(type)) + " " +
           (type == scalar_type::string ? quoted_excerpt(n.text) : n.text);
}

void tree_reader::error(const place& p, std::string code, std::string message, std::string help) {
    diags_.error(std::move(code), p.path, std::move(message), std::move(help), {file_, p.line, p.column});
}

void tree_reader::error_at(const place& p, std::string_view sub, std::string code, std::string message,
                           std::string help) {
    std::string path = p.path.empty() ? std::string(sub) : p.path + "." + std::string(sub);
    diags_.error(std::move(code), std::move(path), std::move(message), std::move(help),
                 {file_, p.line, p.column});
}

place tree_reader::child(const place& parent, std::string_view key, const yaml::node& key_node) {
    place p;
    p.path.reserve(parent.path.size() + 1 + key.size());
    if (!parent.path.empty()) {
        p.path = parent.path;
        p.path += '.';
    }
    p.path += key;
    p.line = key_node.line;
    p.column = key_node.column;
    if (locations_) locations_->set(p.path, p.line, p.column);
    return p;
}

place tree_reader::item(const place& parent, std::size_t index, std::uint32_t node_index) {
    const auto& n = tree_.nodes[node_index];
    char digits_buf[24];
    auto end = std::to_chars(digits_buf, digits_buf + sizeof digits_buf, index).ptr;
    place p{node_index, {}, n.line, n.column};
    p.path.reserve(parent.path.size() + 2 + static_cast<std::size_t>(end - digits_buf));
    p.path = parent.path;
    p.path += '[';
    p.path.append(digits_buf, end);
    p.path += ']';
    if (locations_) locations_->set(p.path, p.line, p.column);
    return p;
}

std::optional<std::string> tree_reader::scalar_text(const place& p, std::string_view expected) {
    const auto& n = node(p);
    if (n.kind != kind_t::scalar) {
        error(p, "invalid_type",
              std::string(label(p.path)) + " must be " + std::string(expected) + ", found " + describe(p));
        return std::nullopt;
    }
    if (!n.plain) {
        if (n.text.find('\0') != std::string::npos) {
            error(p, "nul_byte", std::string(label(p.path)) + " contains a NUL byte",
                  "NUL cannot be passed to a process; remove it");
            return std::nullopt;
        }
        if (!is_valid_utf8(n.text)) {
            error(p, "invalid_value", std::string(label(p.path)) + " is not valid UTF-8 once unescaped",
                  "check the escape sequences");
            return std::nullopt;
        }
    }
    return n.text;
}

std::optional<std::string> tree_reader::string(const place& p, bool allow_empty) {
    const auto& n = node(p);
    // A plain `true`, `8080` or `1.5` where a string is expected is that text, as the reference
    // reads it (`processAllowlist: [true]` names the executable `true`); only null is refused.
    if (n.kind == kind_t::scalar && n.plain && resolve_plain(n.text) == scalar_type::null) {
        error(p, "invalid_type", std::string(label(p.path)) + " must be a string, found " + describe(p),
              n.text.empty() ? "write a value" : "quote it: \"" + n.text + "\"");
        return std::nullopt;
    }
    auto text = scalar_text(p, "a string");
    if (text && text->empty() && !allow_empty) {
        error(p, "empty_value", std::string(label(p.path)) + " must not be empty");
        return std::nullopt;
    }
    return text;
}

std::optional<bool> tree_reader::boolean(const place& p) {
    const auto& n = node(p);
    if (n.kind == kind_t::scalar && n.plain && !n.bad_tag && resolve_plain(n.text) == scalar_type::boolean)
        return n.text == "true";
    error(p, "invalid_type", std::string(label(p.path)) + " must be true or false, found " + describe(p),
          n.kind == kind_t::scalar && !n.plain ? "remove the quotes: a quoted value is a string" : "");
    return std::nullopt;
}

std::optional<std::int64_t> tree_reader::integer(const place& p, std::int64_t min, std::int64_t max) {
    auto range = "in " + std::to_string(min) + ".." + std::to_string(max);
    const auto& n = node(p);
    if (n.kind != kind_t::scalar || !n.plain || resolve_plain(n.text) != scalar_type::integer) {
        std::string help;
        if (n.kind == kind_t::scalar && !n.plain && is_integer_text(n.text)) {
            help = "remove the quotes: a quoted value is a string";
        } else if (n.kind == kind_t::scalar && n.plain && resolve_plain(n.text) == scalar_type::floating) {
            help = "use a whole number " + range;
        } else {
            help = "write a decimal integer " + range;
        }
        error(p, "invalid_type", std::string(label(p.path)) + " must be an integer, found " + describe(p),
              help);
        return std::nullopt;
    }
    std::int64_t value = 0;
    if (!parse_decimal(n.text, value) || value < min || value > max) {
        error(p, "out_of_range", std::string(label(p.path)) + " must be " + range + ", found " + n.text);
        return std::nullopt;
    }
    return value;
}

std::optional<std::int64_t> tree_reader::duration_ms(const place& p, std::int64_t min_ms,
                                                     std::int64_t max_ms) {
    auto as_seconds = [](std::int64_t ms) { return seconds_text(ms).substr(0, seconds_text(ms).size() - 1); };
    auto range = "in " + as_seconds(min_ms) + ".." + as_seconds(max_ms) + " seconds";
    const auto& n = node(p);
    scalar_type type = n.kind == kind_t::scalar && n.plain ? resolve_plain(n.text) : scalar_type::string;
    if (type != scalar_type::integer && type != scalar_type::floating) {
        std::string help = n.kind == kind_t::scalar && !n.plain && is_integer_text(n.text)
                               ? "remove the quotes: a quoted value is a string"
                               : "write a number of seconds " + range + ", e.g. 10 or 0.5";
        error(p, "invalid_type",
              std::string(label(p.path)) + " must be a number of seconds, found " + describe(p), help);
        return std::nullopt;
    }
    // Digits, then at most three decimals: milliseconds are exact, no float rounding.
    std::string_view text = n.text;
    std::int64_t whole = 0, frac = 0;
    int frac_digits = 0;
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    bool ok = !text.empty() && text[0] != '-';
    std::size_t i = 0;
    for (; ok && i < text.size() && text[i] != '.'; ++i) {
        ok = std::isdigit(static_cast<unsigned char>(text[i])) && whole < 1000000000000ll;
        whole = whole * 10 + (text[i] - '0');
    }
    if (ok && i < text.size()) {
        for (++i; ok && i < text.size(); ++i) {
            ok = std::isdigit(static_cast<unsigned char>(text[i])) && frac_digits < 3;
            frac = frac * 10 + (text[i] - '0');
            ++frac_digits;
        }
    }
    for (int d = frac_digits; d < 3; ++d) frac *= 10;
    std::int64_t ms = whole * 1000 + frac;
    if (!ok || ms < min_ms || ms > max_ms) {
        std::string help = ok ? "" : "use plain decimal notation with at most three decimals (milliseconds)";
        error(p, "out_of_range", std::string(label(p.path)) + " must be " + range + ", found " + n.text,
              help);
        return std::nullopt;
    }
    return ms;
}

std::optional<std::uint64_t> tree_reader::unsigned_integer(const place& p, std::uint64_t min,
                                                           std::uint64_t max) {
    auto range = max == std::numeric_limits<std::uint64_t>::max()
                     ? "at least " + std::to_string(min)
                     : "in " + std::to_string(min) + ".." + std::to_string(max);
    const auto& n = node(p);
    if (n.kind != kind_t::scalar || !n.plain || resolve_plain(n.text) != scalar_type::integer) {
        std::string help = n.kind == kind_t::scalar && !n.plain && is_integer_text(n.text)
                               ? "remove the quotes: a quoted value is a string"
                               : "write a decimal integer " + range;
        error(p, "invalid_type", std::string(label(p.path)) + " must be an integer, found " + describe(p),
              help);
        return std::nullopt;
    }
    std::uint64_t value = 0;
    if (n.text[0] == '-' || !parse_decimal(n.text, value) || value < min || value > max) {
        error(p, "out_of_range", std::string(label(p.path)) + " must be " + range + ", found " + n.text);
        return std::nullopt;
    }
    return value;
}

std::optional<std::size_t> tree_reader::choice(const place& p,
                                               std::initializer_list<std::string_view> names) {
    auto text = string(p);
    if (!text) return std::nullopt;
    std::size_t i = 0;
    for (auto name : names) {
        if (*text == name) return i;
        ++i;
    }
    error(p, "invalid_value",
          std::string(label(p.path)) + " must be one of: " + join(names) + "; found " + quoted_excerpt(*text),
          suggestion(*text, names));
    return std::nullopt;
}

std::optional<std::vector<place>> tree_reader::sequence(const place& p) {
    const auto& n = node(p);
    if (n.kind == kind_t::null) return std::vector<place>{};
    if (n.kind != kind_t::sequence) {
        error(p, "invalid_type", std::string(label(p.path)) + " must be a sequence, found " + describe(p));
        return std::nullopt;
    }
    std::vector<place> out;
    out.reserve(n.items.size());
    for (std::size_t i = 0; i < n.items.size(); ++i) out.push_back(item(p, i, n.items[i]));
    return out;
}

std::vector<std::string> tree_reader::string_list(const place& p, bool allow_empty_items,
                                                  const item_check& keep) {
    std::vector<std::string> out;
    if (auto items = sequence(p)) {
        out.reserve(items->size());
        for (const auto& i : *items)
            if (auto s = string(i, allow_empty_items); s && (!keep || keep(i, *s)))
                out.push_back(std::move(*s));
    }
    return out;
}

std::optional<std::string> tree_reader::key_text(const place& key_place) {
    const auto& n = tree_.resolve(key_place.node);
    if (n.kind != kind_t::scalar) {
        error(key_place, "invalid_type", "a mapping key must be a string, found " + describe(key_place));
        return std::nullopt;
    }
    return scalar_text(key_place, "a string");
}

std::optional<std::vector<std::pair<std::string, place>>> tree_reader::entries(
    const place& p, std::string_view duplicate_code) {
    const auto& n = node(p);
    std::vector<std::pair<std::string, place>> out;
    if (n.kind == kind_t::null) return out;
    if (n.kind != kind_t::mapping) {
        error(p, "invalid_type", std::string(label(p.path)) + " must be a mapping, found " + describe(p));
        return std::nullopt;
    }
    // Small mappings are searched directly; large ones (inputs, generated data) use a set.
    constexpr std::size_t linear_limit = 16;
    std::unordered_set<std::string_view> seen;
    bool use_set = n.items.size() / 2 > linear_limit;
    if (use_set) seen.reserve(n.items.size() / 2);
    out.reserve(n.items.size() / 2);
    for (std::size_t i = 0; i + 1 < n.items.size(); i += 2) {
        const auto& key_node = tree_.nodes[n.items[i]];
        std::optional<std::string> key;
        if (key_node.kind == kind_t::scalar && key_node.plain && !key_node.bad_tag) {
            key = key_node.text;  // the common case, which cannot fail: no place to build
        } else {
            key = key_text(place{n.items[i], p.path, key_node.line, key_node.column});
            if (!key) continue;
        }
        bool duplicate =
            use_set ? !seen.insert(tree_.resolve(n.items[i]).text).second
                    : std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.first == *key; });
        if (duplicate) {
            // Not recorded in the source map: the path keeps the first key's location.
            place key_place{n.items[i], p.path.empty() ? *key : p.path + "." + *key, key_node.line,
                            key_node.column};
            error(key_place, std::string(duplicate_code),
                  "duplicate key " + quoted_excerpt(*key) + " in " + std::string(label(p.path)),
                  "each key may appear once; remove or rename one");
            continue;
        }
        place value = child(p, *key, key_node);
        value.node = n.items[i + 1];
        out.emplace_back(std::move(*key), std::move(value));
    }
    return out;
}

boost::json::value tree_reader::json(const place& p) {
    const auto& n = node(p);
    switch (n.kind) {
        case kind_t::null:
        case kind_t::alias:
            return nullptr;
        case kind_t::sequence: {
            boost::json::array array;
            array.reserve(n.items.size());
            for (std::size_t i = 0; i < n.items.size(); ++i) array.push_back(json(item(p, i, n.items[i])));
            return array;
        }
        case kind_t::mapping:
            return json_object(p);
        case kind_t::scalar:
            break;
    }
    if (!n.plain) {
        auto text = scalar_text(p, "a string");
        return text ? boost::json::value(*text) : boost::json::value(nullptr);
    }
    switch (resolve_plain(n.text)) {
        case scalar_type::null:
            return nullptr;
        case scalar_type::boolean:
            return n.text == "true";
        case scalar_type::integer: {
            std::int64_t i = 0;
            if (parse_decimal(n.text, i)) return i;
            std::uint64_t u = 0;
            if (parse_decimal(n.text, u)) return u;
            error(p, "out_of_range",
                  std::string(label(p.path)) + " does not fit in a 64-bit integer: " + n.text,
                  "quote it to keep it as a string");
            return nullptr;
        }
        case scalar_type::floating: {
            double d = 0;
            std::string_view s = n.text;
            if (!s.empty() && s[0] == '+') s.remove_prefix(1);
            auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
            if (ec == std::errc::result_out_of_range) {
                error(p, "out_of_range", std::string(label(p.path)) + " does not fit in a double: " + n.text,
                      "quote it to keep it as a string");
                return nullptr;
            }
            if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(d)) {
                error(p, "invalid_value", std::string(label(p.path)) + " is not a finite number: " + n.text,
                      "JSON has no infinities or NaN; quote it to keep it as a string");
                return nullptr;
            }
            return d;
        }
        case scalar_type::string:
            return boost::json::value(n.text);
    }
    return nullptr;
}

boost::json::object tree_reader::json_object(const place& p) {
    boost::json::object object;
    if (auto list = entries(p)) {
        object.reserve(list->size());
        for (auto& [key, value] : *list) object.emplace(key, json(value));
    }
    return object;
}

fields::fields(tree_reader& r, const place& mapping, std::initializer_list<std::string_view> known)
    : reader_(r), where_(mapping) {
    auto list = r.entries(mapping);
    if (!list) return;
    ok_ = true;
    entries_.reserve(list->size());
    for (auto& entry : *list) {
        if (std::find(known.begin(), known.end(), entry.first) == known.end()) {
            auto help = suggestion(entry.first, known);
            bool has_needs = std::find(known.begin(), known.end(), "needs") != known.end();
            if (has_needs && (entry.first == "dependsOn" || entry.first == "depends_on"))
                help = "dependencies are listed in needs: [task ids]";
            if (help.empty()) help = "valid keys here: " + join(known);
            r.error(entry.second, "unknown_key",
                    "unknown key " + quoted_excerpt(entry.first) + " in " + std::string(label(mapping.path)),
                    help);
            continue;
        }
        entries_.push_back(std::move(entry));
    }
}

std::optional<place> fields::get(std::string_view key) const {
    for (const auto& [k, p] : entries_)
        if (k == key) return p;
    return std::nullopt;
}

std::optional<place> fields::require(std::string_view key) {
    auto p = get(key);
    if (!p && ok_)
        reader_.error_at(
            where_, key, "missing_field",
            "missing required field " + quoted_excerpt(key) + " in " + std::string(label(where_.path)));
    return p;
}

}  // namespace agentctl
