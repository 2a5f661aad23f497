// TCP links opened on first use (transport/link_opener.hpp). Each rank listens from start-up
// on and publishes its address; no link is opened at start-up.
//
// Opening (open(peer)): this rank connects to the peer's listener (once: a refusal means the
// peer is gone), runs the authentication handshake (purpose "data"), sends its identification
// record (rank, communicator size, mesh token) and reads the peer's, which must name the peer.
//
// Admitting: a thread per opener accepts the links peers open towards this rank, whatever the
// rank is doing (so opening never waits on the peer's program), and runs every connection's
// handshake and identification side by side without blocking on any of them. It hands a link
// over only when the handshake proved the secret, the record names this communicator and a
// member reached over TCP, and that member has no link here yet; any other connection (a
// stranger, a wrong secret, another communicator, a duplicate, one silent for 5 s) is closed
// with a log line and changes nothing else.
//
// Crossing: two ranks that open their link to each other at the same moment keep the
// connection of the lower rank. The higher rank's acceptor takes it; the lower rank's acceptor
// answers the higher rank's connection with a crossing record (kCrossingMagic) and closes it,
// and the higher rank then waits for the one under way. One connection per pair.
#pragma once

#include "bootstrap/socket.hpp"
#include "transport/link_opener.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::transport::tcp {

struct TcpLinksPlan {
  int rank = 0;
  int size = 0;
  std::string secret;
  std::string mesh_token;  ///< equal on every rank of the communicator
  /// Where each peer listens, by rank; empty for ranks not reached over TCP (and this one).
  std::vector<std::optional<net::HostPort>> addresses;
  /// The longest opening one link may take (connect, handshake, or the crossing's wait).
  std::chrono::milliseconds connect_time{30000};
};

/// Admits links on `listener` (listening, non-blocking) and opens them as `plan` says.
std::unique_ptr<LinkOpener> make_tcp_links(net::Socket listener, TcpLinksPlan plan);

/// The identification record, exposed for tests that play a stranger. Sent right after the
/// handshake by the opening side, and answered with the admitting side's own (or a crossing
/// record: magic kCrossingMagic).
struct Identification {
  std::uint32_t magic = 0x44494843;  // "CHID"
  std::int32_t rank = -1;
  std::int32_t size = 0;
  char mesh_token[32] = {};
};
static_assert(sizeof(Identification) == 44);
inline constexpr std::uint32_t kCrossingMagic = 0x58494843;  // "CHIX"

Identification make_identification(int rank, int size, const std::string& mesh_token);

}  // namespace chorus::transport::tcp
