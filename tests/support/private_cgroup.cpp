#include "private_cgroup.hpp"

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace test_support {
namespace {

// This process's cgroup v2 directory (/proc/self/cgroup's "0::" line, found under the
// cgroup2 mount that shows it); empty when there is none.
std::string own_cgroup_dir() {
    std::ifstream cgroup("/proc/self/cgroup");
    std::string line, own;
    while (std::getline(cgroup, line))
        if (line.starts_with("0::")) own = line.substr(3);
    if (own.empty()) return {};
    std::ifstream mounts("/proc/self/mountinfo");
    while (std::getline(mounts, line)) {
        auto tail = line.find(" - cgroup2 ");
        if (tail == std::string::npos) continue;
        std::istringstream fields(line.substr(0, tail));
        std::string id, parent, device, root, mount_point;
        fields >> id >> parent >> device >> root >> mount_point;
        if (root == "/") return own == "/" ? mount_point : mount_point + own;
        if (own == root || own.starts_with(root + "/")) return mount_point + own.substr(root.size());
    }
    return {};
}

// 0 or the errno of writing `text` to the file `path` (a cgroup interface file).
int write_file(const std::string& path, const char* text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    auto size = static_cast<ssize_t>(std::strlen(text));
    int err = ::write(fd, text, static_cast<std::size_t>(size)) == size ? 0 : errno;
    ::close(fd);
    return err;
}

// Waits up to `bound` (cgroup.events' POLLPRI, no sleeps) until the cgroup `dir` holds no
// process, its descendants included.
bool wait_unpopulated(const std::string& dir, std::chrono::milliseconds bound) {
    int fd = ::open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    auto deadline = std::chrono::steady_clock::now() + bound;
    bool empty = false;
    while (!empty) {
        char buf[256];
        ssize_t n = ::pread(fd, buf, sizeof buf, 0);
        if (n < 0) break;
        empty = std::string(buf, static_cast<std::size_t>(n)).find("populated 0") != std::string::npos;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (empty || left.count() <= 0) break;
        pollfd p{fd, POLLPRI, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
    ::close(fd);
    return empty;
}

// Removes the cgroup `dir` and the cgroups beneath it, deepest first (their interface files
// go with them: rmdir is the only way to remove a cgroup). 0 or the first errno.
int remove_cgroup_tree(const std::string& dir) {
    std::vector<std::string> below;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->is_directory(ec)) below.push_back(it->path().string());
    std::sort(below.begin(), below.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    below.push_back(dir);
    for (const auto& d : below)
        if (::rmdir(d.c_str()) != 0) return errno;
    return 0;
}

}  // namespace

private_cgroup::private_cgroup() {
    std::string home = own_cgroup_dir();
    if (home.empty()) return;
    static unsigned cases = 0;
    // Not an agentctl owner's name (agentctl@…, agentctl-PID-TAG-N): no sweep ever takes it.
    std::string path =
        home + "/agentctl-test-case." + std::to_string(::getpid()) + "." + std::to_string(cases++);
    if (::mkdir(path.c_str(), 0755) != 0) {
        // No writable cgroup v2 here: agentctl contains nothing in cgroups, and sweeps none.
        if (errno == EACCES || errno == EPERM || errno == EROFS) return;
        throw std::runtime_error("cannot make the case's cgroup " + path + ": " + std::strerror(errno));
    }
    if (int err = write_file(path + "/cgroup.procs", "0"); err != 0) {
        ::rmdir(path.c_str());
        throw std::runtime_error("cannot move into the case's cgroup " + path + ": " + std::strerror(err));
    }
    home_ = std::move(home);
    path_ = std::move(path);
}

private_cgroup::~private_cgroup() {
    if (path_.empty()) return;
    if (int err = write_file(home_ + "/cgroup.procs", "0"); err != 0) {
        BOOST_ERROR("cannot move back to " << home_ << ": " << std::strerror(err) << "; " << path_
                                           << " stays");
        return;
    }
    // What the case left: the last run's watchdog on its way out, or a failed case's trees.
    if (!wait_unpopulated(path_, std::chrono::milliseconds(0))) {
        BOOST_TEST(write_file(path_ + "/cgroup.kill", "1") == 0, "cannot kill what is left in " << path_);
        BOOST_TEST(wait_unpopulated(path_, std::chrono::seconds(10)), path_ << " still holds processes");
    }
    int err = remove_cgroup_tree(path_);
    BOOST_TEST(err == 0, "cannot remove " << path_ << ": " << std::strerror(err));
}

}  // namespace test_support
