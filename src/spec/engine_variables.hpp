// The variables that steer a container engine client: its connection and configuration. The
// runner passes them from agentctl's own environment to the client, by name
// (runner/container/argv.cpp); a container action may not set them (spec/workflow_reader.cpp,
// which also refuses the whole families these belong to).
#pragma once

#include <array>
#include <string_view>

namespace agentctl {

inline constexpr std::array<std::string_view, 16> engine_client_variables = {"CONTAINER_CONNECTION",
                                                                             "CONTAINER_HOST",
                                                                             "CONTAINERS_CONF",
                                                                             "DOCKER_CERT_PATH",
                                                                             "DOCKER_CONFIG",
                                                                             "DOCKER_CONTEXT",
                                                                             "DOCKER_HOST",
                                                                             "DOCKER_TLS_VERIFY",
                                                                             "HOME",
                                                                             "PATH",
                                                                             "PODMAN_CONNECTIONS_CONF",
                                                                             "TEMP",
                                                                             "TMP",
                                                                             "TMPDIR",
                                                                             "XDG_CONFIG_HOME",
                                                                             "XDG_RUNTIME_DIR"};

}  // namespace agentctl
