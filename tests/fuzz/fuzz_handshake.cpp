// The connection handshake under hostile bytes, in both roles. The hostile side
// is a socketpair end on which the whole input was written up front and then shut
// down, so every read either finds its bytes or sees the end of the stream: the
// handshake must fail with an Error (never crash, never accept).
#include "bootstrap/auth.hpp"
#include "harnesses.hpp"

#include <chorus/error.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace chorus::fuzz {
namespace {

constexpr std::size_t kMaxHostileBytes = 4096;  // well under a socket buffer

struct SocketPair {
  int ours = -1;
  int theirs = -1;
  SocketPair() {
    int fds[2];
    require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair failed");
    ours = fds[0];
    theirs = fds[1];
  }
  ~SocketPair() {
    ::close(ours);
    ::close(theirs);
  }
};

/// Writes the hostile bytes on `fd` and shuts down its sending direction.
void send_all_then_close(int fd, const std::uint8_t* data, std::size_t size) {
  size = std::min(size, kMaxHostileBytes);
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    require(n > 0, "writing the hostile bytes failed");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
}

/// Runs one role against the hostile bytes; a success would mean the bytes
/// forged a MAC over a fresh random nonce, which cannot happen.
template <typename Role>
void run_role(Role role, const std::uint8_t* data, std::size_t size) {
  SocketPair pair;
  send_all_then_close(pair.theirs, data, size);
  try {
    role(pair.ours, std::string("fuzz-secret"), "store",
         deadline_after(std::chrono::milliseconds(1000)));
  } catch (const Error& e) {
    require(e.status() == Status::RemoteError, "a hostile handshake must fail with RemoteError");
    return;
  }
  require(false, "a hostile handshake was accepted");
}

}  // namespace

void handshake(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  bool as_server = (data[0] & 1) != 0;
  ++data;
  --size;
  if (as_server) {
    if (size >= auth::ServerHandshake::kResponseBytes) {
      // The store server's event loop calls verify() directly.
      auth::ServerHandshake state("fuzz-secret", "store");
      try {
        state.verify(data);
        require(false, "a hostile response was verified");
      } catch (const Error& e) {
        require(e.status() == Status::RemoteError, "verify must fail with RemoteError");
      }
    }
    run_role(auth::handshake_as_server, data, size);
  } else {
    run_role(auth::handshake_as_client, data, size);
  }
}

}  // namespace chorus::fuzz
