// Version of the library and of the formats it speaks.
#pragma once

#include <string_view>

namespace agentctl {

/// The release, e.g. "0.1.0".
std::string_view version();

/// `apiVersion` of every machine-readable CLI document.
inline constexpr std::string_view cli_api_version = "agentctl.dev/cli/v1";

}  // namespace agentctl
