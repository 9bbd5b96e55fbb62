#include "output_queue.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace agentctl::cli {

output_queue::output_queue(int fd) : fd_(fd) {
    struct stat st {};
    watch_idle_ = ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    // The thread takes no signal: SIGINT and friends stay with the event loop's signal_set.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

output_queue::~output_queue() {
    drain();
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

void output_queue::write(std::string_view bytes) {
    if (bytes.empty()) return;
    {
        std::lock_guard lock(mutex_);
        if (broken_) return;
        chunks_.emplace_back(bytes);
        backlog_ += bytes.size();
    }
    wake_.notify_one();
}

std::size_t output_queue::backlog() const {
    std::lock_guard lock(mutex_);
    return backlog_;
}

bool output_queue::broken() const {
    std::lock_guard lock(mutex_);
    return broken_;
}

void output_queue::set_on_broken(std::function<void()> on_broken) {
    std::lock_guard lock(mutex_);
    on_broken_ = std::move(on_broken);
}

void output_queue::drain() {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return (chunks_.empty() && !writing_) || broken_; });
}

bool output_queue::reader_gone_while_idle() const {
    pollfd p{fd_, 0, 0};  // no event asked: only an error or a hang-up can be reported
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

void output_queue::run() {
    std::unique_lock lock(mutex_);
    while (true) {
        auto ready = [this] { return !chunks_.empty() || stopping_; };
        if (watch_idle_ && !broken_) {
            if (!wake_.wait_for(lock, std::chrono::milliseconds(100), ready)) {
                if (reader_gone_while_idle()) {
                    broken_ = true;
                    auto notify = on_broken_;
                    drained_.notify_all();
                    if (notify) {
                        lock.unlock();
                        notify();
                        lock.lock();
                    }
                }
                continue;
            }
        } else {
            wake_.wait(lock, ready);
        }
        if (chunks_.empty()) return;  // stopping, and nothing left
        std::string chunk = std::move(chunks_.front());
        chunks_.pop_front();
        writing_ = true;
        lock.unlock();
        // A blocking write: this thread is the one allowed to wait for the reader.
        std::string_view rest = chunk;
        bool gone = false;
        while (!rest.empty()) {
            ssize_t n = ::write(fd_, rest.data(), rest.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                gone = true;  // EPIPE, or a descriptor that no longer takes data
                break;
            }
            rest.remove_prefix(static_cast<std::size_t>(n));
        }
        std::function<void()> notify;
        lock.lock();
        writing_ = false;
        backlog_ -= chunk.size();
        if (gone && !broken_) {
            broken_ = true;
            for (const auto& c : chunks_) backlog_ -= c.size();
            chunks_.clear();
            notify = on_broken_;
        }
        if (chunks_.empty()) drained_.notify_all();
        if (notify) {
            lock.unlock();
            notify();
            lock.lock();
        }
    }
}

}  // namespace agentctl::cli
