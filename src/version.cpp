#include <agentctl/version.hpp>

namespace agentctl {

std::string_view version() { return AGENTCTL_VERSION; }

}  // namespace agentctl
