// Finding secret values in captured output as it streams in: every secret at once in one pass
// over each chunk, a secret split across chunks, and the ends of a capture that was cut
// (docs/SECRETS.md, "Redaction"). Pure: no I/O, no allocation per byte.
#pragma once

#include <boost/json/string.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// The secret values of one environment compiled once (an Aho–Corasick automaton over the
/// values); immutable, so any number of redactors may share it. Empty values are ignored.
class secret_matcher {
public:
    explicit secret_matcher(const std::vector<std::string>& secrets);

    bool empty() const { return longest_ == 0; }
    std::size_t longest() const { return longest_; }  ///< the longest secret's size

private:
    friend class stream_redactor;
    static constexpr std::uint32_t root = 0;
    struct state {
        std::uint32_t fail = root;     ///< the longest proper suffix that is also a state
        std::uint32_t depth = 0;       ///< bytes from the root: a prefix of a secret this long
        std::uint32_t match = 0;       ///< the longest secret ending here (0: none)
        std::uint32_t first_edge = 0;  ///< this state's edges: edges_[first_edge, +edge_count)
        std::uint32_t edge_count = 0;
    };
    struct edge {
        unsigned char byte;
        std::uint32_t to;
    };
    std::uint32_t step(std::uint32_t from, unsigned char byte) const;
    /// The longest proper suffix of a secret that `head` starts with (0: none).
    std::size_t suffix_at_start(std::string_view head) const;

    std::vector<state> states_;
    std::vector<edge> edges_;         ///< sorted by byte within each state
    std::uint32_t from_root_[256]{};  ///< the root's moves (0: stays at the root)
    std::vector<std::string> secrets_;
    std::size_t longest_ = 0;
};

/// A byte range [begin, end) of a stream, counted from the stream's first byte, that is shown
/// as one "[REDACTED]".
struct redaction {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    friend bool operator==(const redaction&, const redaction&) = default;
};

/// How much of what the program wrote a capture holds.
struct capture_ends {
    bool starts_late = false;  ///< bytes before the first were written but not captured
    bool ends_early = false;   ///< the capture stopped (a cap, a kill) where a write may go on
};

/// Scans one stream chunk by chunk and collects the ranges to redact: every occurrence of
/// every secret, overlapping or adjacent ones merged into one range (no fragment of a secret
/// is left beside a marker). At finish(), a capture that ends early also has its trailing part
/// that is a prefix of a secret redacted, and one that starts late its leading part that is a
/// suffix of a secret. The ranges are applied by the owner of the bytes (apply_redactions), so
/// a stream with no secret in it is never copied.
class stream_redactor {
public:
    /// `matcher` must outlive the redactor.
    explicit stream_redactor(const secret_matcher& matcher, capture_ends ends = {});

    /// The next bytes of the stream.
    void feed(std::string_view chunk);
    /// The stream is complete; the ranges are final.
    void finish();

    /// Sorted, disjoint and not adjacent. Before finish() the ones below settled() are final.
    const std::vector<redaction>& ranges() const { return ranges_; }
    /// Bytes before this offset are in no range that is not yet in ranges(): a streaming
    /// consumer may pass them on. A partial match held back is at most longest() - 1 bytes.
    std::uint64_t settled() const;
    std::uint64_t size() const { return fed_; }

private:
    void add(std::uint64_t begin, std::uint64_t end);
    void decide_head();

    const secret_matcher& m_;
    capture_ends ends_;
    std::uint32_t state_ = secret_matcher::root;
    std::uint64_t fed_ = 0;
    std::vector<redaction> ranges_;
    std::string head_;  ///< starts_late: the first bytes, until the leading suffix is decided
    bool head_decided_ = true;
    bool finished_ = false;
};

/// Replaces each range of `text` (the whole stream; ranges as stream_redactor gives them) with
/// "[REDACTED]".
void apply_redactions(std::string& text, const std::vector<redaction>& ranges);

/// One whole capture: feed, finish, apply.
void redact_capture(std::string& text, const secret_matcher& matcher, capture_ends ends = {});
/// The same for a capture as the executor gives it: copied only when a secret is in it.
void redact_capture(boost::json::string& text, const secret_matcher& matcher, capture_ends ends = {});

}  // namespace agentctl
