// Running an io_context with a hard deadline, so that a hang fails a test instead of
// stalling CI. One helper for every test binary.
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <thread>

namespace agentctl::test {

/// Runs `io` until `done()` holds or `bound` has passed; true when done. Handlers already
/// queued when `done()` first holds still run (so a second completion would be seen).
inline bool run_with_deadline(boost::asio::io_context& io, std::chrono::milliseconds bound,
                              const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + bound;
    while (!done()) {
        auto now = std::chrono::steady_clock::now();
        if (now >= until) return false;
        if (io.stopped()) io.restart();
        auto slice =
            std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(50));
        io.run_for(slice);
        if (io.stopped() && !done()) {
            // Out of work without being done: nothing more can happen.
            return false;
        }
    }
    io.restart();
    io.poll();
    return true;
}

/// Asks `done()` every `interval` until it holds or `bound` has passed; true when it held.
/// For state outside the test that nothing can signal (Slurm's queue, the process table):
/// where a child can write a marker or the loop can complete, wait on that instead.
inline bool poll_until(std::chrono::milliseconds bound, std::chrono::milliseconds interval,
                       const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + bound;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(interval);
    }
    return true;
}

}  // namespace agentctl::test
