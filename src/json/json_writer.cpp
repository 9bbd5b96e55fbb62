#include <agentctl/json.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <charconv>
#include <cmath>

namespace agentctl {

void json_writer::put(std::string_view s) {
    if (s.size() >= flush_at) {  // large pieces go straight through
        flush();
        sink_.write(s);
        return;
    }
    buffer_.append(s);
    if (buffer_.size() >= flush_at) flush();
}

void json_writer::flush() {
    if (buffer_.empty()) return;
    sink_.write(buffer_);
    buffer_.clear();
}

void json_writer::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!first_.empty()) {
        if (!first_.back()) put(',');
        first_.back() = 0;
    }
}

void json_writer::begin_object() {
    before_value();
    put('{');
    first_.push_back(1);
}

void json_writer::end_object() {
    first_.pop_back();
    put('}');
}

void json_writer::begin_array() {
    before_value();
    put('[');
    first_.push_back(1);
}

void json_writer::end_array() {
    first_.pop_back();
    put(']');
}

void json_writer::key(std::string_view k) {
    before_value();
    put_string(k);
    put(':');
    after_key_ = true;
}

void json_writer::string(std::string_view s) {
    before_value();
    put_string(s);
}

namespace {
inline bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }
}  // namespace

void json_writer::put_string(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    put('"');
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (!needs_escape(c)) continue;
        if (i > start) put(s.substr(start, i - start));
        start = i + 1;
        // Escapes go straight into the buffer: output full of control bytes (a binary
        // stream) is one escape per byte.
        switch (c) {
        case '"': buffer_.append("\\\""); break;
        case '\\': buffer_.append("\\\\"); break;
        case '\n': buffer_.append("\\n"); break;
        case '\r': buffer_.append("\\r"); break;
        case '\t': buffer_.append("\\t"); break;
        case '\b': buffer_.append("\\b"); break;
        case '\f': buffer_.append("\\f"); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buffer_.append(u, 6);
        }
        }
        if (buffer_.size() >= flush_at) flush();
    }
    put(s.substr(start));
    put('"');
}

void json_writer::boolean(bool b) {
    before_value();
    put(b ? "true" : "false");
}

void json_writer::number(std::int64_t n) {
    before_value();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, n);
    put(std::string_view(buf, r.ptr - buf));
}

void json_writer::number(std::uint64_t n) {
    before_value();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, n);
    put(std::string_view(buf, r.ptr - buf));
}

void json_writer::number(double d) {
    before_value();
    if (!std::isfinite(d)) {  // JSON has no NaN or infinity
        put("null");
        return;
    }
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    std::string_view text(buf, r.ptr - buf);
    put(text);
    // Keep a double visibly a double, so a round trip does not turn 1.0 into the integer 1.
    if (text.find_first_of(".e") == std::string_view::npos) put(".0");
}

void json_writer::null() {
    before_value();
    put("null");
}

void json_writer::value(const boost::json::value& v) {
    switch (v.kind()) {
    case boost::json::kind::null: null(); break;
    case boost::json::kind::bool_: boolean(v.get_bool()); break;
    case boost::json::kind::int64: number(v.get_int64()); break;
    case boost::json::kind::uint64: number(v.get_uint64()); break;
    case boost::json::kind::double_: number(v.get_double()); break;
    case boost::json::kind::string: {
        const auto& s = v.get_string();
        string(std::string_view(s.data(), s.size()));
        break;
    }
    case boost::json::kind::array:
        begin_array();
        for (const auto& e : v.get_array()) value(e);
        end_array();
        break;
    case boost::json::kind::object:
        begin_object();
        for (const auto& m : v.get_object()) {
            key(std::string_view(m.key().data(), m.key().size()));
            value(m.value());
        }
        end_object();
        break;
    }
}

void json_writer::raw_value(std::string_view json) {
    before_value();
    put(json);
}

void write_seconds(json_writer& w, std::int64_t ms) {
    if (ms % 1000 == 0) w.number(ms / 1000);
    else w.number(static_cast<double>(ms) / 1000.0);
}

std::string seconds_text(std::int64_t ms) {
    std::string text = std::to_string(ms / 1000);
    if (std::int64_t frac = ms % 1000) {
        char digits[4] = {char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10), 0};
        std::string f = digits;
        while (f.back() == '0') f.pop_back();
        text += "." + f;
    }
    return text + "s";
}

std::string to_json(const boost::json::value& v) {
    string_sink sink;
    {
        json_writer w(sink);
        w.value(v);
    }
    return std::move(sink.text);
}

}  // namespace agentctl
