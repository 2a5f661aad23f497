// TCP link; see tcp_link.hpp.
#include "transport/tcp/tcp_link.hpp"

#include <chorus/error.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace chorus::transport::tcp {

TcpLink::TcpLink(int peer, net::Socket socket) : peer_(peer), socket_(std::move(socket)) {
  net::set_nonblocking(socket_.fd(), true);
  net::set_nodelay(socket_.fd());
}

std::size_t TcpLink::write_some(const void* data, std::size_t bytes) {
  for (;;) {
    // MSG_NOSIGNAL: a vanished peer is EPIPE here, never a SIGPIPE.
    ssize_t n = ::send(socket_.fd(), data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw_failure("send", errno);
  }
}

std::size_t TcpLink::read_some(void* data, std::size_t bytes) {
  for (;;) {
    ssize_t n = ::recv(socket_.fd(), data, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) throw_failure("recv", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw_failure("recv", errno);
  }
}

void TcpLink::throw_failure(const char* call, int code) const {
  std::string peer = "rank " + std::to_string(peer_);
  if (code == 0 || code == ECONNRESET || code == EPIPE || code == ENOTCONN || code == ETIMEDOUT) {
    throw Error(Status::RemoteError, peer + " closed the connection (process died or aborted)");
  }
  throw Error(Status::SystemError, std::string(call) + " on the connection to " + peer +
                                       " failed: " + std::strerror(code));
}

}  // namespace chorus::transport::tcp
