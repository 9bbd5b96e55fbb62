/* spawnbench: the physical limit of an engine-like process runner on this machine.
 *
 * One thread, one epoll loop. Each task is spawned with posix_spawn into its own process
 * group with an empty environment, stdin on /dev/null, stdout and stderr on pipes, default
 * SIGPIPE and an empty signal mask; it is watched through a pidfd and reaped with
 * waitid(P_PIDFD, WNOHANG). Output is captured into per-slot buffers that are reused from
 * task to task (a slot is one of the J concurrency slots) and capped per stream. A deadline
 * per task kills its process group. The README's Performance section has the measurements this
 * program reproduces; bench/peers.sh runs it against the peers.
 *
 * Prints one JSON line on stdout. Exit 0 when every task was spawned, 1 on spawn errors or
 * a runtime failure, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { k_out = 0, k_err = 1, k_pid = 2, k_fds = 3 };

/* Large enough to empty a 1 MiB pipe in one read once a stream is past its cap. */
enum { scratch_size = 1 << 20, first_chunk = 64 << 10, max_events = 256 };

struct options {
    long n;
    long j;
    double timeout_s; /* 0: no deadline */
    bool absolute;    /* one common deadline (start + timeout) instead of spawn + timeout */
    size_t cap;       /* per stream; 0: read and discard */
    int pipe_size;    /* F_SETPIPE_SZ; 0: kernel default */
    long batch;       /* spawns per loop turn; 0: fill every free slot */
    bool kill_pidfd;  /* pidfd_send_signal to the leader instead of kill(-pgid) */
    const char* path;
    char** argv;
};

/* Grows geometrically up to the cap and is kept for the slot's next task. */
struct buffer {
    char* data;
    size_t len; /* <= alloc <= cap */
    size_t alloc;
};

struct slot {
    int fd[k_fds]; /* -1 once closed */
    pid_t pid;
    long task; /* -1 when the slot is free */
    bool killed;
    struct buffer buf[2];
};

struct stats {
    long exit_zero, exit_nonzero, signaled, killed, spawn_errors;
    long pipes_abandoned, spurious_wakeups, read_errors;
    uint64_t bytes_captured, bytes_dropped;
};

struct bench {
    struct options opt;
    int epoll_fd;
    int devnull;
    posix_spawnattr_t attr;
    char* envp[1];
    struct slot* slots;
    long* free_slots;
    long free_count;
    /* Deadlines are set at spawn, in task order, from one constant timeout, so they are
       non-decreasing by task index and a FIFO over task indices is an exact timer queue. */
    int64_t* deadline_ns;
    long* task_slot; /* -1 once the task is done */
    long next_task;  /* next task to spawn */
    long timer_head; /* oldest spawned task whose deadline has not been handled */
    long done;
    int64_t start_ns;
    double* latency_ms; /* deadline -> reaped, one per killed task */
    long latency_count;
    char* scratch;
    struct stats st;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char* what) {
    fprintf(stderr, "spawnbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(void) {
    fprintf(stderr,
            "usage: spawnbench [-n N] [-j J] [-t SECONDS] [-A] [-c CAP] [-p PIPE_SIZE] [-b B]\n"
            "                  [-k pgrp|pidfd] -- PROGRAM [ARG...]\n"
            "  -n N        tasks to run (default 1000)\n"
            "  -j J        tasks in flight at most (default 64)\n"
            "  -t SECONDS  deadline per task, from its spawn; kills its process group (default: none)\n"
            "  -A          one absolute deadline for all tasks: start + SECONDS (burst kill)\n"
            "  -c CAP      bytes captured per stream, the rest is read and dropped; 0 discards\n"
            "              everything (default 1048576)\n"
            "  -p BYTES    F_SETPIPE_SZ on each pipe (default: kernel default)\n"
            "  -b B        spawns per loop turn, 0 = fill every free slot (default 1)\n"
            "  -k HOW      kill with kill(-pgid) (pgrp, default) or pidfd_send_signal (pidfd)\n");
    exit(2);
}

static long parse_long(const char* s, long min) {
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min) usage();
    return v;
}

/* Resolves a bare name once, in the runner's PATH, so every spawn is a plain posix_spawn. */
static const char* resolve(const char* name) {
    if (strchr(name, '/') != NULL) return name;
    const char* path = getenv("PATH");
    if (path == NULL) path = "/usr/bin:/bin";
    static char full[4096];
    for (const char* p = path; *p != '\0';) {
        const char* colon = strchrnul(p, ':');
        int len = (int)(colon - p);
        if (len > 0 && p[0] == '/') {
            snprintf(full, sizeof full, "%.*s/%s", len, p, name);
            if (access(full, X_OK) == 0) return full;
        }
        p = *colon == ':' ? colon + 1 : colon;
    }
    fprintf(stderr, "spawnbench: %s: not found in PATH\n", name);
    exit(2);
}

static struct options parse_options(int argc, char** argv) {
    struct options o = {.n = 1000, .j = 64, .cap = 1 << 20, .batch = 1};
    int c;
    while ((c = getopt(argc, argv, "+n:j:t:Ac:p:b:k:h")) != -1) {
        switch (c) {
            case 'n':
                o.n = parse_long(optarg, 1);
                break;
            case 'j':
                o.j = parse_long(optarg, 1);
                break;
            case 't': {
                char* end;
                o.timeout_s = strtod(optarg, &end);
                if (*end != '\0' || !(o.timeout_s > 0)) usage();
                break;
            }
            case 'A':
                o.absolute = true;
                break;
            case 'c':
                o.cap = (size_t)parse_long(optarg, 0);
                break;
            case 'p':
                o.pipe_size = (int)parse_long(optarg, 0);
                break;
            case 'b':
                o.batch = parse_long(optarg, 0);
                break;
            case 'k':
                if (strcmp(optarg, "pidfd") == 0) {
                    o.kill_pidfd = true;
                } else if (strcmp(optarg, "pgrp") != 0) {
                    usage();
                }
                break;
            default:
                usage();
        }
    }
    if (optind >= argc || (o.absolute && o.timeout_s == 0)) usage();
    if (o.j > o.n) o.j = o.n;
    o.argv = argv + optind;
    o.path = resolve(o.argv[0]);
    return o;
}

/* 1,000 tasks in flight hold 3,000 descriptors; the soft limit is often 1,024. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* A closed 0, 1 or 2 would be handed out by pipe2 and then clobbered by the file actions. */
static void ensure_std_fds(void) {
    for (int fd = 0; fd < 3; ++fd) {
        if (fcntl(fd, F_GETFD) == -1 && open("/dev/null", O_RDWR) == -1) die("open /dev/null");
    }
}

static void setup(struct bench* b) {
    const struct options* o = &b->opt;
    b->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (b->epoll_fd < 0) die("epoll_create1");
    b->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (b->devnull < 0) die("open /dev/null");

    sigset_t empty, deflt;
    sigemptyset(&empty);
    sigemptyset(&deflt);
    sigaddset(&deflt, SIGPIPE);
    if (posix_spawnattr_init(&b->attr) != 0 || posix_spawnattr_setpgroup(&b->attr, 0) != 0 ||
        posix_spawnattr_setsigmask(&b->attr, &empty) != 0 ||
        posix_spawnattr_setsigdefault(&b->attr, &deflt) != 0 ||
        posix_spawnattr_setflags(
            &b->attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) != 0) {
        die("posix_spawnattr");
    }
    b->envp[0] = NULL;

    b->slots = calloc((size_t)o->j, sizeof *b->slots);
    b->free_slots = calloc((size_t)o->j, sizeof *b->free_slots);
    b->deadline_ns = calloc((size_t)o->n, sizeof *b->deadline_ns);
    b->task_slot = calloc((size_t)o->n, sizeof *b->task_slot);
    b->latency_ms = calloc((size_t)o->n, sizeof *b->latency_ms);
    b->scratch = malloc(scratch_size);
    if (!b->slots || !b->free_slots || !b->deadline_ns || !b->task_slot || !b->latency_ms || !b->scratch) {
        die("calloc");
    }
    for (long i = 0; i < o->j; ++i) {
        struct slot* s = &b->slots[i];
        s->fd[k_out] = s->fd[k_err] = s->fd[k_pid] = -1;
        s->task = -1;
        b->free_slots[b->free_count++] = o->j - 1 - i;
    }
}

static void watch(struct bench* b, long slot, int kind, int fd) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)slot * k_fds + (uint64_t)kind};
    if (epoll_ctl(b->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl add");
}

/* A child that is still between vfork wake-up and close-on-exec holds a copy of this fd,
   which keeps the file description (and its epoll registration) alive after close():
   deregister explicitly first. */
static void unwatch_close(struct bench* b, struct slot* s, int kind) {
    epoll_ctl(b->epoll_fd, EPOLL_CTL_DEL, s->fd[kind], NULL);
    close(s->fd[kind]);
    s->fd[kind] = -1;
}

static void finish_task(struct bench* b, long slot, bool spawned) {
    struct slot* s = &b->slots[slot];
    for (int k = 0; k < 2; ++k) {
        b->st.bytes_captured += s->buf[k].len;
        s->buf[k].len = 0; /* the allocation stays with the slot */
    }
    if (!spawned) ++b->st.spawn_errors;
    b->task_slot[s->task] = -1;
    s->task = -1;
    s->killed = false;
    b->free_slots[b->free_count++] = slot;
    ++b->done;
}

/* One non-blocking read. Returns bytes read, 0 at EOF (or on error), -1 when empty. */
static ssize_t read_some(struct bench* b, struct slot* s, int kind) {
    struct buffer* buf = &s->buf[kind];
    size_t cap = b->opt.cap;
    char* dst = b->scratch;
    size_t room = scratch_size;
    bool keep = buf->len < cap;
    if (keep) {
        if (buf->len == buf->alloc) {
            size_t grown = buf->alloc == 0 ? first_chunk : buf->alloc * 2;
            if (grown > cap) grown = cap;
            char* p = realloc(buf->data, grown);
            if (p == NULL) die("realloc");
            buf->data = p;
            buf->alloc = grown;
        }
        dst = buf->data + buf->len;
        room = buf->alloc - buf->len;
    }
    ssize_t r = read(s->fd[kind], dst, room);
    if (r > 0) {
        if (keep) {
            buf->len += (size_t)r;
        } else {
            b->st.bytes_dropped += (uint64_t)r;
        }
        return r;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return -1;
    if (r < 0) ++b->st.read_errors;
    return 0;
}

static void on_pipe(struct bench* b, struct slot* s, int kind) {
    if (read_some(b, s, kind) == 0) unwatch_close(b, s, kind);
}

static void on_pidfd(struct bench* b, long slot) {
    struct slot* s = &b->slots[slot];
    siginfo_t si;
    si.si_pid = 0;
    /* WNOWAIT leaves the leader a zombie, so its process group id cannot be reused while
       the remnants are killed below. */
    if (waitid(P_PIDFD, (id_t)s->fd[k_pid], &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno == EINTR) return;
        die("waitid");
    }
    /* Readiness is a hint: nothing to reap yet, stay registered (level-triggered). */
    if (si.si_pid == 0) {
        ++b->st.spurious_wakeups;
        return;
    }
    /* The leader is gone: take what is buffered, but never wait for EOF, which a grandchild
       holding the pipe could delay forever; kill such remnants instead. */
    bool remnants = false;
    for (int k = 0; k < 2; ++k) {
        if (s->fd[k] < 0) continue;
        ssize_t r;
        while ((r = read_some(b, s, k)) > 0) {
        }
        if (r < 0) {
            ++b->st.pipes_abandoned;
            remnants = true;
        }
        unwatch_close(b, s, k);
    }
    if (remnants) kill(-s->pid, SIGKILL);
    if (waitid(P_PIDFD, (id_t)s->fd[k_pid], &si, WEXITED | WNOHANG) != 0) die("waitid");
    if (s->killed) {
        double ms = (double)(now_ns() - b->deadline_ns[s->task]) / 1e6;
        b->latency_ms[b->latency_count++] = ms;
    }
    if (si.si_code == CLD_EXITED) {
        if (si.si_status == 0) {
            ++b->st.exit_zero;
        } else {
            ++b->st.exit_nonzero;
        }
    } else {
        ++b->st.signaled;
    }
    unwatch_close(b, s, k_pid);
    finish_task(b, slot, true);
}

static void spawn_one(struct bench* b) {
    const struct options* o = &b->opt;
    long task = b->next_task++;
    long slot = b->free_slots[--b->free_count];
    struct slot* s = &b->slots[slot];
    s->task = task;
    b->task_slot[task] = slot;

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) die("pipe2");
    if (o->pipe_size > 0) {
        fcntl(out[0], F_SETPIPE_SZ, o->pipe_size);
        fcntl(err[0], F_SETPIPE_SZ, o->pipe_size);
    }
    /* Only the read ends: O_NONBLOCK on pipe2 would also reach the child's write ends. */
    if (fcntl(out[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) != 0) {
        die("fcntl O_NONBLOCK");
    }

    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, b->devnull, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, out[1], 1) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, err[1], 2) != 0) {
        die("posix_spawn_file_actions");
    }
    int64_t t = now_ns();
    int64_t timeout_ns = (int64_t)(o->timeout_s * 1e9);
    b->deadline_ns[task] = (o->absolute ? b->start_ns : t) + timeout_ns;
    pid_t pid;
    int rc = posix_spawn(&pid, o->path, &fa, &b->attr, o->argv, b->envp);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    close(err[1]);
    if (rc != 0) {
        close(out[0]);
        close(err[0]);
        finish_task(b, slot, false);
        return;
    }
    int pidfd = pidfd_open(pid, 0);
    if (pidfd < 0) die("pidfd_open");
    s->pid = pid;
    s->fd[k_out] = out[0];
    s->fd[k_err] = err[0];
    s->fd[k_pid] = pidfd;
    watch(b, slot, k_out, out[0]);
    watch(b, slot, k_err, err[0]);
    watch(b, slot, k_pid, pidfd);
}

/* Kills every spawned task whose deadline has passed; returns the next pending deadline
   or -1 when there is none. */
static int64_t service_timers(struct bench* b) {
    if (b->opt.timeout_s == 0) return -1;
    int64_t now = now_ns();
    while (b->timer_head < b->next_task) {
        long task = b->timer_head;
        long slot = b->task_slot[task];
        if (slot >= 0) {
            if (b->deadline_ns[task] > now) return b->deadline_ns[task];
            struct slot* s = &b->slots[slot];
            /* The leader is not reaped yet, so its pid and process group id are still ours. */
            if (b->opt.kill_pidfd) {
                pidfd_send_signal(s->fd[k_pid], SIGKILL, NULL, 0);
            } else {
                kill(-s->pid, SIGKILL);
            }
            s->killed = true;
            ++b->st.killed;
        }
        ++b->timer_head;
    }
    return -1;
}

static void run(struct bench* b) {
    const struct options* o = &b->opt;
    struct epoll_event events[max_events];
    b->start_ns = now_ns();
    while (b->done < o->n) {
        /* Bounded spawning per turn keeps deadlines serviced while the pool fills. */
        for (long i = 0; (o->batch == 0 || i < o->batch) && b->free_count > 0 && b->next_task < o->n; ++i) {
            spawn_one(b);
        }
        int64_t next = service_timers(b);
        struct timespec ts = {0, 0};
        struct timespec* tsp = NULL;
        if (b->free_count > 0 && b->next_task < o->n) {
            tsp = &ts;
        } else if (next >= 0) {
            int64_t wait = next - now_ns();
            if (wait < 0) wait = 0;
            ts.tv_sec = wait / 1000000000;
            ts.tv_nsec = wait % 1000000000;
            tsp = &ts;
        }
        if (b->done == o->n) break;
        int n = epoll_pwait2(b->epoll_fd, events, max_events, tsp, NULL);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_pwait2");
        }
        for (int i = 0; i < n; ++i) {
            long slot = (long)(events[i].data.u64 / k_fds);
            int kind = (int)(events[i].data.u64 % k_fds);
            struct slot* s = &b->slots[slot];
            /* An earlier event in this batch may have finished the task; slots are only
               reused by the next turn's spawns. */
            if (s->fd[kind] < 0) continue;
            if (kind == k_pid) {
                on_pidfd(b, slot);
            } else {
                on_pipe(b, s, kind);
            }
        }
        service_timers(b);
    }
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const double* v, long n, double p) {
    long rank = (long)(p * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

static void print_json_string(const char* s) {
    putchar('"');
    for (; *s != '\0'; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static void report(const struct bench* b, double wall_s) {
    const struct options* o = &b->opt;
    const struct stats* st = &b->st;
    printf("{\"bench\":\"spawnbench\",\"program\":");
    print_json_string(o->path);
    printf(
        ",\"n\":%ld,\"j\":%ld,\"timeout_s\":%g,"
        "\"absolute_deadline\":%s,\"batch\":%ld,\"cap\":%zu,\"pipe_size\":%d,\"kill\":\"%s\","
        "\"wall_s\":%.6f,\"tasks_per_s\":%.1f,\"bytes_captured\":%" PRIu64 ",\"bytes_dropped\":%" PRIu64
        ",\"captured_mb_per_s\":%.1f,",
        o->n, o->j, o->timeout_s, o->absolute ? "true" : "false", o->batch, o->cap, o->pipe_size,
        o->kill_pidfd ? "pidfd" : "pgrp", wall_s, (double)o->n / wall_s, st->bytes_captured,
        st->bytes_dropped, (double)st->bytes_captured / 1e6 / wall_s);
    printf(
        "\"exit_zero\":%ld,\"exit_nonzero\":%ld,\"signaled\":%ld,\"killed\":%ld,"
        "\"spawn_errors\":%ld,\"pipes_abandoned\":%ld,\"spurious_wakeups\":%ld,\"read_errors\":%ld,",
        st->exit_zero, st->exit_nonzero, st->signaled, st->killed, st->spawn_errors, st->pipes_abandoned,
        st->spurious_wakeups, st->read_errors);
    if (b->latency_count == 0) {
        printf("\"latency_ms\":null}\n");
        return;
    }
    qsort(b->latency_ms, (size_t)b->latency_count, sizeof *b->latency_ms, cmp_double);
    printf("\"latency_ms\":{\"count\":%ld,\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f}}\n", b->latency_count,
           percentile(b->latency_ms, b->latency_count, 0.50),
           percentile(b->latency_ms, b->latency_count, 0.99), b->latency_ms[b->latency_count - 1]);
}

int main(int argc, char** argv) {
    struct bench b = {.opt = parse_options(argc, argv)};
    ensure_std_fds();
    raise_fd_limit();
    setup(&b);
    run(&b);
    double wall_s = (double)(now_ns() - b.start_ns) / 1e9;
    report(&b, wall_s);
    return b.st.spawn_errors == 0 ? 0 : 1;
}
