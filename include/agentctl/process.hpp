// Running one host process: spawn, bounded capture, timeout, cancellation, tree kill.
//
// async_run_process() is the only way the library starts a program. It never forks (the
// child is created with clone(CLONE_VM), docs/DESIGN.md "Spawn"), never blocks the calling
// thread waiting for a running child, installs no signal handler and reaps only the children
// it started.
//
// What the child gets: a new session (so its own process group, pgid = pid, and no
// controlling terminal: open("/dev/tty") fails with ENXIO instead of stopping it with
// SIGTTIN), stdin /dev/null (or a pipe carrying stdin_data), stdout and stderr pipes (blocking
// on its side), no other file descriptor (every fd >= 3 is close-on-exec, even foreign ones
// of an embedding application), default dispositions for every signal, an empty signal mask,
// exactly `env`, and `cwd_fd` as its working directory. The child execs the file that the
// executable path named when the spawn opened it (execveat on an O_PATH descriptor), so a
// rename over the path during the spawn cannot substitute another program; a #! script is
// exec'd by path after checking that the path still names that file (docs/DESIGN.md).
//
// The embedding application keeps its SIGCHLD handler; it receives SIGCHLD for our children
// too and must not reap children it did not start (a wait for any pid steals their status: the
// result then says so: exit_status_lost). With SIGCHLD ignored (SIG_IGN or
// SA_NOCLDWAIT) the kernel would reap them before their status can be read: runs then fail
// before spawning, with sigchld_ignored.
#pragma once

#include <agentctl/process_types.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution_context.hpp>

namespace agentctl {

namespace detail {
void async_run_process_impl(boost::asio::any_io_executor ex, process_request request,
                            boost::asio::any_completion_handler<void(process_result)> handler);
}

/// Optional. Lets the runs on `ctx` do their cgroup housekeeping on `helper` (a one-thread
/// pool, say) instead of on the thread that spawns: cgroup leaves are made there ahead of the
/// spawns, and leaves released for good are removed there (docs/DESIGN.md, "Executor"). The
/// library starts no thread; without a helper all of it happens inline, as a spawn needs it.
/// Call from `ctx`'s thread before its first run; `helper`'s context must outlive `ctx`.
void use_housekeeping_executor(boost::asio::execution_context& ctx, boost::asio::any_io_executor helper);

/// Optional. Lets the runs on `ctx` be spawned on `spawner` (a one-thread pool, say): a spawn
/// blocks its thread until the child has exec'd (a fraction of a millisecond on an idle
/// machine, tens under load, docs/DESIGN.md, "Executor"), and with a spawner that thread is
/// never `ctx`'s, so an application's own timers on `ctx` keep their pace. Everything else of
/// a run (reading, timeouts, killing, completion) stays on the run's executor. The library
/// starts no thread. Call from `ctx`'s thread before its first run; `spawner`'s context must
/// outlive `ctx` (destroying `ctx` waits for a spawn under way on it, then kills every tree).
void use_spawn_executor(boost::asio::execution_context& ctx, boost::asio::any_io_executor spawner);

/// Runs one process to completion.
///
/// Completion signature: void(process_result). Errors are values in the result. The handler
/// is invoked exactly once, through its associated executor, never from inside this call.
/// Spawns are queued per execution context and made a few per reactor turn, so that timers
/// and cancellations of other runs are serviced between them (or all on the spawner given by
/// use_spawn_executor); the timeout starts at the spawn.
///
/// Termination (timeout, cancellation, output cap): the whole tree is signalled — with a cgroup
/// leaf through cgroup.kill, otherwise kill(-pgid) plus pidfd signals to descendants that left
/// the group while their parent lived. With kill_grace > 0 the ladder is SIGTERM+SIGCONT, then
/// SIGKILL after kill_grace; it ends as soon as the leader exits. An output cap passed kills at
/// once. Once the leader has exited, the pipes are read for at most drain_grace, then whatever
/// is left of the tree is killed, the leader is reaped and the operation completes: completion
/// never waits on a descendant. Output captured before a timeout or cancellation is returned.
///
/// Cancellation (the handler's associated slot; emit it from the executor's thread): terminal
/// kills the tree with SIGKILL at once; partial and total run the ladder. The operation then
/// completes with outcome `cancelled` and the output captured so far. Before the spawn,
/// cancellation completes at once and nothing is spawned. After the leader has exited on its
/// own, cancellation only cuts the drain short: the outcome stays `exited`. Repeated
/// cancellation is harmless.
///
/// Thread safety: call from the executor's thread; the operation runs on `ex`, an io_context
/// executor or a strand of one. Runs on different strands of one context may proceed in
/// parallel. Destroying the io_context with runs in flight kills and reaps their trees.

template <typename Token>
auto async_run_process(boost::asio::any_io_executor ex, process_request request, Token&& token) {
    return boost::asio::async_initiate<Token, void(process_result)>(
        [](auto handler, boost::asio::any_io_executor e, process_request r) {
            detail::async_run_process_impl(std::move(e), std::move(r), std::move(handler));
        },
        token, std::move(ex), std::move(request));
}

}  // namespace agentctl
