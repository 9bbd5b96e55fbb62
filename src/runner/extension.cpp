// extension.process (docs/DESIGN.md, "Extensions"): validate the input, run the program with
// --agentctl-handshake and compare what it declares, then run it again with --agentctl-invoke
// and one JSON request on stdin, and check the response. Both runs go through the launcher, so
// they have the executor's bounds and the action's isolation.
#include "runner/extension.hpp"

#include "plan/schema.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include <algorithm>
#include <memory>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl {

/// Schemas compiled once per run and action (indexed like plan::actions).
struct extension_cache {
    struct entry {
        bool compiled = false;
        std::unique_ptr<json_schema> input;
        std::unique_ptr<json_schema> output;
        std::string error;  ///< non-empty: a schema does not compile (a plan built by hand)
    };
    std::vector<entry> actions;
};

namespace {

constexpr std::size_t max_json_depth = 128;  // the YAML side allows 100 levels
constexpr std::size_t max_shown = 80;        // bytes of a value shown in a mismatch

const extension_cache::entry& schemas_of(launch_context& ctx, std::uint32_t action_index) {
    if (!ctx.extensions) ctx.extensions = std::make_shared<extension_cache>();
    auto& entries = ctx.extensions->actions;
    if (entries.size() < ctx.compiled->actions.size()) entries.resize(ctx.compiled->actions.size());
    auto& e = entries[action_index];
    if (e.compiled) return e;
    e.compiled = true;
    const extension_spec& x = *ctx.compiled->actions[action_index].extension;
    std::string error, pointer;
    e.input = json_schema::compile(x.input_schema, error, pointer);
    if (!e.input) {
        e.error = "inputSchema" + (pointer.empty() ? "" : " at " + pointer) + " does not compile: " + error;
        return e;
    }
    e.output = json_schema::compile(x.output_schema, error, pointer);
    if (!e.output)
        e.error = "outputSchema" + (pointer.empty() ? "" : " at " + pointer) + " does not compile: " + error;
    return e;
}

/// Parses `bytes` as exactly one JSON object (whitespace around it allowed).
std::optional<json::object> parse_object(std::string_view bytes, std::string& error) {
    if (bytes.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        error = "stdout is empty; expected one JSON object";
        return std::nullopt;
    }
    json::parse_options options;
    options.max_depth = max_json_depth;
    json::stream_parser p({}, options);
    boost::system::error_code ec;
    std::size_t used = p.write(bytes.data(), bytes.size(), ec);
    if (!ec) p.finish(ec);
    if (ec) {
        error =
            "stdout is not one JSON document (" + ec.message() + " near byte " + std::to_string(used) + ")";
        return std::nullopt;
    }
    json::value v = p.release();
    if (!v.is_object()) {
        error = "stdout is a JSON " + std::string(json::to_string(v.kind())) + "; expected one JSON object";
        return std::nullopt;
    }
    return std::move(v.get_object());
}

void redact_json(json::value& v, const std::vector<std::string>& secrets) {
    if (v.is_string()) {
        std::string s(v.get_string());
        redact(s, secrets);
        v = s;
    } else if (v.is_array()) {
        for (auto& item : v.get_array()) redact_json(item, secrets);
    } else if (v.is_object()) {
        json::object out;
        for (auto& m : v.get_object()) {
            std::string key(m.key());
            redact(key, secrets);
            redact_json(m.value(), secrets);
            out[key] = std::move(m.value());
        }
        v = std::move(out);
    }
}

bool numbers_equal(const json::value& a, const json::value& b) {
    if (a.is_double() || b.is_double()) {
        boost::system::error_code ea, eb;
        return a.to_number<double>(ea) == b.to_number<double>(eb) && !ea && !eb;
    }
    if (a.is_int64() && b.is_int64()) return a.get_int64() == b.get_int64();
    if (a.is_uint64() && b.is_uint64()) return a.get_uint64() == b.get_uint64();
    const json::value& i = a.is_int64() ? a : b;
    const json::value& u = a.is_int64() ? b : a;
    return i.get_int64() >= 0 && static_cast<std::uint64_t>(i.get_int64()) == u.get_uint64();
}

std::string pointer_token(std::string_view key) {
    std::string out;
    for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
}

std::string shown(const json::value* v) {
    if (!v) return "(missing)";
    std::string s = json::serialize(*v);
    if (s.size() > max_shown) s = s.substr(0, max_shown) + "...";
    return s;
}

/// The first place where `a` and `b` differ as JSON values (numbers compared by value,
/// object members in any order), as "at POINTER: declared X, handshake Y"; "" if equal.
std::string first_difference(const json::value* a, const json::value* b, const std::string& at) {
    auto here = [&] {
        return "at " + (at.empty() ? std::string("/") : at) + ": declared " + shown(a) + ", handshake " +
               shown(b);
    };
    if (!a || !b) return here();
    if (a->is_number() && b->is_number()) return numbers_equal(*a, *b) ? "" : here();
    if (a->kind() != b->kind()) return here();
    if (a->is_array()) {
        const auto &x = a->get_array(), &y = b->get_array();
        for (std::size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
            std::string d = first_difference(i < x.size() ? &x[i] : nullptr, i < y.size() ? &y[i] : nullptr,
                                             at + "/" + std::to_string(i));
            if (!d.empty()) return d;
        }
        return "";
    }
    if (a->is_object()) {
        const auto &x = a->get_object(), &y = b->get_object();
        for (const auto& m : x) {
            std::string d =
                first_difference(&m.value(), y.if_contains(m.key()), at + "/" + pointer_token(m.key()));
            if (!d.empty()) return d;
        }
        for (const auto& m : y)
            if (!x.contains(m.key()))
                return first_difference(nullptr, &m.value(), at + "/" + pointer_token(m.key()));
        return "";
    }
    return *a == *b ? "" : here();
}

/// What a handshake must say, member by member; every difference, "; "-separated. `name` is
/// the extension's own (the reference compares the version, schemas and capabilities only): a
/// string, not compared with the action's name.
std::string handshake_differences(const json::object& h, const action_spec& action) {
    const extension_spec& x = *action.extension;
    json::array capabilities;
    for (const auto& c : x.capabilities) capabilities.emplace_back(c);
    const std::pair<std::string_view, json::value> expected[] = {
        {"protocolVersion", json::value(x.protocol_version)},
        {"name", json::value(nullptr)},
        {"inputSchema", x.input_schema},
        {"outputSchema", x.output_schema},
        {"capabilities", json::value(std::move(capabilities))},
    };
    std::string out;
    auto add = [&](std::string s) { out += (out.empty() ? "" : "; ") + s; };
    for (const auto& m : h) {
        bool known = std::any_of(std::begin(expected), std::end(expected),
                                 [&](const auto& e) { return e.first == m.key(); });
        if (!known) add("unexpected member \"" + std::string(m.key()) + "\"");
    }
    for (const auto& [key, value] : expected) {
        const json::value* got = h.if_contains(key);
        if (!got) {
            add(std::string(key) + " is missing");
            continue;
        }
        if (key == "name") {
            if (!got->is_string() || got->get_string().empty())
                add("name is not a non-empty string: " + shown(got));
            continue;
        }
        std::string d = first_difference(&value, got, "");
        if (!d.empty()) add(std::string(key) + " differs " + d);
    }
    return out;
}

json::array errors_json(const std::vector<schema_error>& errors) {
    json::array out;
    for (const auto& e : errors) out.push_back(json::object{{"pointer", e.pointer}, {"message", e.message}});
    return out;
}

task_result early_failure(const action_spec& action, const resolved_environment& env, error_code code,
                          std::string message, json::array errors) {
    task_result t;
    t.state = task_state::failed;
    t.isolation = std::string(to_string(action.isolation));
    redact(message, env.secrets);
    t.error = task_error{code, std::move(message)};
    json::object out{{"status", "failed"}, {"changed", false}, {"phase", "input"}};
    json::value details(std::move(errors));
    redact_json(details, env.secrets);
    if (!details.get_array().empty()) out["errors"] = std::move(details);
    t.output = std::move(out);
    return t;
}

/// The runs of one attempt and what they add up to (output bytes, usage, time).
class extension_attempt {
public:
    extension_attempt(launch_context& ctx, launcher& l, const attempt_request& request)
        : ctx_(ctx),
          launcher_(l),
          request_(request),
          action_(request.action()),
          env_(ctx.environment_of(request.task().action_index)),
          effect_id_(ctx.settings.run_id + ":" + request.task_id + ":" + std::to_string(request.attempt)) {}

    asio::awaitable<task_result> run() {
        const auto& schemas = schemas_of(ctx_, request_.task().action_index);
        if (!schemas.error.empty())
            co_return early_failure(action_, env_, error_code::invalid_schema, schemas.error, {});
        auto errors = schemas.input->validate(request_.with);
        if (!errors.empty())
            co_return early_failure(
                action_, env_, error_code::input_invalid,
                "the task's input does not match inputSchema: " + schema_errors_text(errors),
                errors_json(errors));

        launch_request launch;
        launch.attempt = &request_;
        launch.extra_args = {"--agentctl-handshake"};
        launch.phase = "handshake";
        std::optional<json::object> parsed;
        std::string parse_error;
        launch_result handshake;
        co_await launcher_.launch(launch, handshake);
        task_result t = take(std::move(handshake), parsed, parse_error);
        bool cancelled = co_await was_cancelled();
        if (cancelled) {
            // Even if the handshake had exited by then, its output may have been cut short.
            if (t.state != task_state::cancelled)
                t.error = task_error{error_code::cancelled, "cancelled; the extension was not invoked"};
            t.state = task_state::cancelled;
            co_return finish(std::move(t), "handshake");
        }
        if (t.state != task_state::succeeded) co_return finish(std::move(t), "handshake");
        if (!parsed) co_return co_await fail(std::move(t), "handshake", error_code::bad_json, parse_error);
        std::string differences = handshake_differences(*parsed, action_);
        if (!differences.empty())
            co_return co_await fail(std::move(t), "handshake", error_code::handshake_mismatch,
                                    "the extension does not match its declaration: " + differences);

        json::object message{{"protocolVersion", action_.extension->protocol_version},
                             {"effectId", effect_id_},
                             {"input", request_.with}};
        launch.extra_args = {"--agentctl-invoke"};
        launch.phase = "invoke";
        launch.stdin_data = json::serialize(message);
        parsed.reset();
        launch_result invoke;
        co_await launcher_.launch(launch, invoke);
        t = take(std::move(invoke), parsed, parse_error);
        if (t.state != task_state::succeeded) co_return finish(std::move(t), "invoke");
        if (!parsed) co_return co_await fail(std::move(t), "invoke", error_code::bad_json, parse_error);
        json::object& response = *parsed;
        for (const auto& m : response)
            if (m.key() != "protocolVersion" && m.key() != "effectId" && m.key() != "output")
                co_return co_await fail(
                    std::move(t), "invoke", error_code::bad_json,
                    "unexpected member \"" + std::string(m.key()) +
                        "\" in the response; expected {protocolVersion, effectId, output}");
        std::string identity;
        for (auto [key, expected] : {std::pair<std::string_view, std::string_view>{
                                         "protocolVersion", action_.extension->protocol_version},
                                     std::pair<std::string_view, std::string_view>{"effectId", effect_id_}}) {
            const json::value* got = response.if_contains(key);
            if (!got || !got->is_string() || got->get_string() != expected)
                identity += (identity.empty() ? "" : "; ") + std::string(key) + " is " + shown(got) +
                            ", expected " + json::serialize(json::value(expected));
        }
        if (!identity.empty())
            co_return co_await fail(std::move(t), "invoke", error_code::identity_mismatch,
                                    "the response is not for this request: " + identity);
        json::value* output = response.if_contains("output");
        if (!output)
            co_return co_await fail(std::move(t), "invoke", error_code::output_invalid,
                                    "the response has no \"output\"");
        auto out_errors = schemas_of(ctx_, request_.task().action_index).output->validate(*output);
        if (!out_errors.empty()) {
            json::value details(errors_json(out_errors));
            co_return co_await fail(
                std::move(t), "invoke", error_code::output_invalid,
                "the output does not match outputSchema: " + schema_errors_text(out_errors), &details);
        }
        redact_json(*output, env_.secrets);
        t.output = std::move(*output);
        co_return finish(std::move(t), "");
    }

private:
    static asio::awaitable<bool> was_cancelled() {
        co_return (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
    }

    // The process part of a launch as a task result; `parsed` gets stdout as a JSON object when
    // the program exited 0 (parsed from the raw bytes: redaction happens on the values).
    task_result take(launch_result r, std::optional<json::object>& parsed, std::string& parse_error) {
        bool clean_exit =
            r.process.outcome == process_outcome::exited && r.process.exit_code == 0 && !r.error;
        if (clean_exit) parsed = parse_object(r.process.stdout_bytes, parse_error);
        output_bytes_ += r.process.stdout_bytes.size() + r.process.stderr_bytes.size();
        usage_.user_us += r.process.usage.user_us;
        usage_.system_us += r.process.usage.system_us;
        usage_.max_rss_kib = std::max(usage_.max_rss_kib, r.process.usage.max_rss_kib);
        duration_ms_ += static_cast<std::uint64_t>(r.process.duration.count() / 1000);
        task_result t = to_task_result(std::move(r), env_, request_.task().timeout_ms);
        t.output_bytes = output_bytes_;
        t.usage = usage_;
        t.duration_ms = duration_ms_;
        return t;
    }

    asio::awaitable<task_result> fail(task_result t, std::string_view phase, error_code code,
                                      std::string message, json::value* details = nullptr) {
        t.state = task_state::failed;
        t.error = task_error{code, std::move(message)};
        bool cancelled = co_await was_cancelled();
        if (cancelled) {
            // The program had exited, but the drain of its output was cut short.
            t.state = task_state::cancelled;
            t.error = task_error{error_code::cancelled, "cancelled; the response may be incomplete (" +
                                                            std::string(to_string(t.error->code)) + ")"};
        }
        if (details) {
            redact_json(*details, env_.secrets);
            t.output.get_object()["errors"] = std::move(*details);
        }
        t.output.get_object()["status"] = "failed";
        t.output.get_object()["changed"] = false;
        co_return finish(std::move(t), phase);
    }

    // `phase` empty: success. Otherwise the error names the phase, and so does the output.
    task_result finish(task_result t, std::string_view phase) {
        if (!phase.empty()) {
            if (t.error) {
                t.error->message = std::string(phase) + ": " + t.error->message;
                redact(t.error->message, env_.secrets);
            }
            if (t.output.is_object()) t.output.get_object()["phase"] = phase;
        }
        return t;
    }

    launch_context& ctx_;
    launcher& launcher_;
    const attempt_request& request_;
    const action_spec& action_;
    const resolved_environment& env_;
    std::string effect_id_;
    std::uint64_t output_bytes_ = 0;
    std::uint64_t duration_ms_ = 0;
    resource_usage usage_;
};

}  // namespace

asio::awaitable<task_result> run_extension(launch_context& ctx, launcher& l, const attempt_request& request) {
    extension_attempt attempt(ctx, l, request);
    co_return co_await attempt.run();
}

}  // namespace agentctl
