// Connecting the TCP links of a mesh. For each TCP pair the higher rank
// connects to the lower rank's listener. Every connection runs the
// authentication handshake (purpose "data"), then both sides exchange an
// identification record (rank, communicator size, mesh token) and check it.
// The acceptor drops, with a log line, any connection that fails either step
// (a stranger, a rank it does not expect, a duplicate) and keeps accepting.
//
// Deadlock freedom: every rank first finishes its connects (to lower ranks),
// then accepts. Rank 0 only accepts; by induction each rank's connects are
// answered by lower ranks that have reached their accept phase.
#pragma once

#include "bootstrap/socket.hpp"
#include "core/deadline.hpp"

#include <string>
#include <vector>

namespace chorus::transport::tcp {

struct TcpPeer {
  int rank = -1;
  net::HostPort address;  ///< where it listens (used for lower ranks)
};

struct TcpMeshPlan {
  int rank = 0;
  int size = 0;
  std::string secret;
  std::string mesh_token;           ///< equal on every rank of the communicator
  std::vector<TcpPeer> connect_to;  ///< lower ranks
  std::vector<int> accept_from;     ///< higher ranks
  Deadline deadline;
};

/// Sockets by rank (invalid for ranks not in the plan). Throws Timeout naming
/// the ranks that never connected, or the error of a failed connect.
std::vector<net::Socket> connect_tcp_mesh(const net::Socket& listener, const TcpMeshPlan& plan);

/// The identification record, exposed for tests that play a stranger.
/// Sent right after the handshake by both sides.
struct Identification {
  std::uint32_t magic = 0x44494843;  // "CHID"
  std::int32_t rank = -1;
  std::int32_t size = 0;
  char mesh_token[32] = {};
};
static_assert(sizeof(Identification) == 44);

Identification make_identification(int rank, int size, const std::string& mesh_token);

}  // namespace chorus::transport::tcp
