// Private helpers of src/exec's path code (paths.cpp, workspace.cpp, file_write.cpp); tests
// reach them directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace agentctl::exec {

/// openat2(dir_fd, path, flags) resolving beneath dir_fd and through no magic link, retried
/// while a rename races the lookup (EAGAIN) or a signal interrupts it: the fd, else -1 with
/// `err` set (ENOSYS: the kernel has no openat2, the caller opens component by component).
int openat2_beneath(int dir_fd, const char* path, std::uint64_t flags, int& err);

/// open_beneath() without openat2: one openat(O_NOFOLLOW) per component, refusing every
/// symlink. Used where openat2 is missing (ENOSYS); exposed so that tests run it everywhere.
int open_beneath_components(int root_fd, std::string_view relative, std::string& error);

/// The next component of a path, taken off the front of `rest`; "" and "." components are
/// skipped (a run of slashes is one separator). "" when none is left.
std::string_view next_component(std::string_view& rest);

}  // namespace agentctl::exec
