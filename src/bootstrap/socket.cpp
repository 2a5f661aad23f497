// TCP helpers with deadlines. Every blocking step is a poll() bounded by the
// remaining time, followed by a non-blocking system call, so a blocking or a
// non-blocking socket behaves the same and nothing waits past its deadline.
#include "bootstrap/socket.hpp"

#include "bootstrap/address.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace chorus::net {
namespace {

using detail::error_text;

[[noreturn]] void throw_system(const std::string& what, int code) {
  throw Error(Status::SystemError, what + ": " + error_text(code));
}

[[noreturn]] void throw_closed(int fd) {
  std::string peer = detail::peer_name(fd);
  throw Error(Status::RemoteError,
              peer.empty() ? "connection closed by peer" : "connection closed by peer " + peer);
}

bool is_closed_error(int code) { return code == ECONNRESET || code == EPIPE || code == ENOTCONN; }

/// Waits until `fd` is ready for `events`. Returns false when the deadline passed first.
/// Error and hang-up conditions count as ready: the next recv/send reports them.
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    int timeout = remaining_ms(deadline);
    if (timeout == 0) return false;
    pollfd entry{fd, events, 0};
    int rc = ::poll(&entry, 1, timeout);
    if (rc > 0) {
      if (entry.revents & POLLNVAL) throw Error(Status::SystemError, "poll on a closed descriptor");
      return true;
    }
    if (rc < 0 && errno != EINTR) throw_system("poll failed", errno);
  }
}

[[noreturn]] void throw_io_timeout(int fd, const char* verb, std::size_t done, std::size_t bytes) {
  std::string peer = detail::peer_name(fd);
  throw Error(Status::Timeout, std::string("timed out ") + verb + " " + std::to_string(bytes) +
                                   " bytes (" + std::to_string(done) + " done)" +
                                   (peer.empty() ? "" : " with " + peer));
}

/// Errors after which connecting again later may succeed (listener not up yet, backlog full).
bool is_retryable_connect_error(int code) {
  return code == ECONNREFUSED || code == ETIMEDOUT || code == ECONNRESET || code == ECONNABORTED ||
         code == EAGAIN || code == EINTR || code == EHOSTUNREACH || code == ENETUNREACH;
}

/// On loopback, a connect to a free ephemeral port can meet itself (TCP simultaneous
/// open) and "succeed". Such a socket has equal local and peer addresses.
bool is_self_connected(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_length = sizeof(local);
  socklen_t peer_length = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) return false;
  return local_length == peer_length && std::memcmp(&local, &peer, local_length) == 0;
}

/// One connection attempt to one resolved address. Returns the connected socket,
/// or an invalid one with the failure in `*error`.
Socket try_connect(const addrinfo& target, Deadline deadline, int* error) {
  Socket socket(::socket(target.ai_family, target.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         target.ai_protocol));
  if (!socket.valid()) throw_system("socket() failed", errno);
  if (::connect(socket.fd(), target.ai_addr, target.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *error = errno;
      return Socket();
    }
    if (!wait_ready(socket.fd(), POLLOUT, deadline)) {
      *error = ETIMEDOUT;
      return Socket();
    }
    int status = 0;
    socklen_t length = sizeof(status);
    if (getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &status, &length) != 0) status = errno;
    if (status != 0) {
      *error = status;
      return Socket();
    }
  }
  if (is_self_connected(socket.fd())) {
    *error = ECONNREFUSED;
    return Socket();
  }
  set_nonblocking(socket.fd(), false);
  set_nodelay(socket.fd());
  return socket;
}

/// One attempt at each address `address` resolves to, until one connects or the deadline
/// passes. An invalid socket has the last failure in `*error`. Throws InvalidArgument when
/// the name does not resolve (a temporary resolver failure is EAGAIN in `*error`).
Socket connect_once(const HostPort& address, Deadline deadline, int* error) {
  int gai = 0;
  auto list = detail::resolve(address.host, address.port, /*passive=*/false, &gai);
  if (!list && gai != EAI_AGAIN) {
    throw Error(Status::InvalidArgument,
                "cannot resolve " + to_string(address) + ": " + gai_strerror(gai));
  }
  *error = list ? ETIMEDOUT : EAGAIN;
  for (addrinfo* it = list.get(); it && !expired(deadline); it = it->ai_next) {
    Socket socket = try_connect(*it, deadline, error);
    if (socket.valid() || !is_retryable_connect_error(*error)) return socket;
  }
  return Socket();
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() { close(); }

void Socket::close() {
  // Linux releases the descriptor even when close() reports EINTR: never retry.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket listen_tcp(const std::string& host, std::uint16_t port, int backlog) {
  std::string where = to_string(HostPort{host.empty() ? "0.0.0.0" : host, port});
  int gai = 0;
  auto list = detail::resolve(host, port, /*passive=*/true, &gai);
  if (!list) {
    throw Error(Status::InvalidArgument, "cannot resolve " + where + ": " + gai_strerror(gai));
  }
  int last_error = 0;
  for (addrinfo* it = list.get(); it; it = it->ai_next) {
    Socket socket(
        ::socket(it->ai_family, it->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, it->ai_protocol));
    if (!socket.valid()) throw_system("socket() failed", errno);
    int one = 1;
    setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(socket.fd(), it->ai_addr, it->ai_addrlen) == 0 &&
        ::listen(socket.fd(), backlog) == 0) {
      return socket;
    }
    last_error = errno;
  }
  throw_system("cannot listen on " + where, last_error);
}

std::uint16_t local_port(const Socket& socket) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    throw_system("getsockname failed", errno);
  }
  if (storage.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
}

Socket accept_until(const Socket& listener, Deadline deadline) {
  for (;;) {
    if (!wait_ready(listener.fd(), POLLIN, deadline)) return Socket();
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return Socket(fd);
    }
    int code = errno;
    // The pending connection may have vanished between poll() and accept().
    if (code == EINTR || code == EAGAIN || code == EWOULDBLOCK || code == ECONNABORTED ||
        code == EPROTO) {
      continue;
    }
    throw_system("accept failed", code);
  }
}

Socket connect_tcp(const HostPort& address, Deadline deadline) {
  std::string where = to_string(address);
  auto pause = std::chrono::milliseconds(5);
  std::string last_error = "no attempt finished";
  for (;;) {
    int error = 0;
    Socket socket = connect_once(address, deadline, &error);
    if (socket.valid()) return socket;
    if (!is_retryable_connect_error(error)) throw_system("cannot connect to " + where, error);
    last_error = error_text(error);
    if (expired(deadline)) {
      throw Error(Status::Timeout,
                  "timed out connecting to " + where + " (last error: " + last_error + ")");
    }
    // Back off 5, 10, 20 .. 100 ms so that many ranks waiting for one listener stay cheap.
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

Socket connect_tcp_now(const HostPort& address, Deadline deadline) {
  int error = 0;
  Socket socket = connect_once(address, deadline, &error);
  if (socket.valid()) return socket;
  const std::string what = "cannot connect to " + to_string(address) + ": " + error_text(error);
  if (error == ETIMEDOUT) throw Error(Status::Timeout, what);
  if (is_retryable_connect_error(error)) throw Error(Status::RemoteError, what);
  throw Error(Status::SystemError, what);
}

void read_full(int fd, void* data, std::size_t bytes, Deadline deadline) {
  auto* cursor = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::recv(fd, cursor + done, bytes - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) throw_closed(fd);
    int code = errno;
    if (code == EINTR) continue;
    if (code == EAGAIN || code == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline)) throw_io_timeout(fd, "reading", done, bytes);
      continue;
    }
    if (is_closed_error(code)) throw_closed(fd);
    throw_system("recv failed", code);
  }
}

void write_full(int fd, const void* data, std::size_t bytes, Deadline deadline) {
  const auto* cursor = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    // MSG_NOSIGNAL: a closed peer is an EPIPE error here, never a SIGPIPE.
    ssize_t n = ::send(fd, cursor + done, bytes - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    int code = errno;
    if (code == EINTR) continue;
    if (code == EAGAIN || code == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, deadline)) throw_io_timeout(fd, "writing", done, bytes);
      continue;
    }
    if (is_closed_error(code)) throw_closed(fd);
    throw_system("send failed", code);
  }
}

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw_system("fcntl(F_GETFL) failed", errno);
  int wanted = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (wanted != flags && fcntl(fd, F_SETFL, wanted) != 0)
    throw_system("fcntl(F_SETFL) failed", errno);
}

void set_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    throw_system("setsockopt(TCP_NODELAY) failed", errno);
  }
}

}  // namespace chorus::net
