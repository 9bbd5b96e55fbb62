// probe: a hostile or reporting child for the executor tests (docs/TESTING.md).
//
//   probe MODE [ARGS...] [--nonce TOKEN] [OPTIONS]
//
// Built statically and using nothing but libc, so that it can be copied into a scratch or
// busybox container image. `--nonce TOKEN` is ignored but stays in argv: the environment is
// cleared by the executor, so argv is the only tag that survives; forked helpers keep it
// (they do not exec). Output formats are line based and documented per mode below.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

namespace {

int g_argc;
char** g_argv;

[[noreturn]] void die(const char* what) {
    dprintf(2, "probe: %s: %s\n", what, strerror(errno));
    _exit(100);
}

[[noreturn]] void usage(const char* what) {
    dprintf(2, "probe: %s\n", what);
    _exit(101);
}

// Value of --name, or nullptr.
const char* option(const char* name) {
    for (int i = 2; i + 1 < g_argc; ++i) {
        if (strcmp(g_argv[i], name) == 0) return g_argv[i + 1];
    }
    return nullptr;
}

bool flag(const char* name) {
    for (int i = 2; i < g_argc; ++i) {
        if (strcmp(g_argv[i], name) == 0) return true;
    }
    return false;
}

// The n-th positional argument after the mode (options and their values skipped).
const char* positional(int n) {
    for (int i = 2; i < g_argc; ++i) {
        if (strncmp(g_argv[i], "--", 2) == 0) {
            // Options with a value; flags take none.
            if (strcmp(g_argv[i], "--setsid") != 0 && strcmp(g_argv[i], "--double-fork") != 0 &&
                strcmp(g_argv[i], "--ignore-signals") != 0 && strcmp(g_argv[i], "--then-read-stdin") != 0 &&
                strcmp(g_argv[i], "--echo") != 0) {
                ++i;
            }
            continue;
        }
        if (n-- == 0) return g_argv[i];
    }
    return nullptr;
}

void sleep_seconds(double s) {
    timespec ts;
    ts.tv_sec = static_cast<time_t>(s);
    ts.tv_nsec = static_cast<long>((s - static_cast<double>(ts.tv_sec)) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

void write_file(const char* path, const char* text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    if (!write_all(fd, text, strlen(text))) die(path);
    close(fd);
}

unsigned long long start_time(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[2048];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char* p = strrchr(buf, ')');
    if (p == nullptr) return 0;
    // Field 22 is the 20th after the closing parenthesis.
    for (int field = 0; field < 20 && p != nullptr; ++field) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, nullptr, 10) : 0;
}

// --pidfile-dir DIR: DIR/<pid> holds "<pid> <starttime>".
void write_pidfile() {
    const char* dir = option("--pidfile-dir");
    if (dir == nullptr) return;
    char path[4096];
    char text[64];
    snprintf(path, sizeof path, "%s/%d", dir, getpid());
    snprintf(text, sizeof text, "%d %llu\n", getpid(), start_time(getpid()));
    write_file(path, text);
}

int signal_number(const char* s) {
    struct {
        const char* name;
        int sig;
    } names[] = {{"INT", SIGINT},   {"TERM", SIGTERM}, {"HUP", SIGHUP},   {"ABRT", SIGABRT},
                 {"SEGV", SIGSEGV}, {"KILL", SIGKILL}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}};
    for (auto& n : names) {
        if (strcmp(s, n.name) == 0 || (strncmp(s, "SIG", 3) == 0 && strcmp(s + 3, n.name) == 0)) return n.sig;
    }
    return atoi(s);
}

// ----------------------------------------------------------------------------------------------

// sleep [S] [--pidfile-dir DIR]: sleeps S seconds (300 by default), after writing its pidfile.
int mode_sleep() {
    write_pidfile();
    const char* s = positional(0);
    sleep_seconds(s ? atof(s) : 300);
    return 0;
}

int mode_exit() {
    const char* n = positional(0);
    return n ? atoi(n) : 0;
}

int mode_signal_self() {
    const char* s = positional(0);
    if (s == nullptr) usage("signal-self SIG");
    int sig = signal_number(s);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
    if (sig == SIGSEGV) {
        volatile int* p = nullptr;
        *p = 1;
    }
    return 99;
}

// stop-self: stops itself with SIGSTOP (it stays stopped until SIGCONT), then sleeps 300 s.
int mode_stop_self() {
    raise(SIGSTOP);
    sleep_seconds(300);
    return 0;
}

volatile sig_atomic_t g_term_seen = 0;
int g_term_exit = 0;

void on_term_exit(int) {
    _exit(g_term_exit);
}
void on_term_flag(int) {
    g_term_seen = 1;
}

// trap-term ignore|exit N|slow-exit S [--marker PATH] [--term-marker PATH]: the marker is
// written after the handler is installed; then waits (300 s at most). With slow-exit, the
// term marker is written when SIGTERM arrives, before the slow exit.
int mode_trap_term() {
    const char* how = positional(0);
    if (how == nullptr) usage("trap-term ignore|exit N|slow-exit S");
    double slow = 0;
    if (strcmp(how, "ignore") == 0) {
        signal(SIGTERM, SIG_IGN);
    } else if (strcmp(how, "exit") == 0) {
        g_term_exit = positional(1) ? atoi(positional(1)) : 0;
        signal(SIGTERM, on_term_exit);
    } else if (strcmp(how, "slow-exit") == 0) {
        slow = positional(1) ? atof(positional(1)) : 1;
        signal(SIGTERM, on_term_flag);
    } else {
        usage("trap-term ignore|exit N|slow-exit S");
    }
    if (const char* marker = option("--marker")) write_file(marker, "ready\n");
    for (int i = 0; i < 3000 && !g_term_seen; ++i) sleep_seconds(0.1);
    if (g_term_seen) {
        // --term-marker tells the test that SIGTERM arrived and was handled.
        if (const char* marker = option("--term-marker")) write_file(marker, "term\n");
        sleep_seconds(slow);
        return 0;
    }
    return 0;
}

// fork-hold [--setsid] [--double-fork] [--hold stdout|stderr|both|none] [--pidfile-dir DIR]
//           [--leader exit|sleep|wait] [--leader-sleep S] [--child-sleep S]
//           [--write-interval-ms N] [--marker PATH]
// The leader forks a child (with --double-fork, the child forks the holder and exits); the
// holder optionally calls setsid(), keeps the chosen output fds (the others go to
// /dev/null), writes its pidfile and tells the leader it is ready. Then the leader writes the
// marker and exits (default), sleeps, or waits for its child; the holder sleeps (300 s by
// default), writing a line every N ms with --write-interval-ms.
int mode_fork_hold() {
    const char* hold = option("--hold") ? option("--hold") : "both";
    const char* leader = option("--leader") ? option("--leader") : "exit";
    double child_sleep = option("--child-sleep") ? atof(option("--child-sleep")) : 300;
    int interval = option("--write-interval-ms") ? atoi(option("--write-interval-ms")) : 0;
    write_pidfile();
    int ready[2];
    if (pipe(ready) != 0) die("pipe");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(ready[0]);
        if (flag("--double-fork")) {
            pid_t holder = fork();
            if (holder < 0) die("fork");
            if (holder != 0) _exit(0);
        }
        if (flag("--setsid") && setsid() < 0) die("setsid");
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        bool out = strcmp(hold, "stdout") == 0 || strcmp(hold, "both") == 0;
        bool err = strcmp(hold, "stderr") == 0 || strcmp(hold, "both") == 0;
        if (!out) dup2(null_fd, 1);
        if (!err) dup2(null_fd, 2);
        write_pidfile();
        if (!write_all(ready[1], "r", 1)) die("ready");
        close(ready[1]);
        struct timespec begin;
        clock_gettime(CLOCK_MONOTONIC, &begin);
        for (unsigned line = 0;; ++line) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double elapsed =
                static_cast<double>(now.tv_sec - begin.tv_sec) + (now.tv_nsec - begin.tv_nsec) / 1e9;
            if (elapsed >= child_sleep) break;
            if (interval > 0) {
                char text[64];
                int n = snprintf(text, sizeof text, "line %u\n", line);
                if (out) write_all(1, text, static_cast<size_t>(n));
                if (err) write_all(2, text, static_cast<size_t>(n));
                sleep_seconds(interval / 1000.0);
            } else {
                sleep_seconds(child_sleep - elapsed < 1 ? child_sleep - elapsed : 1);
            }
        }
        _exit(0);
    }
    close(ready[1]);
    char c;
    while (read(ready[0], &c, 1) < 0 && errno == EINTR) {
    }
    close(ready[0]);
    if (flag("--double-fork")) waitpid(child, nullptr, 0);
    if (const char* marker = option("--marker")) write_file(marker, "ready\n");
    if (strcmp(leader, "sleep") == 0) {
        sleep_seconds(option("--leader-sleep") ? atof(option("--leader-sleep")) : 300);
    } else if (strcmp(leader, "wait") == 0) {
        waitpid(child, nullptr, 0);
    }
    return 0;
}

// flood [--fd 1|2|both] [--bytes N|unlimited] [--pattern ascii|binary|invalid-utf8|no-newline|ansi]
//       [--chunk C] [--interval-ms N] [--ignore-signals] [--marker PATH] [--then-read-stdin]
//       [--then-sleep S]
// Writes N bytes (default unlimited) of the pattern in chunks of C bytes (default 64 KiB);
// with both fds, chunks alternate stderr first. --ignore-signals ignores SIGTERM and SIGPIPE.
// The marker is written after the first chunk. The pattern restarts with every chunk.
int mode_flood() {
    const char* fds = option("--fd") ? option("--fd") : "1";
    const char* bytes_opt = option("--bytes");
    bool unlimited = bytes_opt == nullptr || strcmp(bytes_opt, "unlimited") == 0;
    unsigned long long total = unlimited ? 0 : strtoull(bytes_opt, nullptr, 10);
    size_t chunk = option("--chunk") ? strtoull(option("--chunk"), nullptr, 10) : 65536;
    int interval = option("--interval-ms") ? atoi(option("--interval-ms")) : 0;
    const char* pattern = option("--pattern") ? option("--pattern") : "ascii";
    if (chunk == 0) usage("--chunk must be > 0");
    if (flag("--ignore-signals")) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
    }
    char* buf = static_cast<char*>(malloc(chunk));
    if (buf == nullptr) die("malloc");
    const char* ansi = "\x1b[31mred\x1b[0m\r\a\x1b]52;c;aGk=\a\n";
    const char* bad = "ok\xC0\x80\xED\xA0\x80\xFFok\n";
    for (size_t i = 0; i < chunk; ++i) {
        if (strcmp(pattern, "binary") == 0) {
            buf[i] = static_cast<char>(i & 0xff);
        } else if (strcmp(pattern, "invalid-utf8") == 0) {
            buf[i] = bad[i % strlen(bad)];
        } else if (strcmp(pattern, "no-newline") == 0) {
            buf[i] = 'x';
        } else if (strcmp(pattern, "ansi") == 0) {
            buf[i] = ansi[i % strlen(ansi)];
        } else {
            buf[i] = (i % 64 == 63) ? '\n' : static_cast<char>('a' + i % 26);
        }
    }
    bool both = strcmp(fds, "both") == 0;
    int fd = strcmp(fds, "2") == 0 ? 2 : 1;
    unsigned long long written = 0;
    for (unsigned long long n = 0; unlimited || written < total; ++n) {
        size_t len = unlimited || total - written > chunk ? chunk : static_cast<size_t>(total - written);
        int target = both ? (n % 2 == 0 ? 2 : 1) : fd;
        if (!write_all(target, buf, len)) return 3;
        if (n == 0) {
            if (const char* marker = option("--marker")) write_file(marker, "ready\n");
        }
        written += len;
        if (interval > 0) sleep_seconds(interval / 1000.0);
    }
    if (flag("--then-read-stdin")) {
        while (read(0, buf, chunk) > 0) {
        }
    }
    if (const char* s = option("--then-sleep")) sleep_seconds(atof(s));
    return 0;
}

// read-stdin [--echo]: reads stdin to EOF, then prints the byte count (or echoes the data).
int mode_read_stdin() {
    char buf[65536];
    unsigned long long total = 0;
    bool echo = flag("--echo");
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        total += static_cast<unsigned long long>(n);
        if (echo && !write_all(1, buf, static_cast<size_t>(n))) return 3;
    }
    if (!echo) dprintf(1, "%llu\n", total);
    return 0;
}

// report-fds: the open fds, space separated ("0 1 2").
int mode_report_fds() {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) die("/proc/self/fd");
    int own = dirfd(dir);
    bool first = true;
    char line[8192] = "";
    while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == own) continue;
        strncat(line, first ? "" : " ", sizeof line - strlen(line) - 1);
        strncat(line, e->d_name, sizeof line - strlen(line) - 1);
        first = false;
    }
    closedir(dir);
    dprintf(1, "%s\n", line);
    return 0;
}

// report-signals: the SigBlk, SigIgn and SigCgt lines of /proc/self/status.
int mode_report_signals() {
    FILE* f = fopen("/proc/self/status", "re");
    if (f == nullptr) die("/proc/self/status");
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "SigBlk:", 7) == 0 || strncmp(line, "SigIgn:", 7) == 0 ||
            strncmp(line, "SigCgt:", 7) == 0) {
            fputs(line, stdout);
        }
    }
    fclose(f);
    return 0;
}

// report-env: one environment entry per line.
int mode_report_env() {
    for (char** e = environ; *e; ++e) dprintf(1, "%s\n", *e);
    return 0;
}

// report-argv: every argv element (argv[0] included) in hex, one per line ("" for empty).
int mode_report_argv() {
    for (int i = 0; i < g_argc; ++i) {
        for (const unsigned char* p = reinterpret_cast<const unsigned char*>(g_argv[i]); *p; ++p) {
            dprintf(1, "%02x", *p);
        }
        dprintf(1, "\n");
    }
    return 0;
}

// report-cwd: getcwd(), or "error <errno>".
int mode_report_cwd() {
    char buf[8192];
    if (getcwd(buf, sizeof buf) == nullptr) {
        dprintf(1, "error %d\n", errno);
        return 0;
    }
    dprintf(1, "%s\n", buf);
    return 0;
}

// report-tty: "isatty A B C" for fds 0..2, then "tty ok" or "tty errno N".
int mode_report_tty() {
    dprintf(1, "isatty %d %d %d\n", isatty(0), isatty(1), isatty(2));
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        dprintf(1, "tty ok\n");
        close(fd);
    } else {
        dprintf(1, "tty errno %d\n", errno);
    }
    return 0;
}

// report-fdflags: "N nonblock|block" for fds 0..2.
int mode_report_fdflags() {
    for (int fd = 0; fd < 3; ++fd) {
        int fl = fcntl(fd, F_GETFL);
        dprintf(1, "%d %s\n", fd, fl < 0 ? "closed" : (fl & O_NONBLOCK) ? "nonblock" : "block");
    }
    return 0;
}

// report-ids: "pid P ppid P pgid P sid S uid U gid G", then the CapEff and NoNewPrivs lines.
int mode_report_ids() {
    dprintf(1, "pid %d ppid %d pgid %d sid %d uid %d gid %d\n", getpid(), getppid(), getpgid(0), getsid(0),
            getuid(), getgid());
    FILE* f = fopen("/proc/self/status", "re");
    if (f == nullptr) return 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "NoNewPrivs:", 11) == 0) fputs(line, stdout);
    }
    fclose(f);
    return 0;
}

// alloc MiB: allocates and touches MiB mebibytes, prints "ok".
int mode_alloc() {
    const char* m = positional(0);
    size_t bytes = (m ? strtoull(m, nullptr, 10) : 1) << 20;
    char* p = static_cast<char*>(malloc(bytes));
    if (p == nullptr) die("malloc");
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    dprintf(1, "ok\n");
    return 0;
}

// write-file PATH BYTES: creates PATH with BYTES bytes of 'x'.
int mode_write_file() {
    const char* path = positional(0);
    const char* n = positional(1);
    if (path == nullptr || n == nullptr) usage("write-file PATH BYTES");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (unsigned long long left = strtoull(n, nullptr, 10); left > 0;) {
        size_t len = left > sizeof buf ? sizeof buf : static_cast<size_t>(left);
        if (!write_all(fd, buf, len)) die(path);
        left -= len;
    }
    close(fd);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    g_argc = argc;
    g_argv = argv;
    if (argc < 2) usage("usage: probe MODE [ARGS...] [--nonce TOKEN]");
    struct {
        const char* name;
        int (*run)();
    } modes[] = {
        {"sleep", mode_sleep},
        {"exit", mode_exit},
        {"signal-self", mode_signal_self},
        {"stop-self", mode_stop_self},
        {"trap-term", mode_trap_term},
        {"fork-hold", mode_fork_hold},
        {"flood", mode_flood},
        {"read-stdin", mode_read_stdin},
        {"report-fds", mode_report_fds},
        {"report-signals", mode_report_signals},
        {"report-env", mode_report_env},
        {"report-argv", mode_report_argv},
        {"report-cwd", mode_report_cwd},
        {"report-tty", mode_report_tty},
        {"report-fdflags", mode_report_fdflags},
        {"report-ids", mode_report_ids},
        {"alloc", mode_alloc},
        {"write-file", mode_write_file},
    };
    for (auto& m : modes) {
        if (strcmp(argv[1], m.name) == 0) {
            int rc = m.run();
            fflush(stdout);
            return rc;
        }
    }
    usage("unknown mode");
}
