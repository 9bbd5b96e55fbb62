// The backend choice by name. The Slurm options are checked in the Slurm room
// (src/runner/slurm/options.cpp), what dead runs left is removed in each backend's
// (leftovers.cpp).
#include <agentctl/backend.hpp>

namespace agentctl {

std::string_view to_string(backend_kind b) {
    return b == backend_kind::slurm ? "slurm" : "local";
}

std::optional<backend_kind> backend_from_string(std::string_view text) {
    if (text == "local") return backend_kind::local;
    if (text == "slurm") return backend_kind::slurm;
    return std::nullopt;
}

}  // namespace agentctl
