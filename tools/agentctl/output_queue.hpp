// agentctl's own stdout and stderr, written by a thread of the CLI's so that a reader that
// falls behind (a full pipe, a paused terminal, a stalled log collector) never blocks the
// event loop that supervises tasks (docs/CLI.md, "Slow readers").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace agentctl::cli {

/// A queue of bytes for one file descriptor and the thread that writes them, in order.
/// write() never blocks. Nothing queued is dropped while the reader is there; once the
/// reader is gone everything further is discarded. The reader of a pipe or socket is known to
/// be gone at a write that fails (EPIPE), or, while nothing is written, when poll() reports an
/// error or a hang-up on the descriptor (checked every 100 ms).
class output_queue {
public:
    /// Starts the writer thread (with every signal blocked) for `fd`.
    explicit output_queue(int fd);
    ~output_queue();  ///< drains what is queued (blocking), then stops the thread
    output_queue(const output_queue&) = delete;
    output_queue& operator=(const output_queue&) = delete;

    /// Queues `bytes`; never blocks.
    void write(std::string_view bytes);

    /// Bytes queued and not yet written.
    std::size_t backlog() const;

    /// Whether the reader went away (EPIPE); `on_broken` runs once, on the writer thread.
    bool broken() const;
    void set_on_broken(std::function<void()> on_broken);

    /// Blocks until everything queued so far is written, or the reader is gone.
    void drain();

private:
    void run();

    bool reader_gone_while_idle() const;

    const int fd_;
    bool watch_idle_ = false;  ///< a pipe or a socket: a closed reader shows in poll()
    mutable std::mutex mutex_;
    std::condition_variable wake_;     // work queued, or stopping
    std::condition_variable drained_;  // the queue became empty
    std::deque<std::string> chunks_;
    std::size_t backlog_ = 0;
    bool writing_ = false;
    bool broken_ = false;
    bool stopping_ = false;
    std::function<void()> on_broken_;
    std::thread thread_;
};

}  // namespace agentctl::cli
