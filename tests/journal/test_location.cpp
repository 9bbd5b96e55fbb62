// The default location of the journal, the state folder, and owners' liveness.
#include "harness.hpp"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

using namespace agentctl;
using namespace journal_test;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
        auto it = vars.find(std::string(name));
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

auto passwd(std::optional<std::string> home) {
    return [home] { return home; };
}

std::string location(std::map<std::string, std::string> vars, std::optional<std::string> home = "/pw/home") {
    auto loc = default_journal_location(env_of(std::move(vars)), passwd(home));
    if (!loc) return "error: " + loc.error().message;
    return loc->db_path;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(paths_and_owners)

BOOST_AUTO_TEST_CASE(agentctl_state_dir_wins) {
    BOOST_TEST(location({{"AGENTCTL_STATE_DIR", "/s"}, {"XDG_STATE_HOME", "/x"}, {"HOME", "/h"}}) ==
               "/s/journal.db");
    BOOST_TEST(location({{"AGENTCTL_STATE_DIR", "/s/"}}) == "/s/journal.db");
    auto loc = default_journal_location(env_of({{"AGENTCTL_STATE_DIR", "/s/deep"}}), passwd("/pw"));
    BOOST_TEST_REQUIRE(loc.has_value());
    BOOST_TEST(loc->state_dir == "/s/deep");
}

BOOST_AUTO_TEST_CASE(xdg_state_home_then_home) {
    BOOST_TEST(location({{"XDG_STATE_HOME", "/x"}, {"HOME", "/h"}}) == "/x/agentctl/journal.db");
    BOOST_TEST(location({{"HOME", "/h"}}) == "/h/.local/state/agentctl/journal.db");
    // XDG base directory rules: a relative value is ignored.
    BOOST_TEST(location({{"XDG_STATE_HOME", "rel"}, {"HOME", "/h"}}) ==
               "/h/.local/state/agentctl/journal.db");
}

BOOST_AUTO_TEST_CASE(empty_values_count_as_unset) {
    BOOST_TEST(location({{"AGENTCTL_STATE_DIR", ""}, {"XDG_STATE_HOME", ""}, {"HOME", "/h"}}) ==
               "/h/.local/state/agentctl/journal.db");
    BOOST_TEST(location({{"HOME", ""}}) == "/pw/home/.local/state/agentctl/journal.db");
}

BOOST_AUTO_TEST_CASE(home_unset_uses_the_password_database) {
    BOOST_TEST(location({}) == "/pw/home/.local/state/agentctl/journal.db");
    BOOST_TEST(location({}, std::nullopt).rfind("error: ", 0) == 0);
}

BOOST_AUTO_TEST_CASE(relative_paths_are_refused) {
    BOOST_TEST(location({{"AGENTCTL_STATE_DIR", "state"}}).find("must be an absolute path") !=
               std::string::npos);
    BOOST_TEST(location({{"HOME", "relative"}}).find("absolute") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(passwd_home_dir_is_the_real_users) {
    auto home = passwd_home_dir();
    BOOST_TEST_REQUIRE(home.has_value());
    BOOST_TEST(home->front() == '/');
}

BOOST_AUTO_TEST_CASE(make_state_dir_creates_private_folders) {
    temp_dir tmp;
    std::string dir = tmp.file("a/b/agentctl");
    BOOST_TEST(!make_state_dir(dir).has_value());
    struct stat st;
    BOOST_TEST_REQUIRE(::stat(dir.c_str(), &st) == 0);
    BOOST_TEST(S_ISDIR(st.st_mode));
    BOOST_TEST((st.st_mode & 0777) == 0700u);
    BOOST_TEST_REQUIRE(::stat(tmp.file("a").c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 0777) == 0700u);
    BOOST_TEST(!make_state_dir(dir).has_value());  // again: already there
    write_file(tmp.file("file"), "x");
    auto e = make_state_dir(tmp.file("file/sub"));
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->message.find(tmp.file("file")) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(owner_and_liveness) {
    journal_owner me = this_process_owner();
    BOOST_TEST(me.pid == ::getpid());
    BOOST_TEST(me.start_time > 0u);
    BOOST_TEST(!me.host.empty());
    BOOST_TEST(me.boot_id.size() == 36u);
    BOOST_TEST(process_alive(me.pid, me.start_time));
    BOOST_TEST(!process_alive(me.pid, me.start_time + 1));  // same pid, another process
    BOOST_TEST(owner_alive_here(me));

    // A child that has exited and been reaped is dead.
    pid_t child = 0;
    char arg0[] = "/bin/true";
    char* argv[] = {arg0, nullptr};
    BOOST_TEST_REQUIRE(::posix_spawn(&child, "/bin/true", nullptr, nullptr, argv, environ) == 0);
    int status = 0;
    BOOST_TEST_REQUIRE(::waitpid(child, &status, 0) == child);
    BOOST_TEST(!process_alive(child, 1));

    journal_owner other_host = me;
    other_host.host = me.host + "-elsewhere";
    other_host.pid = 999999999;
    BOOST_TEST(owner_alive_here(other_host));  // cannot be told from here: never treated as dead
    journal_owner other_boot = me;
    other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
    BOOST_TEST(!owner_alive_here(other_boot));
    BOOST_TEST(!owner_alive_here(fake_owner(999999999)));
}

BOOST_AUTO_TEST_SUITE_END()
