// TCP mesh rendezvous; see tcp_rendezvous.hpp.
#include "transport/tcp/tcp_rendezvous.hpp"

#include "bootstrap/address.hpp"
#include "bootstrap/auth.hpp"
#include "core/log.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>

namespace chorus::transport::tcp {
namespace {

using namespace std::chrono_literals;

/// Longest one accepted connection may take to authenticate and identify
/// itself, so that a silent stranger delays the rendezvous only this long.
constexpr auto kAcceptHandshakeTime = 5s;

constexpr char kPurpose[] = "data";

bool token_equals(const Identification& id, const std::string& token) {
  return token.size() == sizeof(id.mesh_token) &&
         std::memcmp(id.mesh_token, token.data(), sizeof(id.mesh_token)) == 0;
}

Identification read_identification(int fd, Deadline deadline) {
  Identification id;
  net::read_full(fd, &id, sizeof(id), deadline);
  return id;
}

/// Connects to lower rank `peer` and checks that it is who the store said.
net::Socket connect_to(const TcpPeer& peer, const TcpMeshPlan& plan) {
  net::Socket socket = net::connect_tcp(peer.address, plan.deadline);
  auth::handshake_as_client(socket.fd(), plan.secret, kPurpose, plan.deadline);
  Identification mine = make_identification(plan.rank, plan.size, plan.mesh_token);
  net::write_full(socket.fd(), &mine, sizeof(mine), plan.deadline);
  Identification theirs = read_identification(socket.fd(), plan.deadline);
  if (theirs.magic != mine.magic || theirs.rank != peer.rank || theirs.size != plan.size ||
      !token_equals(theirs, plan.mesh_token)) {
    throw Error(Status::RemoteError, "the listener at " + net::to_string(peer.address) +
                                         " is not rank " + std::to_string(peer.rank) +
                                         " of this communicator");
  }
  return socket;
}

/// Authenticates and identifies one accepted connection. Returns the peer's
/// rank, or throws with the reason to drop it.
int admit(int fd, const TcpMeshPlan& plan, const std::vector<net::Socket>& sockets) {
  Deadline deadline = std::min(plan.deadline, Clock::now() + kAcceptHandshakeTime);
  auth::handshake_as_server(fd, plan.secret, kPurpose, deadline);
  Identification theirs = read_identification(fd, deadline);
  int rank = theirs.rank;
  bool expected =
      std::find(plan.accept_from.begin(), plan.accept_from.end(), rank) != plan.accept_from.end();
  if (theirs.magic != Identification{}.magic || theirs.size != plan.size ||
      !token_equals(theirs, plan.mesh_token)) {
    throw Error(Status::RemoteError, "it is not a member of this communicator");
  }
  if (!expected || sockets[rank].valid()) {
    throw Error(Status::RemoteError, "it claims rank " + std::to_string(rank) +
                                         ", which is not expected to connect here");
  }
  Identification mine = make_identification(plan.rank, plan.size, plan.mesh_token);
  net::write_full(fd, &mine, sizeof(mine), deadline);
  return rank;
}

std::string missing_ranks(const TcpMeshPlan& plan, const std::vector<net::Socket>& sockets) {
  std::string list;
  for (int r : plan.accept_from) {
    if (!sockets[r].valid()) list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  return list;
}

void accept_all(const net::Socket& listener, const TcpMeshPlan& plan,
                std::vector<net::Socket>& sockets) {
  std::size_t admitted = 0;
  while (admitted < plan.accept_from.size()) {
    net::Socket socket = net::accept_until(listener, plan.deadline);
    if (!socket.valid()) {
      throw Error(Status::Timeout, "timed out waiting for rank(s) " + missing_ranks(plan, sockets) +
                                       " to open their data connection to rank " +
                                       std::to_string(plan.rank));
    }
    // Named now: once a stranger has hung up, its socket no longer has a peer to name.
    std::string from = net::detail::peer_name(socket.fd());
    if (from.empty()) from = "an address that was gone at once";
    try {
      int rank = admit(socket.fd(), plan, sockets);
      sockets[rank] = std::move(socket);
      ++admitted;
    } catch (const Error& error) {
      log(LogLevel::Warn, "rank " + std::to_string(plan.rank) + " dropped a data connection from " +
                              from + ": " + error.what());
    }
  }
}

}  // namespace

Identification make_identification(int rank, int size, const std::string& mesh_token) {
  Identification id;
  id.rank = rank;
  id.size = size;
  std::memcpy(id.mesh_token, mesh_token.data(), std::min(mesh_token.size(), sizeof(id.mesh_token)));
  return id;
}

std::vector<net::Socket> connect_tcp_mesh(const net::Socket& listener, const TcpMeshPlan& plan) {
  std::vector<net::Socket> sockets(plan.size);
  for (const TcpPeer& peer : plan.connect_to) sockets[peer.rank] = connect_to(peer, plan);
  if (!plan.accept_from.empty()) accept_all(listener, plan, sockets);
  return sockets;
}

}  // namespace chorus::transport::tcp
