// The streaming secret redactor: an Aho–Corasick automaton over the secret values, scanned
// once per byte; the root's moves are a table so that bytes that start no secret cost one
// lookup each.
#include "exec/redactor.hpp"

#include <algorithm>
#include <cassert>

namespace agentctl {

secret_matcher::secret_matcher(const std::vector<std::string>& secrets) {
    // The trie of the values, its edges kept per state while it is built.
    std::vector<std::vector<edge>> out(1);
    states_.emplace_back();
    for (const auto& secret : secrets) {
        if (secret.empty()) continue;
        secrets_.push_back(secret);
        longest_ = std::max(longest_, secret.size());
        std::uint32_t s = root;
        for (char c : secret) {
            auto byte = static_cast<unsigned char>(c);
            auto it =
                std::find_if(out[s].begin(), out[s].end(), [byte](const edge& e) { return e.byte == byte; });
            if (it != out[s].end()) {
                s = it->to;
                continue;
            }
            auto next = static_cast<std::uint32_t>(states_.size());
            states_.push_back(state{root, states_[s].depth + 1, 0, 0, 0});
            out.emplace_back();
            out[s].push_back(edge{byte, next});
            s = next;
        }
        states_[s].match = states_[s].depth;
    }
    for (std::uint32_t s = 0; s < states_.size(); ++s) {
        std::sort(out[s].begin(), out[s].end(), [](const edge& a, const edge& b) { return a.byte < b.byte; });
        states_[s].first_edge = static_cast<std::uint32_t>(edges_.size());
        states_[s].edge_count = static_cast<std::uint32_t>(out[s].size());
        edges_.insert(edges_.end(), out[s].begin(), out[s].end());
    }
    for (const edge& e : out[root]) from_root_[e.byte] = e.to;

    // Failure links breadth first: a state's link is shorter, so it is complete when needed.
    std::vector<std::uint32_t> queue;
    for (const edge& e : out[root]) queue.push_back(e.to);
    for (std::size_t i = 0; i < queue.size(); ++i) {
        std::uint32_t s = queue[i];
        for (const edge& e : out[s]) {
            state& t = states_[e.to];
            t.fail = step(states_[s].fail, e.byte);
            if (t.match == 0) t.match = states_[t.fail].match;
            queue.push_back(e.to);
        }
    }
}

std::uint32_t secret_matcher::step(std::uint32_t from, unsigned char byte) const {
    for (std::uint32_t s = from; s != root; s = states_[s].fail) {
        const state& st = states_[s];
        for (std::uint32_t i = st.first_edge; i < st.first_edge + st.edge_count; ++i)
            if (edges_[i].byte == byte) return edges_[i].to;
    }
    return from_root_[byte];
}

std::size_t secret_matcher::suffix_at_start(std::string_view head) const {
    std::size_t best = 0;
    for (const auto& s : secrets_) {
        std::size_t most = std::min(s.size() - 1, head.size());
        for (std::size_t k = most; k > best; --k)
            if (head.compare(0, k, s, s.size() - k, k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

stream_redactor::stream_redactor(const secret_matcher& matcher, capture_ends ends)
    : m_(matcher), ends_(ends), head_decided_(!ends.starts_late || matcher.longest() <= 1) {}

void stream_redactor::feed(std::string_view chunk) {
    assert(!finished_);
    if (m_.empty()) {
        fed_ += chunk.size();
        return;
    }
    if (!head_decided_) {
        // A proper suffix of a secret is at most longest() - 1 bytes.
        std::size_t need = m_.longest() - 1;
        head_.append(chunk.substr(0, need - head_.size()));
        if (head_.size() == need) decide_head();
    }
    const auto* bytes = reinterpret_cast<const unsigned char*>(chunk.data());
    const std::size_t n = chunk.size();
    std::uint32_t s = state_;
    for (std::size_t i = 0; i < n; ++i) {
        if (s == secret_matcher::root) {
            // The common case: skip bytes that start no secret.
            while (i < n && m_.from_root_[bytes[i]] == secret_matcher::root) ++i;
            if (i == n) break;
            s = m_.from_root_[bytes[i]];
        } else {
            s = m_.step(s, bytes[i]);
        }
        if (std::uint32_t len = m_.states_[s].match) add(fed_ + i + 1 - len, fed_ + i + 1);
    }
    state_ = s;
    fed_ += n;
}

void stream_redactor::finish() {
    assert(!finished_);
    finished_ = true;
    if (!head_decided_) decide_head();
    if (ends_.ends_early && state_ != secret_matcher::root)
        add(fed_ - m_.states_[state_].depth, fed_);  // the longest tail that begins a secret
}

std::uint64_t stream_redactor::settled() const {
    if (finished_) return fed_;
    if (!head_decided_) return 0;
    return fed_ - m_.states_[state_].depth;
}

// Ranges arrive in order of their end; one may reach back over earlier ones (a longer secret).
void stream_redactor::add(std::uint64_t begin, std::uint64_t end) {
    while (!ranges_.empty() && ranges_.back().end >= begin) {
        begin = std::min(begin, ranges_.back().begin);
        end = std::max(end, ranges_.back().end);
        ranges_.pop_back();
    }
    ranges_.push_back(redaction{begin, end});
}

// A capture that starts late: its first bytes may be the end of a secret whose start was not
// captured. Decided once longest() - 1 bytes are in (or at the end, with what there is).
void stream_redactor::decide_head() {
    head_decided_ = true;
    std::uint64_t end = m_.suffix_at_start(head_);
    // Shorter than a secret and cut at both ends: it may be the middle of one.
    if (finished_ && ends_.ends_early && head_.size() == fed_)
        for (const auto& s : m_.secrets_)
            if (s.size() > head_.size() && s.find(head_) != std::string::npos) end = fed_;
    std::string().swap(head_);
    if (end == 0) return;
    std::size_t merged = 0;
    while (merged < ranges_.size() && ranges_[merged].begin <= end)
        end = std::max(end, ranges_[merged++].end);
    ranges_.erase(ranges_.begin(), ranges_.begin() + static_cast<std::ptrdiff_t>(merged));
    ranges_.insert(ranges_.begin(), redaction{0, end});
}

void apply_redactions(std::string& text, const std::vector<redaction>& ranges) {
    if (ranges.empty()) return;
    assert(ranges.back().end <= text.size());
    static constexpr std::string_view marker = "[REDACTED]";
    std::string out;
    out.reserve(text.size() + ranges.size() * marker.size());
    std::size_t copied = 0;
    for (const redaction& r : ranges) {
        out.append(text, copied, r.begin - copied);
        out += marker;
        copied = r.end;
    }
    out.append(text, copied, std::string::npos);
    text = std::move(out);
}

void redact_capture(std::string& text, const secret_matcher& matcher, capture_ends ends) {
    if (matcher.empty()) return;
    stream_redactor r(matcher, ends);
    r.feed(text);
    r.finish();
    apply_redactions(text, r.ranges());
}

void redact_capture(boost::json::string& text, const secret_matcher& matcher, capture_ends ends) {
    if (matcher.empty()) return;
    stream_redactor r(matcher, ends);
    r.feed(text);
    r.finish();
    if (r.ranges().empty()) return;
    std::string redacted(text.data(), text.size());  // only a stream with a secret in it is copied
    apply_redactions(redacted, r.ranges());
    text.assign(redacted.data(), redacted.size());
}

}  // namespace agentctl
