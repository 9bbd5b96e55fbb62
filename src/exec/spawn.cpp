#include "exec/spawn.hpp"

#include "exec/sys.hpp"

#include <linux/sched.h>
#include <sched.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace agentctl::exec {

namespace {

// MAX_ARG_STRLEN of the kernel: no single argv/env string may be longer (32 pages).
constexpr std::size_t max_arg_strlen = 32 * 4096;

// The child runs on the spawn stack, a heap block the sanitizers know nothing of, and never
// returns (execve or _exit): AddressSanitizer's frame bookkeeping there would leave stale
// poison for the next child to trip on (a false "stack-use-after-scope" in build-asan). So the
// child's own code is never instrumented, as a vfork child must not run hooks anyway.
#define AGENTCTL_CHILD_CODE __attribute__((no_sanitize("address", "undefined")))

// A system call that returns -errno and never writes errno. A child that does not suspend us
// (clone_how::wait_for_exec false) shares our memory and, through the thread pointer, the
// spawning thread's errno while that thread runs on: it must not write there.
AGENTCTL_CHILD_CODE inline long child_sys(long n, long a = 0, long b = 0, long c = 0, long d = 0,
                                          long e = 0) {
#if defined(__x86_64__)
    long ret;
    register long r10 asm("r10") = d;
    register long r8 asm("r8") = e;
    asm volatile("syscall"
                 : "=a"(ret)
                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                 : "rcx", "r11", "memory");
    return ret;
#else
    // Elsewhere the child always suspends us (clone_child), so errno is not shared.
    long ret = ::syscall(n, a, b, c, d, e);
    return ret < 0 ? -errno : ret;
#endif
}

template <typename T>
AGENTCTL_CHILD_CODE inline long arg(T value) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<long>(value);
    } else {
        return static_cast<long>(value);
    }
}

[[noreturn]] AGENTCTL_CHILD_CODE void child_fail(child_plan& plan, spawn_step step, long err) {
    plan.failed_errno = static_cast<int>(-err);
    plan.failed_step = static_cast<int>(step);
    for (;;) child_sys(SYS_exit_group, 127);
}

// The hex mask after `key` ("SigIgn:" or "SigCgt:") at the start of a line of `text`; false
// when it is not there whole.
AGENTCTL_CHILD_CODE bool status_mask(const char* text, long size, const char* key, std::uint64_t& mask) {
    for (long line = 0; line < size;) {
        long i = 0;
        while (key[i] != '\0' && line + i < size && text[line + i] == key[i]) ++i;
        if (key[i] == '\0') {
            long at = line + i;
            while (at < size && text[at] == '\t') ++at;
            std::uint64_t value = 0;
            int digits = 0;
            for (; at < size && digits < 16; ++at, ++digits) {
                char c = text[at];
                int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (v < 0) break;
                value = value << 4 | static_cast<std::uint64_t>(v);
            }
            if (digits != 16) return false;
            mask = value;
            return true;
        }
        while (line < size && text[line] != '\n') ++line;
        ++line;
    }
    return false;
}

}  // namespace

// One read of the child's own /proc/self/status instead of a sigaction call per signal (62
// system calls, each about a microsecond on a VM, with the parent blocked in the vfork
// meanwhile). Every signal when /proc cannot tell (not mounted, another namespace's, denied).
AGENTCTL_CHILD_CODE std::uint64_t signals_not_at_default() {
    constexpr std::uint64_t all = ~std::uint64_t{0};
    long fd = child_sys(SYS_openat, AT_FDCWD, arg("/proc/self/status"), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return all;
    char text[4096];
    long size = 0;
    while (size < static_cast<long>(sizeof text)) {
        long n = child_sys(SYS_read, fd, arg(text + size), static_cast<long>(sizeof text) - size);
        if (n <= 0) break;
        size += n;
    }
    child_sys(SYS_close, fd);
    std::uint64_t ignored = 0, caught = 0;
    if (!status_mask(text, size, "SigIgn:", ignored) || !status_mask(text, size, "SigCgt:", caught))
        return all;
    return ignored | caught;
}

namespace {

// The child shares our memory and runs on the spawn stack until execve: it only makes system
// calls (child_sys: errno is ours), takes no lock and allocates nothing.
AGENTCTL_CHILD_CODE int child_main(void* arg_ptr) {
    auto& plan = *static_cast<child_plan*>(arg_ptr);
    long rc = 0;
    // Still in our table (CLONE_FILES): leave it, keeping only its low end, before anything
    // else opens, dups or closes a descriptor. A failure here leaves the table untouched.
    if (plan.unshare_below > 0 &&
        (rc = child_sys(SYS_close_range, plan.unshare_below, ~0U, CLOSE_RANGE_UNSHARE)) != 0) {
        child_fail(plan, spawn_step::fd_table, rc);
    }
    // A new session: its own process group (pgid = pid) and no controlling terminal, so
    // open("/dev/tty") fails with ENXIO instead of stopping the child with SIGTTIN.
    if ((rc = child_sys(SYS_setsid)) < 0) child_fail(plan, spawn_step::session, rc);
    if (plan.cgroup_procs_fd >= 0 && (rc = child_sys(SYS_write, plan.cgroup_procs_fd, arg("0"), 1)) != 1) {
        child_fail(plan, spawn_step::cgroup, rc < 0 ? rc : -EIO);
    }
    for (int target = 0; target < 3; ++target) {
        // Our own descriptor passed as it is: dup2() onto itself would keep a close-on-exec
        // flag, so clear it (in the child's copy of the table only). Otherwise dup3 (never
        // called with equal descriptors) is dup2.
        rc = plan.stdio[target] == target ? child_sys(SYS_fcntl, target, F_SETFD, 0)
                                          : child_sys(SYS_dup3, plan.stdio[target], target, 0);
        if (rc < 0) child_fail(plan, spawn_step::stdio, rc);
    }
    if (plan.cwd_fd >= 0) {
        if ((rc = child_sys(SYS_fchdir, plan.cwd_fd)) != 0) child_fail(plan, spawn_step::cwd, rc);
        // A directory removed after it was opened can still be entered through the fd; say
        // so instead of running the program in a directory that no longer exists.
        struct stat st;
        if ((rc = child_sys(SYS_fstat, plan.cwd_fd, arg(&st))) != 0) child_fail(plan, spawn_step::cwd, rc);
        if (st.st_nlink == 0) child_fail(plan, spawn_step::cwd, -ENOENT);
    }
    // Everything above 2 (ours, and any non-CLOEXEC fd of an embedding application) is
    // closed by execve.
    if ((rc = child_sys(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC)) != 0) {
        child_fail(plan, spawn_step::close_fds, rc);
    }
    // Default dispositions for every signal: an ignored SIGPIPE or SIGTERM of the host would
    // otherwise survive execve, and a handler of ours must not run here once the mask is
    // cleared. Only the signals not at their default need the call (docs/DESIGN.md, "Spawn").
    // All-zero is SIG_DFL with no flags on every architecture.
    unsigned char dfl[64] = {};
    std::uint64_t to_reset = signals_not_at_default();
    for (int sig = 1; sig < 65; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP || (to_reset >> (sig - 1) & 1) == 0) continue;
        child_sys(SYS_rt_sigaction, sig, arg(dfl), 0, 8);
    }
    std::uint64_t empty = 0;
    if ((rc = child_sys(SYS_rt_sigprocmask, SIG_SETMASK, arg(&empty), 0, 8)) != 0) {
        child_fail(plan, spawn_step::signals, rc);
    }
    if (plan.exe_fd >= 0) {
        rc = child_sys(SYS_execveat, plan.exe_fd, arg(""), arg(plan.argv), arg(plan.envp), AT_EMPTY_PATH);
        // ENOENT is what the kernel says for a #! script behind a close-on-exec fd (and for a
        // missing ELF loader, which execve() below reports the same way).
        if (rc != -ENOENT) child_fail(plan, spawn_step::exec, rc);
        struct stat opened, named;
        if (child_sys(SYS_fstat, plan.exe_fd, arg(&opened)) != 0 ||
            child_sys(SYS_newfstatat, AT_FDCWD, arg(plan.path), arg(&named), 0) != 0 ||
            opened.st_dev != named.st_dev || opened.st_ino != named.st_ino) {
            child_fail(plan, spawn_step::identity, -ESTALE);
        }
    }
    rc = child_sys(SYS_execve, arg(plan.path), arg(plan.argv), arg(plan.envp));
    child_fail(plan, spawn_step::exec, rc);
}

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

std::string interpreter_of(const std::string& path) {
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd) return {};
    char buf[256];
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n >= 4 && std::memcmp(buf, "\177ELF", 4) == 0) return "its ELF program interpreter (dynamic loader)";
    if (n < 2 || buf[0] != '#' || buf[1] != '!') return {};
    std::string line(buf + 2, static_cast<std::size_t>(n) - 2);
    line = line.substr(0, line.find('\n'));
    auto begin = line.find_first_not_of(" \t");
    if (begin == std::string::npos) return "its #! interpreter";
    auto end = line.find_first_of(" \t", begin);
    return "its #! interpreter " + quoted(line.substr(begin, end - begin));
}

}  // namespace

#if defined(__x86_64__)
// long clone3_vm(clone_args* args, size_t size, int (*fn)(void*), void* arg): clone3() whose
// child calls fn(arg) on the stack given in args, then exits with its return value. It must
// be assembly: with CLONE_VM the child cannot return through C frames it shares with us. fn
// and arg travel in r8/r9, which the syscall preserves in both processes.
extern "C" long agentctl_exec_clone3_vm(clone_args* args, std::size_t size, int (*fn)(void*), void* arg);
asm(R"(
    .text
    .globl agentctl_exec_clone3_vm
    .hidden agentctl_exec_clone3_vm
    .type agentctl_exec_clone3_vm, @function
agentctl_exec_clone3_vm:
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jnz 1f
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $60, %eax
    syscall
    hlt
1:  ret
    .size agentctl_exec_clone3_vm, .-agentctl_exec_clone3_vm
)");

bool clone3_built() {
    return true;
}
#else
bool clone3_built() {
    return false;
}
#endif

clone_result clone_child(child_plan& plan, char* stack, std::size_t stack_size, const clone_how& how) {
    clone_result out;
    std::uint64_t all = ~std::uint64_t{0};
    std::uint64_t old = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    auto top = reinterpret_cast<std::uintptr_t>(stack + stack_size) & ~std::uintptr_t{15};
#if defined(__x86_64__)
    if (how.clone3) {
        clone_args args{};
        // Not waiting for the exec: the kernel zeroes *stack_in_use (and wakes its futex) when
        // the child leaves our memory, at its execve or its exit (CLONE_CHILD_CLEARTID).
        bool wait = how.wait_for_exec || how.stack_in_use == nullptr;
        args.flags = CLONE_VM | (wait ? CLONE_VFORK : CLONE_CHILD_CLEARTID) |
                     (how.want_pidfd ? CLONE_PIDFD : 0) | (how.cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0) |
                     (plan.unshare_below > 0 ? CLONE_FILES : 0);
        if (!wait) {
            *how.stack_in_use = 1;
            args.child_tid = reinterpret_cast<std::uintptr_t>(how.stack_in_use);
        }
        args.pidfd = reinterpret_cast<std::uintptr_t>(&out.pidfd);
        args.exit_signal = SIGCHLD;
        args.stack = reinterpret_cast<std::uintptr_t>(stack);
        args.stack_size = top - reinterpret_cast<std::uintptr_t>(stack);
        args.cgroup = how.cgroup_fd >= 0 ? static_cast<std::uint64_t>(how.cgroup_fd) : 0;
        long rc = agentctl_exec_clone3_vm(&args, sizeof args, child_main, &plan);
        if (rc < 0 && !wait) *how.stack_in_use = 0;
        out.pid = rc < 0 ? -1 : static_cast<pid_t>(rc);
        out.error = rc < 0 ? static_cast<int>(-rc) : 0;
    }
#endif
    if (!how.clone3) {
        int flags = CLONE_VM | CLONE_VFORK | SIGCHLD | (how.want_pidfd ? CLONE_PIDFD : 0) |
                    (plan.unshare_below > 0 ? CLONE_FILES : 0);
        out.pid = ::clone(child_main, reinterpret_cast<void*>(top), flags, &plan, &out.pidfd);
        out.error = out.pid < 0 ? errno : 0;
    }
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
    if (out.pid < 0 || !how.want_pidfd) out.pidfd = -1;
    return out;
}

spawn_failure describe_child_failure(spawn_step step, int err, const std::string& path,
                                     const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env, const std::string& cwd_display) {
    const std::string reason = errno_text(err);
    switch (step) {
        case spawn_step::cwd:
            if (err == ENOENT) {
                return {error_code::cwd_unavailable,
                        "working directory " + quoted(cwd_display) + " no longer exists"};
            }
            return {error_code::cwd_unavailable,
                    "cannot enter working directory " + quoted(cwd_display) + ": " + reason};
        case spawn_step::stdio:
            return {err == EMFILE || err == ENFILE ? error_code::resource_exhausted : error_code::spawn_error,
                    "cannot set up the child's stdin/stdout/stderr: " + reason};
        case spawn_step::session:
            return {error_code::spawn_error, "cannot start a new session for the child: " + reason};
        case spawn_step::cgroup:
            return {error_code::spawn_error, "cannot move the child into its cgroup: " + reason};
        case spawn_step::fd_table:
            return {error_code::spawn_error,
                    "cannot give the child a descriptor table of its own: " + reason};
        case spawn_step::close_fds:
            return {error_code::spawn_error,
                    "cannot mark the child's file descriptors close-on-exec: " + reason};
        case spawn_step::signals:
            return {error_code::spawn_error, "cannot reset the child's signal mask: " + reason};
        case spawn_step::identity:
            return {error_code::executable_changed,
                    quoted(path) +
                        " changed while it was being started: it no longer names the file that was opened"};
        case spawn_step::none:
        case spawn_step::exec:
            break;
    }
    struct stat st {};
    bool exists = ::stat(path.c_str(), &st) == 0;
    switch (err) {
        case ENOENT:
            if (!exists)
                return {error_code::executable_not_found, "executable " + quoted(path) + " does not exist"};
            if (auto interp = interpreter_of(path); !interp.empty()) {
                return {error_code::interpreter_not_found,
                        "cannot run " + quoted(path) + ": " + interp + " does not exist"};
            }
            return {error_code::interpreter_not_found,
                    "cannot run " + quoted(path) + ": a file it needs does not exist"};
        case ENOTDIR:
            return {error_code::executable_not_found,
                    "executable " + quoted(path) + ": a path component is not a directory"};
        case EACCES:
            if (exists && S_ISDIR(st.st_mode))
                return {error_code::is_a_directory, quoted(path) + " is a directory"};
            if (exists && S_ISREG(st.st_mode) && (st.st_mode & 0111) == 0) {
                char mode[8];
                std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
                return {error_code::permission_denied,
                        quoted(path) + " is not executable (mode " + mode + ")"};
            }
            return {error_code::permission_denied,
                    "permission denied executing " + quoted(path) +
                        " (a directory on the path is not searchable, the file is not "
                        "executable, or its file system is mounted noexec)"};
        case ENOEXEC:
            return {error_code::exec_format_error,
                    quoted(path) + " is not in an executable format (and has no #! line)"};
        case ETXTBSY:
            return {error_code::text_file_busy, quoted(path) + " is open for writing (text file busy)"};
        case E2BIG: {
            std::size_t total = 0;
            std::string longest;
            auto count = [&](const std::vector<std::string>& v, const char* what) {
                for (std::size_t i = 0; i < v.size(); ++i) {
                    total += v[i].size() + 1 + sizeof(char*);
                    if (v[i].size() + 1 > max_arg_strlen && longest.empty()) {
                        longest = std::string(what) + " " + std::to_string(i) + " is " +
                                  std::to_string(v[i].size()) + " bytes, more than the " +
                                  std::to_string(max_arg_strlen) + "-byte limit for one string; ";
                    }
                }
            };
            count(argv, "argument");
            count(env, "environment entry");
            return {error_code::argument_list_too_long, "argument list too long for " + quoted(path) + ": " +
                                                            longest + "argv and environment take " +
                                                            std::to_string(total) + " bytes (limit " +
                                                            std::to_string(::sysconf(_SC_ARG_MAX)) + ")"};
        }
        case ENOMEM:
        case EAGAIN:
        case EMFILE:
        case ENFILE:
            return {error_code::resource_exhausted, "cannot execute " + quoted(path) + ": " + reason};
        case ELOOP:
            return {error_code::executable_not_found, quoted(path) + ": too many levels of symbolic links"};
        default:
            return {error_code::spawn_error, "cannot execute " + quoted(path) + ": " + reason};
    }
}

spawn_failure describe_parent_failure(const char* what, int err) {
    bool exhausted = err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
    return {exhausted ? error_code::resource_exhausted : error_code::spawn_error,
            std::string(what) + ": " + errno_text(err)};
}

}  // namespace agentctl::exec
