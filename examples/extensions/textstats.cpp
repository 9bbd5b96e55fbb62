// agentctl-textstats: a sample extension.process program (protocol
// agentctl.dev/process-extension/v1). It counts the words, lines and bytes of a text and
// names its longest word.
//
//   agentctl-textstats [OPTIONS] --agentctl-handshake   print what it is (one JSON object)
//   agentctl-textstats [OPTIONS] --agentctl-invoke      read {protocolVersion, effectId, input}
//                                                       on stdin, print {protocolVersion,
//                                                       effectId, output}
//
// The protocol flag is the last argument; the action's own args come before it. Options
// that exist for agentctl's tests (an extension that misbehaves on purpose):
//
//   --marker-dir DIR    write DIR/handshake or DIR/invoke when that mode starts, and the
//                       request's effectId to DIR/effect-id
//   --test-mode MODE    wrong-handshake | nameless | bad-json | wrong-effect-id |
//                       invalid-output | exit | sleep | flood
//   --env NAME          count the value of the environment variable NAME instead of the
//                       input, and print it on stderr (secret redaction tests)
//
// Built statically (Boost.JSON compiled in, header-only), so the same file runs in a busybox
// container image.
#include <boost/json/src.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace json = boost::json;

namespace {

constexpr std::string_view protocol = "agentctl.dev/process-extension/v1";
constexpr std::string_view name = "textstats";

// What the action must declare, member for member (agentctl compares them as JSON values).
constexpr std::string_view input_schema = R"({
  "type": "object",
  "required": ["text"],
  "additionalProperties": false,
  "properties": {"text": {"type": "string"}}
})";
constexpr std::string_view output_schema = R"({
  "type": "object",
  "required": ["words", "lines", "bytes", "longest"],
  "additionalProperties": false,
  "properties": {
    "words": {"type": "integer", "minimum": 0},
    "lines": {"type": "integer", "minimum": 0},
    "bytes": {"type": "integer", "minimum": 0},
    "longest": {"type": "string"}
  }
})";
constexpr std::string_view capabilities = R"(["text.count"])";

struct options {
    std::string mode;  // protocol flag
    std::string test_mode;
    std::string marker_dir;
    std::string env_name;
};

[[noreturn]] void fail(int status, const std::string& why) {
    std::string line = "agentctl-textstats: " + why + "\n";
    (void)!::write(2, line.data(), line.size());
    ::_exit(status);
}

bool write_all(int fd, std::string_view s) {
    while (!s.empty()) {
        ssize_t n = ::write(fd, s.data(), s.size());
        if (n < 0) return false;
        s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

void print(const json::value& v) {
    if (!write_all(1, json::serialize(v) + "\n")) fail(1, "cannot write stdout");
}

std::string read_stdin() {
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(0, buf, sizeof buf);
        if (n < 0) fail(2, "cannot read stdin");
        if (n == 0) return out;
        out.append(buf, static_cast<std::size_t>(n));
    }
}

// Written to a temporary name first, so a watcher never sees an empty file.
void write_marker(const options& o, const std::string& file, const std::string& text) {
    if (o.marker_dir.empty()) return;
    std::string path = o.marker_dir + "/" + file;
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || !write_all(fd, text) || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0)
        fail(2, "cannot write " + path);
}

// Field 22 of /proc/PID/stat: identifies the process even if its pid is reused.
std::uint64_t start_time(pid_t pid) {
    std::string path = "/proc/" + std::to_string(pid) + "/stat";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[2048];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char* p = strrchr(buf, ')');
    for (int field = 0; field < 20 && p != nullptr; ++field) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, nullptr, 10) : 0;
}

json::object count(std::string_view text) {
    std::uint64_t words = 0, lines = 0;
    std::string_view longest, word;
    auto end_word = [&] {
        if (word.empty()) return;
        ++words;
        if (word.size() > longest.size()) longest = word;
        word = {};
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '\n') ++lines;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            end_word();
        } else if (word.empty()) {
            word = text.substr(i, 1);
        } else {
            word = std::string_view(word.data(), word.size() + 1);
        }
    }
    end_word();
    return json::object{{"words", words}, {"lines", lines}, {"bytes", text.size()}, {"longest", longest}};
}

int handshake(const options& o) {
    write_marker(o, "handshake", "handshake\n");
    json::object h{{"protocolVersion", protocol},
                   {"name", name},
                   {"inputSchema", json::parse(input_schema)},
                   {"outputSchema", json::parse(output_schema)},
                   {"capabilities", json::parse(capabilities)}};
    if (o.test_mode == "nameless") h.erase("name");
    if (o.test_mode == "wrong-handshake")
        h["outputSchema"].as_object()["properties"].as_object()["words"] = json::object{{"type", "string"}};
    print(h);
    return 0;
}

int invoke(const options& o) {
    write_marker(o, "invoke", "invoke\n");
    boost::system::error_code ec;
    json::value request = json::parse(read_stdin(), ec);
    if (ec || !request.is_object()) fail(2, "the request is not a JSON object");
    const json::object& r = request.get_object();
    const json::value* version = r.if_contains("protocolVersion");
    const json::value* effect = r.if_contains("effectId");
    const json::value* input = r.if_contains("input");
    if (!version || *version != json::value(protocol)) fail(2, "unsupported protocolVersion");
    if (!effect || !effect->is_string()) fail(2, "the request has no effectId");
    if (!input || !input->is_object() || !input->get_object().contains("text") ||
        !input->get_object().at("text").is_string())
        fail(2, "the input has no text");

    write_marker(o, "effect-id", std::string(effect->get_string()));

    std::string text(input->get_object().at("text").get_string());
    json::value effect_id = *effect;
    if (!o.env_name.empty()) {
        const char* value = ::getenv(o.env_name.c_str());
        text = value ? value : "";
        write_all(2, "counting " + o.env_name + "=" + text + "\n");
    }
    if (o.test_mode == "bad-json") {
        write_all(1, "{\"protocolVersion\": \"" + std::string(protocol) + "\", oops\n");
        return 0;
    } else if (o.test_mode == "wrong-effect-id") {
        effect_id = std::string(effect->get_string()) + "-other";
    } else if (o.test_mode == "exit") {
        write_all(2, "failing on purpose\n");
        return 3;
    } else if (o.test_mode == "flood") {
        std::string chunk(65536, 'x');
        for (;;)
            if (!write_all(1, chunk)) return 1;
    } else if (o.test_mode == "sleep") {
        // A grandchild too, so that a timeout or cancellation has a tree to kill.
        pid_t child = ::fork();
        if (child < 0) fail(2, "fork failed");
        if (child == 0) {
            for (;;) ::pause();
        }
        write_marker(o, "grandchild", std::to_string(child) + " " + std::to_string(start_time(child)) + "\n");
        for (;;) ::pause();
    }

    json::object output = count(text);
    if (o.test_mode == "invalid-output") output["words"] = "many";
    print(json::object{{"protocolVersion", protocol}, {"effectId", effect_id}, {"output", output}});
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail(2, std::string(a) + " needs a value");
            return argv[++i];
        };
        if (a == "--agentctl-handshake" || a == "--agentctl-invoke")
            o.mode = a;
        else if (a == "--test-mode")
            o.test_mode = value();
        else if (a == "--marker-dir")
            o.marker_dir = value();
        else if (a == "--env")
            o.env_name = value();
        else
            fail(2, "unknown argument " + std::string(a));
    }
    if (o.mode == "--agentctl-handshake") return handshake(o);
    if (o.mode == "--agentctl-invoke") return invoke(o);
    fail(2, "usage: agentctl-textstats [OPTIONS] --agentctl-handshake | --agentctl-invoke");
}
