// A scratch directory for a test: made under the temporary folder, removed with everything in
// it when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace test_support {

struct scratch_dir {
    std::filesystem::path path;
    scratch_dir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "agentctl-test-XXXXXX").string();
        path = ::mkdtemp(pattern.data());
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    /// Writes `content` to file `name` in it; returns the file's path.
    std::string write(const std::string& name, const std::string& content) const {
        auto file = path / name;
        std::ofstream(file, std::ios::binary) << content;
        return file.string();
    }
};

}  // namespace test_support
