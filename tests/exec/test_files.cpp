// Writing beneath a directory: folders made one component at a time without leaving the root,
// and a file replaced all or nothing (src/exec/file_write.cpp).
#include "harness.hpp"

#include "exec/workspace.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace exec_test;
namespace exec = agentctl::exec;
namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

exec::directory open_dir(const std::string& path) {
    auto d = exec::directory::open(path);
    BOOST_REQUIRE(d);
    return std::move(*d);
}

int entries_in(const std::string& folder) {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(folder)) ++n;
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(files)

BOOST_AUTO_TEST_CASE(folders_are_made_beneath_the_root_and_never_outside) {
    temp_dir root, outside;
    exec::directory r = open_dir(root.path);
    auto made = exec::make_directories_beneath(r, "a/./b//c");
    BOOST_REQUIRE(made);
    BOOST_TEST(fs::is_directory(root.path + "/a/b/c"));
    BOOST_TEST(made->path() == r.path() + "/a/b/c");
    // Again: everything exists, nothing changes.
    BOOST_TEST(exec::make_directories_beneath(r, "a/b/c").has_value());
    // "" is the root itself.
    auto self = exec::make_directories_beneath(r, "");
    BOOST_REQUIRE(self);
    BOOST_TEST(self->path() == r.path());

    // A symlink inside the root may lead elsewhere inside it...
    fs::create_symlink("a/b", root.path + "/inner");
    BOOST_TEST(exec::make_directories_beneath(r, "inner/d").has_value());
    BOOST_TEST(fs::is_directory(root.path + "/a/b/d"));
    // ...never out of it, and nothing is made out there.
    fs::create_symlink(outside.path, root.path + "/away");
    auto away = exec::make_directories_beneath(r, "away/x");
    BOOST_REQUIRE(!away);
    BOOST_TEST((away.error().code == agentctl::error_code::path_not_allowed));
    BOOST_TEST(away.error().message.find("folder away leads out of") != std::string::npos,
               away.error().message);
    BOOST_TEST(entries_in(outside.path) == 0);

    auto up = exec::make_directories_beneath(r, "a/../../x");
    BOOST_REQUIRE(!up);
    BOOST_TEST((up.error().code == agentctl::error_code::path_not_allowed));
    BOOST_TEST(!exec::make_directories_beneath(r, "/etc"));

    std::ofstream(root.path + "/file") << "x";
    auto through_file = exec::make_directories_beneath(r, "file/x");
    BOOST_REQUIRE(!through_file);
    BOOST_TEST((through_file.error().code == agentctl::error_code::file_error));
    BOOST_TEST(through_file.error().message.find("folder file is not a folder") != std::string::npos,
               through_file.error().message);
}

BOOST_AUTO_TEST_CASE(a_file_is_replaced_whole_with_its_mode) {
    temp_dir root;
    exec::directory r = open_dir(root.path);
    BOOST_TEST(!exec::replace_file(r, "new.txt", "first"));
    BOOST_TEST(read_text(root.path + "/new.txt") == "first");

    std::ofstream(root.path + "/kept.sh") << "a much longer old content";
    ::chmod((root.path + "/kept.sh").c_str(), 0751);
    BOOST_TEST(!exec::replace_file(r, "kept.sh", "short"));
    BOOST_TEST(read_text(root.path + "/kept.sh") == "short");
    struct stat st {};
    BOOST_REQUIRE(::stat((root.path + "/kept.sh").c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 07777) == 0751u);

    // Empty content is a file of its own, not a no-op.
    BOOST_TEST(!exec::replace_file(r, "kept.sh", ""));
    BOOST_TEST(fs::file_size(root.path + "/kept.sh") == 0u);
    BOOST_TEST(entries_in(root.path) == 2, "a temporary file was left");
}

BOOST_AUTO_TEST_CASE(a_failed_replacement_leaves_everything_as_it_was) {
    temp_dir root;
    exec::directory r = open_dir(root.path);
    // The name is a folder: the rename fails after the temporary file was written.
    fs::create_directories(root.path + "/taken/inside");
    auto error = exec::replace_file(r, "taken", "content");
    BOOST_REQUIRE(error);
    BOOST_TEST((error->code == agentctl::error_code::file_error));
    BOOST_TEST(error->message.find("the file is as it was") != std::string::npos, error->message);
    BOOST_TEST(fs::is_directory(root.path + "/taken/inside"));
    BOOST_TEST(entries_in(root.path) == 1, "the temporary file was left");

    // A symlink as the name is replaced itself: what it pointed at is untouched.
    temp_dir outside;
    std::ofstream(outside.path + "/target") << "outside";
    fs::create_symlink(outside.path + "/target", root.path + "/link");
    BOOST_TEST(!exec::replace_file(r, "link", "inside"));
    BOOST_TEST(!fs::is_symlink(root.path + "/link"));
    BOOST_TEST(read_text(root.path + "/link") == "inside");
    BOOST_TEST(read_text(outside.path + "/target") == "outside");

    for (const char* bad : {"", ".", "..", "a/b"}) {
        auto refused = exec::replace_file(r, bad, "x");
        BOOST_TEST(refused.has_value(), bad);
    }
}

BOOST_AUTO_TEST_SUITE_END()
