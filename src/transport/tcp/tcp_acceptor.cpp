// The acceptor thread of TcpLinks (tcp_links.hpp): one poll() loop over the listener and every
// connection being admitted, so that no connection (a silent stranger) delays another.
#include "transport/tcp/tcp_links_impl.hpp"

#include "bootstrap/address.hpp"
#include "core/log.hpp"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::transport::tcp {
namespace {

using namespace std::chrono_literals;

/// Longest one connection may take to authenticate and identify itself.
constexpr auto kAdmissionTime = 5s;
/// Connections admitted side by side; more are closed at once (a flood of strangers).
constexpr std::size_t kMaxAdmissions = 1024;
/// How long the listener is left alone after accept() lacked descriptors or memory.
constexpr auto kAcceptPause = 100ms;

constexpr char kPurpose[] = "data";

template <std::size_t N>
void send_frame(int fd, const std::array<std::uint8_t, N>& frame) {
  const ssize_t n = ::send(fd, frame.data(), N, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(N)) throw Error(Status::RemoteError, "it hung up");
}

}  // namespace

void TcpLinks::serve() {
  std::vector<Admission> admissions;
  std::vector<pollfd> fds;
  Clock::time_point listen_again{};  // accept() lacked descriptors or memory: a pause
  for (;;) {
    const bool listening = Clock::now() >= listen_again;
    fds.assign({pollfd{stop_fd_, POLLIN, 0}, pollfd{listening ? listener_.fd() : -1, POLLIN, 0}});
    int timeout = listening ? -1 : remaining_ms(listen_again);
    for (const Admission& a : admissions) {
      fds.push_back(pollfd{a.socket.fd(), POLLIN, 0});
      const int left = remaining_ms(a.deadline);
      timeout = timeout < 0 ? left : std::min(timeout, left);
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      log(LogLevel::Error,
          "rank " + std::to_string(plan_.rank) +
              " stopped admitting TCP links: poll failed: " + std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    std::vector<Admission> going_on;
    for (std::size_t i = 0; i < admissions.size(); ++i) {
      Admission& a = admissions[i];
      bool finished = fds[i + 2].revents != 0 && step(a);
      if (!finished && expired(a.deadline)) {
        drop(a, "it did not authenticate and identify itself within 5 s");
        finished = true;
      }
      if (!finished) going_on.push_back(std::move(a));
    }
    admissions = std::move(going_on);
    if ((fds[1].revents & POLLIN) && !accept_new(admissions)) {
      listen_again = Clock::now() + kAcceptPause;
    }
  }
}

bool TcpLinks::accept_new(std::vector<Admission>& admissions) const {
  for (;;) {
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
      log(LogLevel::Warn, "rank " + std::to_string(plan_.rank) +
                              " cannot accept a data connection now: " + std::strerror(errno));
      return false;
    }
    if (fd < 0) return true;  // EAGAIN: none left; other errors: that connection is gone
    net::Socket socket(fd);
    net::set_nodelay(fd);
    // Named now: once a stranger has hung up, its socket no longer has a peer to name.
    std::string from = net::detail::peer_name(fd);
    if (from.empty()) from = "an address that was gone at once";
    Admission admission{std::move(socket), std::move(from), Clock::now() + kAdmissionTime,
                        auth::ServerHandshake(plan_.secret, kPurpose)};
    if (admissions.size() >= kMaxAdmissions) {
      drop(admission, "too many connections are being admitted at once");
      continue;
    }
    try {
      send_frame(fd, admission.handshake.challenge());
      admissions.push_back(std::move(admission));
    } catch (const Error& error) {
      drop(admission, error.what());
    }
  }
}

bool TcpLinks::step(Admission& a) {
  try {
    const ssize_t n =
        ::recv(a.socket.fd(), a.bytes.data() + a.have, a.need() - a.have, MSG_DONTWAIT);
    if (n == 0) throw Error(Status::RemoteError, "it hung up");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
      throw Error(Status::RemoteError, std::string("recv failed: ") + std::strerror(errno));
    }
    a.have += static_cast<std::size_t>(n);
    if (a.have < a.need()) return false;
    a.have = 0;
    if (!a.authenticated) {
      try {
        send_frame(a.socket.fd(), a.handshake.verify(a.bytes.data()));
      } catch (const Error&) {
        ssize_t ignored = ::send(a.socket.fd(), auth::ServerHandshake::reject_frame().data(),
                                 auth::ServerHandshake::kVerdictBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)ignored;
        throw;
      }
      a.authenticated = true;
      return false;
    }
    Identification id;
    std::memcpy(&id, a.bytes.data(), sizeof(id));
    admit(id, a.socket);
    return true;
  } catch (const Error& error) {
    drop(a, error.what());
    return true;
  }
}

void TcpLinks::drop(const Admission& a, const std::string& reason) const {
  log(LogLevel::Warn, "rank " + std::to_string(plan_.rank) + " dropped a data connection from " +
                          a.from + ": " + reason);
}

}  // namespace chorus::transport::tcp
