#include "exec/service.hpp"

#include "exec/owner.hpp"
#include "exec/run_op.hpp"
#include "exec/sweep.hpp"

#include <boost/asio/post.hpp>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>

namespace agentctl::exec {

boost::asio::execution_context::id exec_service::id;

exec_service::exec_service(boost::asio::execution_context& ctx)
    : boost::asio::execution_context::service(ctx),
      proc_fd_(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
      children_files_(children_files_exist(proc_fd_.get())) {
    // Leaves of several exec_services of one process share the owner directory.
    char tag[16];
    std::snprintf(tag, sizeof tag, "%06x-",
                  static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(this) & 0xffffff));
    leaf_prefix_ = tag;
}

exec_service::~exec_service() {
    stop_spawner();
    stop_keeper();
}

void exec_service::attach(run_op& op) {
    std::lock_guard lock(mutex_);
    live_.push_back(op.live_hook);
}

void exec_service::detach(run_op& op) {
    std::lock_guard lock(mutex_);
    if (op.live_hook.linked) live_.erase(op.live_hook);
}

void exec_service::enqueue(run_op& op, const boost::asio::any_io_executor& ex) {
    std::shared_ptr<helper_link> spawner;
    boost::asio::any_io_executor spawner_ex;
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(op.queue_hook);
        if (pump_scheduled_) return;
        pump_scheduled_ = true;
        if (spawner_available()) {
            pump_ex_ = spawner_ex = spawner_;
            spawner = spawner_link_;
        } else {
            pump_ex_ = ex;
        }
    }
    if (spawner) {
        post_job(spawner_ex, spawner, &exec_service::spawner_work);
    } else {
        boost::asio::post(ex, [this] { pump(); });
    }
}

bool exec_service::withdraw(run_op& op, boost::asio::cancellation_type type) {
    std::lock_guard lock(mutex_);
    if (op.queue_hook.linked) {
        queue_.erase(op.queue_hook);
        return true;
    }
    op.pending_cancel = op.pending_cancel | type;
    return false;
}

boost::asio::cancellation_type exec_service::take_pending_cancel(run_op& op) {
    std::lock_guard lock(mutex_);
    auto type = op.pending_cancel;
    op.pending_cancel = boost::asio::cancellation_type::none;
    return type;
}

// Spawning blocks this thread until the child has exec'd (~0.1-1 ms). Doing a few per turn and
// re-posting lets the reactor run timers and cancellations in between (docs/DESIGN.md,
// "Executor", Spawn): unbatched, 1 000 queued spawns delay every deadline by the time it takes
// to spawn them all.
void exec_service::pump() {
    boost::asio::any_io_executor ex;
    for (int i = 0; i < spawns_per_turn; ++i) {
        run_op* op = nullptr;
        {
            std::lock_guard lock(mutex_);
            if (queue_.empty()) {
                pump_scheduled_ = false;
                return;
            }
            op = &*queue_.front()->owner;
            queue_.erase(op->queue_hook);
            ex = pump_ex_;
        }
        op->spawn(ex);  // may complete and destroy op
    }
    {
        std::lock_guard lock(mutex_);
        if (queue_.empty()) {
            pump_scheduled_ = false;
            return;
        }
    }
    boost::asio::post(ex, [this] { pump(); });
}

// On the spawner: nothing else of the runs waits on this thread, so every queued run is
// spawned in turn; each spawn hands its run back to the run's executor. Stopped (shutdown),
// it leaves the rest queued: shutdown() ends them, unspawned.
void exec_service::spawner_work() {
    for (;;) {
        run_op* op = nullptr;
        boost::asio::any_io_executor ex;
        {
            std::lock_guard lock(mutex_);
            if (queue_.empty() || spawner_stop_) {
                pump_scheduled_ = false;
                return;
            }
            op = &*queue_.front()->owner;
            queue_.erase(op->queue_hook);
            ex = pump_ex_;
        }
        op->spawn(ex);  // posts the rest of the run to its own executor
    }
}

std::shared_ptr<const proc_table> exec_service::proc_snapshot() {
    std::lock_guard lock(mutex_);
    if (!snapshot_ || std::chrono::steady_clock::now() - snapshot_->taken > snapshot_age) {
        snapshot_ = std::make_shared<const proc_table>(scan_proc(proc_fd_.get()));
    }
    return snapshot_;
}

char* exec_service::stack() {
    if (!stack_) {
        stack_ = std::make_unique<char[]>(stack_size);
        discard_ = std::make_unique<char[]>(discard_size);
    }
    return stack_.get();
}

void exec_service::wait_stack_free() {
    // A child still on the stack is between its clone and its execve: the wait is bounded by
    // that, as a CLONE_VFORK spawn's is. The kernel's wake is a shared-futex one.
    for (;;) {
        pid_t busy = __atomic_load_n(&stack_in_use_, __ATOMIC_ACQUIRE);
        if (busy == 0) return;
        ::syscall(SYS_futex, &stack_in_use_, FUTEX_WAIT, busy, nullptr, nullptr, 0);
    }
}

const char* exec_service::stage(const std::string& path, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env) {
    std::size_t size = path.size() + 1;
    for (const auto& a : argv) size += a.size() + 1;
    for (const auto& e : env) size += e.size() + 1;
    text_.resize(size);  // one (re)allocation at most: the pointers below stay valid
    char* at = text_.data();
    auto put = [&at](const std::string& s) {
        char* copy = at;
        std::memcpy(at, s.c_str(), s.size() + 1);
        at += s.size() + 1;
        return copy;
    };
    const char* staged_path = put(path);
    pointers_.clear();
    for (const auto& a : argv) pointers_.push_back(put(a));
    pointers_.push_back(nullptr);
    for (const auto& e : env) pointers_.push_back(put(e));
    pointers_.push_back(nullptr);
    staged_argc_ = argv.size();
    return staged_path;
}

int exec_service::dev_null(int& err) {
    if (!dev_null_) {
        int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fd < 3) {
            // The child dup2()s it onto 0; it must not already be one of 0, 1, 2.
            int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
            ::close(fd);
            fd = high;
        }
        if (fd < 0) {
            err = errno;
            return -1;
        }
        dev_null_.reset(fd);
    }
    return dev_null_.get();
}

// The window's slots are the lowest free descriptors above 2 when the first spawn comes,
// /dev/null in each. A slot is refilled with dup3(), which replaces what it held in one step,
// so a concurrent open() of another thread never lands in the window. Any failure closes the
// window for good: the spawns then copy the whole table, as they would without it.
int exec_service::fill_window(const void* owner, const window_fds& fds, window_fds& slots) {
    std::lock_guard lock(window_mutex_);
    if (window_end_ == 0) {
        int err = 0;
        int null_fd = dev_null(err);
        window_end_ = -1;
        if (null_fd >= 0) {
            int end = 3;
            for (auto& slot : window_) {
                slot.reset(::fcntl(null_fd, F_DUPFD_CLOEXEC, 3));
                if (!slot) break;
                end = std::max(end, slot.get() + 1);
            }
            if (window_.back()) window_end_ = end;
        }
        if (window_end_ < 0) close_window();
    }
    if (window_end_ < 0) return 0;
    for (int i = 0; i < window_slots; ++i) {
        bool is_null = fds[i] < 0 || fds[i] == dev_null_.get();
        if (!is_null || window_busy_[i]) {
            if (::dup3(is_null ? dev_null_.get() : fds[i], window_[i].get(), O_CLOEXEC) < 0) {
                close_window();
                return 0;
            }
            window_busy_[i] = !is_null;
        }
        slots[i] = fds[i] < 0 ? -1 : window_[i].get();
    }
    window_owner_ = owner;
    return window_end_;
}

void exec_service::release_window(const void* owner) {
    std::lock_guard lock(window_mutex_);
    if (owner == nullptr || window_owner_ != owner) return;
    window_owner_ = nullptr;
    for (int i = 0; i < window_slots; ++i) {
        if (!window_busy_[i]) continue;
        if (::dup3(dev_null_.get(), window_[i].get(), O_CLOEXEC) < 0) {
            close_window();
            return;
        }
        window_busy_[i] = false;
    }
}

// Under window_mutex_.
void exec_service::close_window() {
    for (auto& slot : window_) slot.reset();
    window_busy_ = {};
    window_owner_ = nullptr;
    window_end_ = -1;
}

void exec_service::set_observer(std::shared_ptr<tree_observer> observer) {
    std::lock_guard lock(mutex_);
    observer_ = std::move(observer);
    if (cgroup_parent_ && observer_) observer_->owner_cgroup_created(cgroup_parent_->path);
}

std::shared_ptr<tree_observer> exec_service::observer() {
    std::lock_guard lock(mutex_);
    return observer_;
}

// Under mutex_. Creates (or, when another exec_service of this process made it, opens) the
// owner directory beneath our own cgroup.
bool exec_service::open_owner_dir() {
    cgroup_parent owner;
    int err = open_cgroup_dir(*cgroup_base_, owner_dir_name_, true, owner);
    if (err != 0) {
        if (err == EACCES || err == EPERM || err == EROFS || err == ENOENT) cgroup_usable_ = false;
        return false;
    }
    cgroup_parent_ = std::move(owner);
    ++owner_dir_generation_;
    if (observer_) observer_->owner_cgroup_created(cgroup_parent_->path);
    return true;
}

// Under mutex_. Fails harmlessly (EBUSY) while another exec_service of this process has leaves.
void exec_service::remove_owner_dir() {
    if (!cgroup_parent_) return;
    cgroup_parent_.reset();
    ::unlinkat(cgroup_base_->dir.get(), owner_dir_name_.c_str(), AT_REMOVEDIR);
}

std::optional<cgroup_leaf> exec_service::acquire_leaf() {
    std::unique_lock lock(mutex_);
    if (!cgroup_probed_) {
        cgroup_probed_ = true;
        std::string why;
        auto self = self_owner();
        cgroup_base_ = discover_cgroup_parent(why);
        cgroup_usable_ = cgroup_base_.has_value() && self.has_value();
        if (cgroup_usable_) {
            owner_dir_name_ = owner_cgroup_name(*self);
            // Empty leftovers of owners that died are removed on the way; populated ones are
            // for sweep_dead_owners(), which reports what it kills.
            sweep_owner_dirs(cgroup_base_->dir.get(), false, 0, self->pidns, probe_process);
        }
    }
    if (!cgroup_usable_) return std::nullopt;
    if (!free_leaves_.empty()) {
        cgroup_leaf leaf = std::move(free_leaves_.back());
        free_leaves_.pop_back();
        if (free_leaves_.size() < spare_target_ / 2) wake_keeper();
        return leaf;
    }
    // The spawns outran the pool: ask the keeper for more ahead, and make this one here, outside
    // the lock: a mkdir in cgroupfs can wait long on the kernel's cgroup lock, and the runs'
    // executor takes this lock to queue and release runs (with a spawner, from another thread).
    spare_target_ = std::clamp<std::size_t>(spare_target_ * 2, 4, max_spares);
    if (!cgroup_parent_ && !open_owner_dir()) return std::nullopt;
    for (int attempt = 0; attempt < 100; ++attempt) {
        // A descriptor of its own: another thread may replace the owner directory meanwhile.
        cgroup_parent parent;
        parent.dir.reset(::fcntl(cgroup_parent_->dir.get(), F_DUPFD_CLOEXEC, 0));
        if (!parent.dir) return std::nullopt;
        parent.path = cgroup_parent_->path;
        unsigned generation = owner_dir_generation_;
        std::string name = leaf_prefix_ + std::to_string(next_leaf_++);
        lock.unlock();
        cgroup_leaf leaf;
        int err = make_cgroup_leaf(parent, name, leaf);
        lock.lock();
        if (err == 0) {
            wake_keeper();
            return leaf;
        }
        if (err == ENOENT) {
            // Another exec_service of this process removed the owner directory when it shut
            // down, between our opening it and now: make it again (unless another thread did).
            if (generation == owner_dir_generation_) cgroup_parent_.reset();
            if (!cgroup_parent_ && !open_owner_dir()) return std::nullopt;
            continue;
        }
        if (err != EEXIST) {
            // Not writable (or no cgroup.kill): this host has no usable cgroup v2 for us.
            if (err == EACCES || err == EPERM || err == EROFS) cgroup_usable_ = false;
            return std::nullopt;
        }
    }
    return std::nullopt;
}

void exec_service::release_leaf(cgroup_leaf leaf, bool reusable) {
    std::lock_guard lock(mutex_);
    // Beyond what the spawns ahead can use (none queued, the pool at its target), a reusable
    // leaf is surplus: removed now, off this thread, rather than all at shutdown.
    bool surplus = queue_.empty() && free_leaves_.size() >= spare_target_ && keeper_available();
    if (reusable && cgroup_usable_ && !surplus) {
        free_leaves_.push_back(std::move(leaf));
        return;
    }
    leaf = cgroup_leaf{{}, {}, {}, std::move(leaf.name)};  // its descriptors closed
    if (cgroup_parent_ && keeper_available()) {
        doomed_leaves_.push_back(std::move(leaf.name));
        wake_keeper();
        return;
    }
    if (!cgroup_parent_ || remove_cgroup_leaf(*cgroup_parent_, leaf.name) != 0)
        stuck_leaves_.push_back(leaf.name);
}

// ---------------------------------------------------------------------------------------------
// Helper executors: the spawner and the leaf keeper

struct exec_service::helper_link {
    std::mutex mutex;
    std::condition_variable idle;
    exec_service* service = nullptr;
    bool running = false;
};

void exec_service::post_job(const boost::asio::any_io_executor& ex, const std::shared_ptr<helper_link>& link,
                            void (exec_service::*work)()) {
    boost::asio::post(ex, [link, work] {
        std::unique_lock lock(link->mutex);
        if (!link->service) return;
        link->running = true;
        lock.unlock();
        (link->service->*work)();
        lock.lock();
        link->running = false;
        link->idle.notify_all();
    });
}

// Sets `stop` and clears `link` (both under mutex_): no job reaches the service through the
// link from here on; a job under way is waited for, outside mutex_ (the job takes it).
void exec_service::close_link(bool& stop, std::shared_ptr<helper_link>& link) {
    std::shared_ptr<helper_link> taken;
    {
        std::lock_guard lock(mutex_);
        stop = true;
        taken = std::move(link);
    }
    if (!taken) return;
    std::unique_lock lock(taken->mutex);
    taken->service = nullptr;
    taken->idle.wait(lock, [&] { return !taken->running; });
}

void exec_service::set_spawner(boost::asio::any_io_executor ex) {
    std::lock_guard lock(mutex_);
    if (spawner_stop_ || spawner_link_) return;
    spawner_ = std::move(ex);
    spawner_link_ = std::make_shared<helper_link>();
    spawner_link_->service = this;
}

// From here on spawns happen on the runs' own executors; a spawn under way is waited for, so
// that every child spawned is a live run's that shutdown() then sees.
void exec_service::stop_spawner() {
    close_link(spawner_stop_, spawner_link_);
}

// The leaf keeper

void exec_service::set_housekeeper(boost::asio::any_io_executor ex) {
    std::lock_guard lock(mutex_);
    if (keeper_stop_ || housekeeper_) return;
    housekeeper_ = std::move(ex);
    keeper_link_ = std::make_shared<helper_link>();
    keeper_link_->service = this;
}

// Under mutex_.
bool exec_service::keeper_has_work() const {
    if (!cgroup_parent_ || keeper_stop_) return false;
    return !doomed_leaves_.empty() ||
           (cgroup_usable_ && free_leaves_.size() + leaves_in_making_ < spare_target_);
}

// Under mutex_. One job at a time, posted only when there is work and none is queued (no
// post per spawn while the keeper keeps up).
void exec_service::wake_keeper() {
    if (!keeper_available() || keeper_posted_ || !keeper_has_work()) return;
    keeper_posted_ = true;
    post_job(housekeeper_, keeper_link_, &exec_service::keeper_work);
}

// On the housekeeper: works until nothing is left to do.
void exec_service::keeper_work() {
    std::unique_lock lock(mutex_);
    cgroup_parent parent;  // a descriptor of its own: the spawning thread may replace the owner directory
    unsigned generation = 0;
    while (keeper_has_work()) {
        if (generation != owner_dir_generation_ || !parent.dir) {
            parent.dir.reset(::fcntl(cgroup_parent_->dir.get(), F_DUPFD_CLOEXEC, 0));
            parent.path = cgroup_parent_->path;
            generation = owner_dir_generation_;
            if (!parent.dir) break;
        }
        if (!doomed_leaves_.empty()) {
            std::string name = std::move(doomed_leaves_.back());
            doomed_leaves_.pop_back();
            lock.unlock();
            // rmdir of a cgroup whose last process just exited can fail with EBUSY for a moment.
            int err = remove_cgroup_leaf(parent, name);
            for (int retry = 0; err == EBUSY && retry < 20; ++retry) {
                timespec pause{0, 1000000};
                ::nanosleep(&pause, nullptr);
                err = remove_cgroup_leaf(parent, name);
            }
            lock.lock();
            if (err != 0 && err != ENOENT) stuck_leaves_.push_back(std::move(name));
            continue;
        }
        std::string name = leaf_prefix_ + std::to_string(next_leaf_++);
        ++leaves_in_making_;
        lock.unlock();
        cgroup_leaf leaf;
        int err = make_cgroup_leaf(parent, name, leaf);
        lock.lock();
        --leaves_in_making_;
        if (err != 0) {
            // The spawning thread meets the same error and handles it (ENOENT, permissions).
            spare_target_ = 0;
            continue;
        }
        if (cgroup_usable_ && generation == owner_dir_generation_ && !keeper_stop_) {
            free_leaves_.push_back(std::move(leaf));
        } else {
            doomed_leaves_.push_back(std::move(leaf.name));  // removed here, or at shutdown
        }
    }
    keeper_posted_ = false;
}

// From here on leaves are made and removed inline; a job under way is waited for.
void exec_service::stop_keeper() {
    close_link(keeper_stop_, keeper_link_);
}

std::string exec_service::leaf_path(const cgroup_leaf& leaf) {
    std::lock_guard lock(mutex_);
    return cgroup_parent_ ? cgroup_parent_->path + "/" + leaf.name : leaf.name;
}

void exec_service::disable_cgroups() {
    std::lock_guard lock(mutex_);
    cgroup_usable_ = false;
    if (cgroup_parent_) {
        for (auto& leaf : free_leaves_) remove_cgroup_leaf(*cgroup_parent_, leaf.name);
    }
    free_leaves_.clear();
}

void exec_service::shutdown() {
    // A spawn under way on the spawner ends first: its child then belongs to a live run below.
    stop_spawner();
    // Runs still alive when the context goes away: their handlers are being destroyed without
    // being invoked, but their children must not outlive us, nor stay zombies.
    std::vector<run_op*> ops;
    {
        std::lock_guard lock(mutex_);
        while (!live_.empty()) {
            run_op& op = *live_.front()->owner;
            live_.erase(op.live_hook);
            if (op.queue_hook.linked) queue_.erase(op.queue_hook);
            ops.push_back(&op);
        }
    }
    for (run_op* op : ops) {
        op->emergency_stop();
        delete op;
    }
    wait_stack_free();  // every child was reaped: none is on the stack now
    stop_keeper();  // from here on leaves are removed inline
    std::lock_guard lock(mutex_);
    if (cgroup_parent_) {
        for (auto& leaf : free_leaves_) remove_cgroup_leaf(*cgroup_parent_, leaf.name);
        for (auto& name : doomed_leaves_) remove_cgroup_leaf(*cgroup_parent_, name);
        for (auto& name : stuck_leaves_) remove_cgroup_leaf(*cgroup_parent_, name);
    }
    free_leaves_.clear();
    doomed_leaves_.clear();
    stuck_leaves_.clear();
    remove_owner_dir();
}

}  // namespace agentctl::exec
