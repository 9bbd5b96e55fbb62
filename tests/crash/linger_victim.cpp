// linger_victim: an owner that leaves a program running at its clean exit on purpose, as the
// CLI leaves an allocation worker's srun after the worker's bye (docs/WORKER.md, "The end of a
// run"; the watchdog's side: docs/CRASH_SAFETY.md). It starts the watchdog, then
//     sh -c "/bin/sleep SECONDS; : NONCE"
// as a channel (its own session), leaves it running (exec::channel::leave_running), says
// clean_exit() and exits 0 at once. The nonce comes from $AGENTCTL_TEST_NONCE, not argv.
// With `reap`, it first waits SECONDS + 0.5 s and starts another channel, as an embedding
// application's next run does, and exits 4 if the program is then an unreaped zombie.
//
//   linger_victim SECONDS REPORT [reap]
#include "exec/channel.hpp"

#include <agentctl/watchdog.hpp>

#include <boost/asio/io_context.hpp>

#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
    if (argc != 3 && !(argc == 4 && std::string(argv[3]) == "reap")) return 2;
    agentctl::watchdog_options options;
    options.report_path = argv[2];
    std::string error;
    auto wd = agentctl::watchdog::start(options, error);
    if (!wd) {
        std::fprintf(stderr, "linger_victim: %s\n", error.c_str());
        return 1;
    }
    boost::asio::io_context io;
    wd->observe(io);
    const char* nonce = std::getenv("AGENTCTL_TEST_NONCE");
    std::string script = std::string("/bin/sleep ") + argv[1] + "; : " + (nonce ? nonce : "");
    auto started = agentctl::exec::channel::start(io.get_executor(), {"/bin/sh", {"sh", "-c", script}, {}});
    if (!started) {
        std::fprintf(stderr, "linger_victim: %s\n", started.error().message.c_str());
        return 1;
    }
    if (!(*started)->leave_running()) {
        std::fprintf(stderr, "linger_victim: the watchdog does not see to what is left\n");
        return 1;
    }
    pid_t program = (*started)->pid();
    started->reset();
    if (argc == 4) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(static_cast<long>(std::atof(argv[1]) * 1000) + 500));
        auto next = agentctl::exec::channel::start(io.get_executor(), {"/bin/true", {"true"}, {}});
        if (!next) return 1;
        next->reset();
        siginfo_t si{};
        if (::waitid(P_PID, static_cast<id_t>(program), &si, WEXITED | WNOHANG | WNOWAIT) == 0) {
            std::fprintf(stderr, "linger_victim: the program was left unreaped (pid %d)\n", si.si_pid);
            return 4;
        }
        if (errno != ECHILD) return 5;
    }
    return wd->clean_exit() ? 0 : 3;
}
