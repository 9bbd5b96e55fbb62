// Diagnostics: what the front end reports about a document, with its location.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// How bad a diagnostic is. Only errors make a document invalid.
enum class severity { error, warning };

/// A position in a source file. Line and column are 1-based; 0 means unknown.
struct source_location {
    std::string file;
    int line = 0;
    int column = 0;
};

/// One finding about a document.
struct diagnostic {
    std::string code;  ///< stable, snake_case, e.g. "unknown_key"; see diagnostic_codes below
    severity level = severity::error;
    std::string message;
    source_location location;
    std::string path;  ///< dotted path into the document, e.g. "spec.actions.status.timeoutSeconds"
    std::string help;  ///< what to do about it; may be empty
};

/// The category of a code decides the exit status of `check`/`plan`/`run`:
/// policy codes exit 3, every other error exits 2.
bool is_policy_code(std::string_view code);

/// Diagnostics of one document, in the order found.
class diagnostics {
public:
    void add(diagnostic d) { items_.push_back(std::move(d)); }
    void error(std::string code, std::string path, std::string message, std::string help = {},
               source_location where = {});
    void warning(std::string code, std::string path, std::string message, std::string help = {},
                 source_location where = {});
    void append(const diagnostics& other);

    bool has_errors() const;
    bool empty() const { return items_.empty(); }
    std::size_t size() const { return items_.size(); }
    const std::vector<diagnostic>& items() const { return items_; }
    std::vector<diagnostic>& items() { return items_; }

    /// 2 when any non-policy error is present, 3 when only policy errors are, else 0.
    int exit_code() const;

private:
    std::vector<diagnostic> items_;
};

/// The nearest of `candidates` to `word` by edit distance, or "" when nothing is close.
std::string nearest(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace agentctl
