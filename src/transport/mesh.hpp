// Builds a communicator's Transport: one link per peer, shared memory for peers
// on the same host and TCP for the rest (or TCP everywhere, as asked).
#pragma once

#include "bootstrap/store.hpp"
#include "transport/arena/host_arena.hpp"
#include "transport/transport.hpp"

#include <memory>
#include <string>

namespace chorus::transport {

enum class Kind { Auto, Tcp, Shm };

/// Parses "auto", "tcp", "shm" (CHORUS_TRANSPORT); throws InvalidArgument.
Kind parse_kind(const std::string& text);

struct MeshOptions {
  Kind kind = Kind::Auto;      ///< Shm: every pair must share a host, else InvalidUsage
  std::string secret;          ///< proves membership on every data connection
  std::string advertise_host;  ///< CHORUS_SOCKET_IFNAME (net::advertised_address); "" = detect
  Deadline deadline;           ///< for the whole rendezvous
  /// Shared-memory rings and the host arena are sized for at least this many ranks on the
  /// host (transport/shm_budget.hpp); a sub-communicator passes its parent's count.
  int shm_sized_for = 0;
};

/// A communicator's connections: the transport, and the host arena when every rank shares
/// this host and shared memory is allowed (null otherwise). The arena's waits ask the
/// transport's Liveness, so the arena goes first (member order destroys it first).
struct Connection {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<HostArena> arena;
};

/// Collective over the ranks of one communicator: every rank calls it with the
/// same `store` namespace (keys are private to this communicator), its own rank
/// and the same size. Exchanges host identity, pid and addresses through the
/// store and connects the shared-memory links; the TCP links are opened on first
/// use (tcp/tcp_links.hpp), so none is open when it returns.
Connection connect_mesh(Store& store, int rank, int size, const MeshOptions& options);

}  // namespace chorus::transport
