#include <agentctl/diagnostic.hpp>
#include <agentctl/json.hpp>

#include <algorithm>
#include <cctype>

namespace agentctl {

bool is_policy_code(std::string_view code) {
    return code.substr(0, 7) == "policy_";
}

void diagnostics::error(std::string code, std::string path, std::string message, std::string help,
                        source_location where) {
    items_.push_back({std::move(code), severity::error, std::move(message), std::move(where), std::move(path),
                      std::move(help)});
}

void diagnostics::warning(std::string code, std::string path, std::string message, std::string help,
                          source_location where) {
    items_.push_back({std::move(code), severity::warning, std::move(message), std::move(where),
                      std::move(path), std::move(help)});
}

void diagnostics::append(const diagnostics& other) {
    items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

bool diagnostics::has_errors() const {
    return std::any_of(items_.begin(), items_.end(),
                       [](const diagnostic& d) { return d.level == severity::error; });
}

int diagnostics::exit_code() const {
    bool policy = false;
    for (const auto& d : items_) {
        if (d.level != severity::error) continue;
        if (!is_policy_code(d.code)) return 2;
        policy = true;
    }
    return policy ? 3 : 0;
}

std::string nearest(std::string_view word, const std::vector<std::string_view>& candidates) {
    // Levenshtein distance; a candidate is "near" when at most a third of it differs.
    auto distance = [](std::string_view a, std::string_view b) {
        std::vector<std::size_t> row(b.size() + 1);
        for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= b.size(); ++j) {
                std::size_t up = row[j];
                bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                            std::tolower(static_cast<unsigned char>(b[j - 1]));
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
                diagonal = up;
            }
        }
        return row[b.size()];
    };
    std::string best;
    std::size_t best_distance = 0;
    for (auto c : candidates) {
        std::size_t d = distance(word, c);
        std::size_t allowed = std::max<std::size_t>(1, c.size() / 3);
        if (d <= allowed && (best.empty() || d < best_distance)) {
            best = std::string(c);
            best_distance = d;
        }
    }
    return best;
}

void write_diagnostic(json_writer& w, const diagnostic& d) {
    // File names are bytes (and so may be anything a message quotes): the writer needs UTF-8.
    auto text = [](const std::string& s) {
        bool lossy = false;
        return is_valid_utf8(s) ? s : to_utf8_lossy(s, lossy);
    };
    w.begin_object();
    w.member("code", d.code);
    w.member("severity", d.level == severity::error ? "error" : "warning");
    w.member("message", text(d.message));
    w.member("file", text(d.location.file));
    w.member("line", d.location.line);
    w.member("column", d.location.column);
    w.member("path", text(d.path));
    w.member("help", text(d.help));
    w.end_object();
}

void write_diagnostics(json_writer& w, const diagnostics& ds) {
    w.begin_array();
    for (const auto& d : ds.items()) write_diagnostic(w, d);
    w.end_array();
}

}  // namespace agentctl
