// Small TCP helpers shared by the store and the tcp transport. Every call that
// can block takes a deadline and throws chorus::Error (Timeout, SystemError,
// RemoteError when the peer closed) instead of blocking forever.
#pragma once

#include "core/deadline.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::net {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

/// Parses "host:port" (host may be a name, IPv4, or "[v6]"). Throws InvalidArgument.
HostPort parse_host_port(const std::string& text);
/// "host:port", with brackets around an IPv6 host; parse_host_port reads it back.
std::string to_string(const HostPort& address);

/// Owns a file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

 private:
  int fd_ = -1;
};

/// Listens on host:port (port 0 picks one; host "" or "0.0.0.0" for every IPv4
/// interface, "::" for IPv6). The listener is non-blocking and has SO_REUSEADDR.
Socket listen_tcp(const std::string& host, std::uint16_t port, int backlog = 128);
/// Port a listening socket is bound to.
std::uint16_t local_port(const Socket& socket);
/// Accepts one connection, or returns an invalid Socket when the deadline passes first.
/// The accepted socket is blocking, close-on-exec, with TCP_NODELAY.
Socket accept_until(const Socket& listener, Deadline deadline);
/// Connects, retrying refused connections until the deadline (the listener may start later).
/// Returns a blocking, close-on-exec socket with TCP_NODELAY. Throws Timeout at the
/// deadline, InvalidArgument when the host name does not resolve.
Socket connect_tcp(const HostPort& address, Deadline deadline);
/// Connects without retrying: for a listener that is known to have started, so that a refusal
/// means it is gone. Throws RemoteError when refused, reset or unreachable, Timeout when
/// nothing answered by the deadline, InvalidArgument when the host name does not resolve.
Socket connect_tcp_now(const HostPort& address, Deadline deadline);

/// Reads/writes exactly `bytes` bytes; the socket may be blocking or not.
/// Throws RemoteError ("connection closed by peer ...") on EOF, reset or broken
/// pipe (never raises SIGPIPE), Timeout when the deadline passes first.
void read_full(int fd, void* data, std::size_t bytes, Deadline deadline);
void write_full(int fd, const void* data, std::size_t bytes, Deadline deadline);

void set_nonblocking(int fd, bool on);
void set_nodelay(int fd);

/// The local address a connected socket goes out from (numeric).
std::string local_address_of(const Socket& connected);

}  // namespace chorus::net
