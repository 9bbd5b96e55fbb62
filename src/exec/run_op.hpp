// One async_run_process operation: the one callback state machine of the library, on the
// caller's executor. Everything above src/exec is coroutines; this stays callbacks because it
// is the hot path (one per process, ~100 µs of budget each) and its states are few.
//
//   waiting ──spawn──> running ──timeout/cancel──> terminating ──grace──> killing
//                         │  (SIGTERM+SIGCONT, grace)      │ (SIGKILL)       │
//                         └───────── leader exited ────────┴─────────────────┘
//                                          v
//                     draining (pipes read until EOF, at most drain_grace)
//                                          v
//     finishing (kill what is left, wait for the cgroup to empty, reap, complete)
//
// Transitions (phase, event -> what happens, next phase):
//
//   waiting      cancel                 withdrawn from the spawn queue, nothing spawned   -> finishing
//   waiting      spawned                pipes, pidfd and deadline armed                   -> running
//   waiting      spawn failed           spawn_failed with the failing step                -> finishing
//   running      leader exited          EOF of both pipes or drain_grace 0: finish()      -> finishing
//                                       else the drain timer                              -> draining
//   running      deadline / cancel      (leader not exited) kill_grace > 0: SIGTERM+SIGCONT -> terminating
//                                       kill_grace 0, terminal cancel: SIGKILL the tree   -> killing
//   running      output cap passed      SIGKILL the tree at once                          -> killing
//   terminating  grace timer            SIGKILL the tree                                  -> killing
//   terminating  leader exited          as for running                                    -> draining
//   killing      leader exited          as for running                                    -> draining
//   draining     both pipes at EOF, drain timer, any cancel   finish()                    -> finishing
//   finishing    tree gone, no handler pending   reap the leader, release, complete       (end)
//
// A deadline that fires when waitid already shows the leader exited is an exit, not a
// timeout. A cancellation after the leader exited only cuts the drain short.
#pragma once

#include "exec/service.hpp"
#include "exec/spawn.hpp"
#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <agentctl/process.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/string.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl::exec {

class run_op {
public:
    using handler_type = boost::asio::any_completion_handler<void(process_result)>;

    run_op(exec_service& svc, boost::asio::any_io_executor ex, process_request request, handler_type handler);
    ~run_op();
    run_op(const run_op&) = delete;
    run_op& operator=(const run_op&) = delete;

    /// Validates, connects the cancellation slot and queues the spawn. Never completes inline.
    void start();

    /// Called by the service's pump (possibly on another thread of the same context): creates
    /// the child, then continues on the run's executor.
    void spawn(const boost::asio::any_io_executor& pump_ex);

    /// The execution context is shutting down: SIGKILL the tree and reap, without completing.
    void emergency_stop();

    list_hook queue_hook{this};  ///< in exec_service's spawn queue (guarded by its mutex)
    list_hook live_hook{this};   ///< in exec_service's list of runs (guarded by its mutex)
    boost::asio::cancellation_type pending_cancel = boost::asio::cancellation_type::none;  ///< ditto

private:
    enum class phase { waiting, running, terminating, killing, draining, finishing };
    enum class timer_kind { deadline, grace, drain, tree_wait };

    struct stream_state {
        explicit stream_state(const boost::asio::any_io_executor& ex) : sd(ex) {}
        boost::asio::posix::stream_descriptor sd;
        /// The captured bytes; room to read into is its capacity past size(), never filled in.
        boost::json::string buf;
        std::uint64_t cap = 0;
        bool open = false;
        bool pipe_grown = false;
        const char* name = "";
    };

    // Spawning (pump thread).
    bool prepare_and_clone(bool overlap_exec);
    void continue_after_spawn();

    // Running (the run's executor).
    void start_output(stream_state& s);
    void on_readable(stream_state& s, const boost::system::error_code& ec);
    void drain(stream_state& s);
    char* room_for(stream_state& s, std::size_t budget, std::size_t& len);
    void record_overflow(stream_state& s, std::uint64_t stream_room, std::uint64_t combined_room);
    void close_stream(stream_state& s);
    void start_stdin();
    void on_stdin_writable(const boost::system::error_code& ec);
    void watch_exit();
    void on_exit_event(const boost::system::error_code& ec);
    bool check_exited();
    void leader_exited();
    void arm_timer(timer_kind kind, std::chrono::steady_clock::duration d);
    void on_timer(std::uint64_t gen, const boost::system::error_code& ec);
    void on_cancel(boost::asio::cancellation_type type);
    void handle_cancel(boost::asio::cancellation_type type);
    void set_cause(process_outcome cause);
    void terminate(bool kill_now);
    void scan_members();
    void signal_tree(int sig);
    void kill_tree();
    void kill_members();
    void note_killed(pid_t pid);
    void finish();
    bool tree_gone();
    void poll_tree_gone();
    void reap_and_release();
    void maybe_complete();
    void complete();
    bool handler_entry();

    exec_service& svc_;
    boost::asio::any_io_executor ex_;
    process_request req_;
    handler_type handler_;
    boost::asio::any_completion_executor handler_work_;
    process_result result_;
    std::optional<process_outcome> cause_;

    phase phase_ = phase::waiting;
    unsigned pending_ = 0;  ///< asynchronous operations whose handler has not run yet
    bool in_cancel_ = false;
    bool retry_without_cgroup_ = false;

    // Spawn outcome, handed from the pump to the run's executor.
    std::optional<spawn_failure> spawn_failure_;
    /// What the child reads until its exec, and where it reports a failed step. With
    /// exec_unconfirmed_ (the spawn did not wait for the exec), it may still be doing so: the
    /// plan and the strings it points to (req_) stay as they are until the leader has exited.
    child_plan plan_;
    bool exec_unconfirmed_ = false;
    unique_fd out_fd_, err_fd_, in_fd_, pidfd_fd_;
    std::chrono::steady_clock::time_point started_;

    pid_t pid_ = -1;
    std::uint64_t start_lo_ = 0, start_hi_ = 0;  ///< the boot clock around the clone
    bool use_pidfd_ = true;
    bool exited_ = false;
    bool reaped_ = false;  ///< by us, or (ECHILD) by someone else: the pgid may be reused now
    std::optional<cgroup_leaf> leaf_;
    bool leaf_empty_ = false;
    bool leaf_killed_ = false;   ///< cgroup.kill was written to it: never reuse it (see reap_and_release)
    std::vector<pid_t> killed_;  ///< distinct processes other than the leader we signalled
    std::vector<proc_stat> members_;           ///< process-group mode: tree members found, not yet SIGKILLed
    std::vector<unique_fd> dying_;             ///< pidfds of SIGKILLed members, until they are gone
    std::shared_ptr<tree_observer> observer_;  ///< told of a process-group leader until it is reaped

    stream_state out_;
    stream_state err_;
    std::optional<boost::asio::posix::stream_descriptor> stdin_sd_;
    std::size_t stdin_offset_ = 0;
    boost::asio::posix::stream_descriptor pidfd_sd_;
    std::optional<boost::asio::steady_timer> poll_timer_;
    std::chrono::milliseconds poll_delay_{1};

    boost::asio::steady_timer timer_;
    timer_kind timer_kind_ = timer_kind::deadline;
    std::uint64_t timer_gen_ = 0;
    bool waiting_tree_ = false;
    std::chrono::steady_clock::time_point tree_wait_started_;
    std::chrono::milliseconds tree_backoff_{1};
};

}  // namespace agentctl::exec
