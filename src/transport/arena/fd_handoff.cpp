// Descriptor hand-off over abstract Unix sockets; see fd_handoff.hpp.
#include "transport/arena/fd_handoff.hpp"

#include "bootstrap/auth.hpp"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::transport {
namespace {

[[noreturn]] void throw_system(const std::string& what, int code) {
  throw Error(Status::SystemError, what + ": " + std::strerror(code));
}

/// The abstract address of `name` (a leading NUL: no file in any directory).
sockaddr_un address_of(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

uid_t peer_uid(int socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
  return credentials.uid;
}

/// One byte with room for one descriptor (SCM_RIGHTS) beside it: what send_fd sends and
/// receive_fd receives. Not copyable: `message` points into the object itself.
struct FdMessage {
  char byte = 0;
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  FdMessage() {
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

void send_fd(int socket, int fd) {
  FdMessage sent;
  msghdr& message = sent.message;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  while (::sendmsg(socket, &message, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

/// Closes a descriptor on scope exit.
struct Closer {
  int fd;
  ~Closer() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FdServer::FdServer(int fd) : fd_(fd), name_("chorus-fd-" + auth::random_hex(16)) {
  listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener_ < 0) throw_system("cannot open a Unix socket to share memory", errno);
  socklen_t length = 0;
  const sockaddr_un address = address_of(name_, length);
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, SOMAXCONN) != 0) {
    const int code = errno;
    ::close(listener_);
    throw_system("cannot listen on Unix socket @" + name_, code);
  }
  wake_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_ < 0) {
    const int code = errno;
    ::close(listener_);
    throw_system("cannot create an eventfd", code);
  }
  thread_ = std::thread([this] { serve(); });
}

void FdServer::serve() noexcept {
  const uid_t uid = ::getuid();
  pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    for (;;) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) break;  // EAGAIN: all taken
      if (peer_uid(client) == uid) send_fd(client, fd_);
      ::close(client);
    }
  }
}

void FdServer::stop() noexcept {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  while (::write(wake_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(listener_);
  ::close(wake_);
}

int receive_fd(const std::string& name, Deadline deadline) {
  Closer socket{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (socket.fd < 0) throw_system("cannot open a Unix socket to map shared memory", errno);
  // Bounds connect (a full backlog) and the wait for the descriptor.
  const int ms = std::max(1, remaining_ms(deadline));
  const timeval limit{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(socket.fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  socklen_t length = 0;
  const sockaddr_un address = address_of(name, length);
  if (::connect(socket.fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    throw_system("cannot reach the owner of shared memory @" + name, errno);
  }
  if (peer_uid(socket.fd) != ::getuid()) {
    throw Error(Status::InternalError, "shared memory @" + name + " is offered by another user");
  }
  FdMessage received;
  msghdr& message = received.message;
  ssize_t got;
  do {
    got = ::recvmsg(socket.fd, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) throw_system("no shared memory from @" + name, errno);
  const cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (got == 0 || !header || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS ||
      header->cmsg_len != CMSG_LEN(sizeof(int))) {
    throw Error(Status::SystemError, "the owner of shared memory @" + name + " sent no descriptor");
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return fd;
}

}  // namespace chorus::transport
