// Per-execution_context state of the executor: the spawn queue and its pump, the clone stack,
// /dev/null, the cgroup leaves, what the kernel turned out to support, and the live runs
// (so that destroying the io_context still kills and reaps every child).
#pragma once

#include "exec/observer.hpp"
#include "exec/spawn.hpp"
#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <agentctl/process.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution_context.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace agentctl::exec {

class run_op;

/// A node of an intrusive doubly linked list of runs (O(1) removal on cancellation).
struct list_hook {
    explicit list_hook(run_op* o) : owner(o) {}
    run_op* const owner;
    list_hook* prev = nullptr;
    list_hook* next = nullptr;
    bool linked = false;
};

class hook_list {
public:
    void push_back(list_hook& h) {
        h.prev = tail_;
        h.next = nullptr;
        (tail_ ? tail_->next : head_) = &h;
        tail_ = &h;
        h.linked = true;
        ++size_;
    }
    void erase(list_hook& h) {
        (h.prev ? h.prev->next : head_) = h.next;
        (h.next ? h.next->prev : tail_) = h.prev;
        h.prev = h.next = nullptr;
        h.linked = false;
        --size_;
    }
    list_hook* front() const { return head_; }
    bool empty() const { return head_ == nullptr; }
    std::size_t size() const { return size_; }

private:
    list_hook* head_ = nullptr;
    list_hook* tail_ = nullptr;
    std::size_t size_ = 0;
};

class exec_service : public boost::asio::execution_context::service {
public:
    static boost::asio::execution_context::id id;

    explicit exec_service(boost::asio::execution_context& ctx);
    ~exec_service() override;

    /// Registers a run so that shutdown() can kill its tree.
    void attach(run_op& op);
    void detach(run_op& op);

    /// Queues a run for spawning; the pump runs on the spawner where there is one (all queued
    /// runs, one after the other), else on `ex`, a few per reactor turn.
    void enqueue(run_op& op, const boost::asio::any_io_executor& ex);

    /// Removes a queued run (cancellation before spawn). If the pump already took it, records
    /// `type` for take_pending_cancel() and returns false.
    bool withdraw(run_op& op, boost::asio::cancellation_type type);
    boost::asio::cancellation_type take_pending_cancel(run_op& op);

    // Used by the pump only, one spawn at a time.
    char* stack();
    /// Cleared by the kernel when the last child spawned without waiting for its exec has left
    /// our memory (clone_how::stack_in_use); wait_stack_free() waits for that before the stack
    /// and the pointer scratch are used again.
    pid_t* stack_in_use() { return &stack_in_use_; }
    void wait_stack_free();
    static constexpr std::size_t stack_size = 64 * 1024;
    int dev_null(int& err);

    /// The spawn window (docs/DESIGN.md, "The child's descriptor table"): a few descriptors at
    /// the low end of our table, /dev/null while unused. A spawn puts the child's own
    /// descriptors there (stdin, stdout, stderr, the executable, the working directory), so
    /// that the child, sharing our table until its first system call, copies only the table
    /// below the window's end instead of the descriptors of every run in flight.
    static constexpr int window_slots = 5;
    using window_fds = std::array<int, window_slots>;
    /// Puts each of `fds` (-1: none) in its slot for `owner` and writes the slot numbers to
    /// `slots` (-1 where none). Returns the end below which the child keeps its copy of the
    /// table, or 0 without a window: the child then gets `fds` and a copy of the whole table.
    /// The previous owner's child must have left our table (wait_stack_free(), or a spawn
    /// that waited for its exec). Called by the pump only.
    int fill_window(const void* owner, const window_fds& fds, window_fds& slots);
    /// /dev/null again in every slot, if `owner` still holds the window: its child has left
    /// our table (exec'd or exited), and our copies of its pipe ends must not delay their EOF.
    void release_window(const void* owner);
    /// For tests: the descriptor of slot `i`; -1 before the first spawn, or without a window.
    int window_slot(int i) {
        std::lock_guard lock(window_mutex_);
        return window_[static_cast<std::size_t>(i)].get();
    }
    int proc_fd() const { return proc_fd_.get(); }

    /// Whether the kernel lists children in /proc (a cheap walk of one tree).
    bool children_files() const { return children_files_; }
    /// A table of all processes at most `snapshot_age` old: where the kernel cannot list a
    /// process's children, finding a tree costs a pass over /proc, which kills that come
    /// together (a deadline shared by many runs, cancelling a whole batch) then share.
    std::shared_ptr<const proc_table> proc_snapshot();
    static constexpr std::chrono::milliseconds snapshot_age{10};
    /// Copies the path, argv and environment of a spawn into the service's scratch and returns
    /// the copy of the path; `argv` and `envp` then give the copies, each list ends with a null.
    /// The child reads them until it leaves our memory: call after wait_stack_free(). Being the
    /// same buffer every spawn, its pages are ones the kernel has read before (docs/DESIGN.md,
    /// "Spawn scratch").
    const char* stage(const std::string& path, const std::vector<std::string>& argv,
                      const std::vector<std::string>& env);
    char* const* staged_argv() const { return pointers_.data(); }
    char* const* staged_envp() const { return pointers_.data() + staged_argc_ + 1; }

    /// A buffer for bytes read past a cap: their content is never looked at.
    std::span<char> discard_buffer() { return {discard_.get(), discard_size}; }

    // Cgroup leaves (thread-safe). They live in one owner directory, agentctl@PID-START-PIDNS,
    // beneath our own cgroup (shared by every exec_service of this process), so that one
    // cgroup.kill on it ends every tree should the process die (docs/CRASH_SAFETY.md).
    std::optional<cgroup_leaf> acquire_leaf();
    /// Pools the leaf if `reusable` (empty and never killed), else removes it: on the leaf
    /// keeper's thread where it runs, as are leaves pooled beyond what the spawns ahead need.
    void release_leaf(cgroup_leaf leaf, bool reusable);
    /// The absolute path of a leaf handed out by acquire_leaf().
    std::string leaf_path(const cgroup_leaf& leaf);
    /// Joining a leaf failed (no permission on this host): stop trying.
    void disable_cgroups();
    /// Where leaves are made ahead and removed (agentctl::use_housekeeping_executor).
    void set_housekeeper(boost::asio::any_io_executor ex);
    /// Where the spawns happen (agentctl::use_spawn_executor).
    void set_spawner(boost::asio::any_io_executor ex);

    /// Who is told about the trees started from now on (the watchdog); null: nobody.
    void set_observer(std::shared_ptr<tree_observer> observer);
    std::shared_ptr<tree_observer> observer();

    /// Whether Asio's reactor exists for this context (see async_run_process_impl).
    bool reactor_ready() const { return reactor_ready_.load(std::memory_order_acquire); }
    void reactor_created() { reactor_ready_.store(true, std::memory_order_release); }

    // What the kernel supports, learned on the way.
    bool clone3_supported() const { return clone3_.load(std::memory_order_relaxed); }
    void clone3_refused() { clone3_.store(false, std::memory_order_relaxed); }
    bool clone_pidfd_supported() const { return clone_pidfd_.load(std::memory_order_relaxed); }
    void clone_pidfd_refused() { clone_pidfd_.store(false, std::memory_order_relaxed); }
    bool pidfd_supported() const { return pidfd_.load(std::memory_order_relaxed); }
    void pidfd_refused() { pidfd_.store(false, std::memory_order_relaxed); }

private:
    void shutdown() override;
    void pump();
    // Jobs posted to a helper executor (the housekeeper, the spawner) reach the service only
    // through a link, which the service clears at shutdown (waiting for a job under way): a
    // job that runs later, or never, touches nothing that is gone.
    struct helper_link;
    void post_job(const boost::asio::any_io_executor& ex, const std::shared_ptr<helper_link>& link,
                  void (exec_service::*work)());
    void close_link(bool& stop, std::shared_ptr<helper_link>& link);

    static constexpr std::size_t discard_size = 64 * 1024;
    static constexpr int spawns_per_turn = 1;

    std::mutex mutex_;
    hook_list queue_;
    hook_list live_;
    bool pump_scheduled_ = false;
    boost::asio::any_io_executor pump_ex_;

    std::unique_ptr<char[]> stack_;
    pid_t stack_in_use_ = 0;
    std::unique_ptr<char[]> discard_;
    std::vector<char*> pointers_;
    std::vector<char> text_;  ///< what pointers_ point into: never shrunk
    std::size_t staged_argc_ = 0;
    unique_fd dev_null_;
    unique_fd proc_fd_;

    std::mutex window_mutex_;  // the pump fills the window; any run's thread releases it
    std::array<unique_fd, window_slots> window_;
    std::array<bool, window_slots> window_busy_{};  ///< holds something else than /dev/null
    const void* window_owner_ = nullptr;
    int window_end_ = 0;  ///< 0: not reserved yet, or unusable (-1)
    void close_window();
    bool children_files_ = false;
    std::shared_ptr<const proc_table> snapshot_;

    bool open_owner_dir();
    void remove_owner_dir();

    bool cgroup_probed_ = false;
    std::optional<cgroup_parent> cgroup_base_;    ///< our own cgroup
    std::optional<cgroup_parent> cgroup_parent_;  ///< the owner directory beneath it, holding the leaves
    std::string owner_dir_name_;
    bool cgroup_usable_ = false;
    std::shared_ptr<tree_observer> observer_;
    std::vector<cgroup_leaf> free_leaves_;
    std::vector<std::string> stuck_leaves_;  ///< could not be removed when released; retried at shutdown
    std::string leaf_prefix_;
    unsigned next_leaf_ = 0;
    unsigned owner_dir_generation_ = 0;  ///< counts open_owner_dir(): the keeper's copy is current

    // The leaf keeper (docs/DESIGN.md, "Executor", Containment): where the application gave
    // a housekeeping executor (set_housekeeper; the library starts no thread), leaves are made
    // there ahead of the spawns (the pool is kept at spare_target_, which doubles, up to
    // max_spares, each time a spawn found it empty; a spare holds one fd, within
    // fit_jobs_to_fd_limit's reserve) and released ones removed there, so that
    // mkdir and rmdir leave the thread that spawns. State under mutex_; the system calls
    // outside it. Without a housekeeper, leaves are made and removed inline.
    void wake_keeper();
    void keeper_work();
    void stop_keeper();
    bool keeper_has_work() const;
    bool keeper_available() const { return housekeeper_ && !keeper_stop_; }
    static constexpr std::size_t max_spares = 32;
    boost::asio::any_io_executor housekeeper_;
    std::shared_ptr<helper_link> keeper_link_;
    bool keeper_posted_ = false;
    bool keeper_stop_ = false;
    std::size_t spare_target_ = 0;
    std::size_t leaves_in_making_ = 0;
    std::vector<std::string> doomed_leaves_;  ///< released for good, for the keeper to remove

    // The spawner (docs/DESIGN.md, "Executor", Spawn): where the application gave a spawn
    // executor (set_spawner), the pump runs there and spawns every queued run in turn, so that
    // the wait of each spawn for its child's exec blocks that thread, never the runs' own.
    void spawner_work();
    void stop_spawner();
    bool spawner_available() const { return spawner_link_ && !spawner_stop_; }
    boost::asio::any_io_executor spawner_;
    std::shared_ptr<helper_link> spawner_link_;
    bool spawner_stop_ = false;

    std::atomic<bool> reactor_ready_{false};
    std::atomic<bool> clone3_{clone3_built()};
    std::atomic<bool> clone_pidfd_{true};
    std::atomic<bool> pidfd_{true};
};

}  // namespace agentctl::exec
