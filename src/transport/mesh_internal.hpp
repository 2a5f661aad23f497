// The mesh rendezvous with the local identity made explicit, so that tests
// can play ranks on several "hosts" (and with other pids) inside one process.
#pragma once

#include "transport/mesh.hpp"

#include <cstdint>
#include <string>

namespace chorus::transport {

struct LocalIdentity {
  std::string host;      ///< host_identity() in production
  std::int64_t pid = 0;  ///< getpid() in production
};

Connection connect_mesh_as(Store& store, int rank, int size, const MeshOptions& options,
                           const LocalIdentity& identity);

}  // namespace chorus::transport
