// Private helpers of paths.cpp that tests reach directly.
#pragma once

#include <string>
#include <string_view>

namespace agentctl::exec {

/// open_beneath() without openat2: one openat(O_NOFOLLOW) per component, refusing every
/// symlink. Used where openat2 is missing (ENOSYS); exposed so that tests run it everywhere.
int open_beneath_components(int root_fd, std::string_view relative, std::string& error);

}  // namespace agentctl::exec
