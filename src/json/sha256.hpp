// SHA-256 (FIPS 180-4), for workflow and plan digests.
#pragma once

#include <agentctl/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentctl {

class sha256 {
public:
    sha256();
    void update(std::string_view bytes);
    std::array<std::uint8_t, 32> finish();
    /// Lowercase hex of the digest; the object cannot be updated afterwards.
    std::string hex();

    /// Forces the portable implementation (tests compare it with the hardware one).
    void use_portable_only() { portable_only_ = true; }

private:
    void block(const std::uint8_t* p);
    void block_portable(const std::uint8_t* p);

    std::array<std::uint32_t, 8> state_;
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_ = 0;
    bool portable_only_ = false;
};

}  // namespace agentctl
