// `agentctl worker`: the allocation worker's side of a connection (docs/WORKER.md). A driver of
// the same build (the Slurm backend's allocation mode) sends framed task requests on the
// worker's standard input; the worker runs each with the host executor exactly as a local run
// does and answers with framed results on its standard output.
#pragma once

namespace agentctl {

class watchdog;

/// What serve_worker() returned, as the process's exit status.
enum class worker_status : int {
    done = 0,        ///< the driver closed the connection with no task running
    connection = 3,  ///< refused the hello, a protocol error, a lost driver, SIGTERM/SIGINT,
                     ///< or the connection closed with tasks running (they were killed)
};

/// Serves one driver on file descriptors 0 (frames in) and 1 (frames out) until the
/// connection ends, then kills every task it started and waits until their trees are gone.
/// Diagnostics for people go to file descriptor 2. Takes the process over: moves the frame
/// output off fd 1 (which then points at /dev/null), asks for SIGTERM when its parent dies,
/// and handles SIGTERM and SIGINT as the end of the connection. For the `agentctl worker`
/// program only; never call it from an application that embeds the library. With `watch`, the
/// trees it starts are observed by that watchdog, so that they die with the worker even when
/// it is killed outright (SIGKILL, a node's OOM killer); the caller ends the watchdog cleanly
/// once this has returned.
worker_status serve_worker(watchdog* watch = nullptr);

/// Computes now what the worker's welcome needs and would otherwise compute on the hello (its
/// build digest: tens of milliseconds on a loaded machine), so that the program can overlap it
/// with the watchdog's start (docs/WORKER.md, "Handshake: the same build on both ends").
/// Starts no thread.
void prepare_worker();

}  // namespace agentctl
