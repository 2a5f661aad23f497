// The store server: one thread, one poll() loop over the listener, a wake-up
// pipe and every client. Nothing in the loop blocks on a single client:
// sockets are non-blocking, the handshake is the ServerHandshake state machine,
// and a Get/Wait whose keys are missing is parked and answered when a later
// Set/Add provides them (or with a Timeout reply when its time runs out).
// A client is served one request at a time: its next request is read only
// after the previous reply was fully sent, which bounds the memory it can use.
#include "bootstrap/address.hpp"
#include "bootstrap/store_server_impl.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace chorus {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kAcceptsPerRound = 64;

}  // namespace

using store_server_detail::bytes_needed;
using store_server_detail::kHandshakeTimeout;
using store_server_detail::wants_input;

StoreServer::Impl::Impl(const std::string& host, std::uint16_t port, std::string secret_text)
    : secret(std::move(secret_text)), listener(net::listen_tcp(host, port)) {
  bound_port = net::local_port(listener);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(Status::SystemError,
                "store server: pipe2 failed: " + net::detail::error_text(errno));
  }
  wake_read = net::Socket(fds[0]);
  wake_write = net::Socket(fds[1]);
}

void StoreServer::Impl::run() {
  while (!stopping.load()) {
    try {
      serve_once();
    } catch (const std::exception& e) {
      // Only loop-wide failures land here (poll itself); pause so they cannot spin.
      log(LogLevel::Error, std::string("store server: ") + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void StoreServer::Impl::serve_once() {
  std::vector<pollfd> fds = poll_set();
  int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (rc < 0 && errno != EINTR) {
    throw Error(Status::SystemError, "poll failed: " + net::detail::error_text(errno));
  }
  if (stopping.load()) return;
  if (fds[0].revents) drain_wake_pipe();
  std::size_t polled = fds.size() - 2;  // connections accepted below were not polled
  if (fds[1].revents) accept_new();
  for (std::size_t i = 0; i < polled; ++i) {
    if (fds[i + 2].revents) on_events(*connections[i], fds[i + 2].revents);
  }
  handle_buffered_units();
  expire_timers();
  std::erase_if(connections, [](const auto& c) { return c->dead; });
}

/// The wake-up pipe, the listener (unless accepting is paused), then every
/// connection in order. A connection asks for input only when it may read its
/// next unit; it always asks for POLLRDHUP so that a client vanishing while
/// parked is noticed.
std::vector<pollfd> StoreServer::Impl::poll_set() const {
  std::vector<pollfd> fds;
  fds.reserve(connections.size() + 2);
  fds.push_back({wake_read.fd(), POLLIN, 0});
  bool accepting = Clock::now() >= accept_paused_until;
  fds.push_back({listener.fd(), static_cast<short>(accepting ? POLLIN : 0), 0});
  for (const auto& c : connections) {
    short events = POLLRDHUP;
    if (wants_input(*c)) events |= POLLIN;
    if (c->out_sent < c->out.size()) events |= POLLOUT;
    fds.push_back({c->socket.fd(), events, 0});
  }
  return fds;
}

void StoreServer::Impl::drain_wake_pipe() {
  char drain[64];
  while (::read(wake_read.fd(), drain, sizeof(drain)) > 0) {
  }
}

int StoreServer::Impl::poll_timeout_ms() const {
  std::optional<Deadline> next;
  auto consider = [&next](Deadline d) { next = next ? std::min(*next, d) : d; };
  if (Clock::now() < accept_paused_until) consider(accept_paused_until);
  for (const auto& c : connections) {
    if (c->handshake) consider(c->handshake_deadline);
    if (c->parked) consider(c->parked_deadline);
  }
  return next ? remaining_ms(*next) : -1;
}

void StoreServer::Impl::accept_new() {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int code = errno;
      if (code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM) {
        // Out of descriptors: the listener stays readable, so pause instead of spinning.
        log(LogLevel::Warn, "store server: accept failed: " + net::detail::error_text(code));
        accept_paused_until = deadline_after(std::chrono::milliseconds(100));
      }
      return;  // EAGAIN (no more), or a connection that vanished
    }
    auto c = std::make_unique<Connection>();
    c->socket = net::Socket(fd);
    c->peer = net::detail::peer_name(fd);
    c->handshake.emplace(secret, "store");
    c->handshake_deadline = deadline_after(kHandshakeTimeout);
    const auto& challenge = c->handshake->challenge();
    reply(*c, std::string(challenge.begin(), challenge.end()));
    connections.push_back(std::move(c));
  }
}

void StoreServer::Impl::on_events(Connection& c, short revents) {
  if (revents & POLLOUT) flush(c);
  if (c.dead) return;
  if (wants_input(c) && (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) {
    read_some(c);
  } else if (revents & (POLLRDHUP | POLLHUP | POLLERR)) {
    drop(c, LogLevel::Info, "closed the connection while a request was pending");
  }
}

void StoreServer::Impl::read_some(Connection& c) {
  char buffer[kReadChunk];
  ssize_t n = ::recv(c.socket.fd(), buffer, sizeof(buffer), MSG_DONTWAIT);
  if (n > 0) {
    c.in.append(buffer, static_cast<std::size_t>(n));
    return;
  }
  int code = n < 0 ? errno : 0;
  if (code == EAGAIN || code == EWOULDBLOCK || code == EINTR) return;
  if (code != 0 && code != ECONNRESET) {
    return drop(c, LogLevel::Warn, "receive failed: " + net::detail::error_text(code));
  }
  // End of stream, or a reset (a peer closing with our bytes unread sends RST).
  if (c.handshake) {
    drop(c, LogLevel::Warn, "closed the connection before authenticating");
  } else {
    drop(c, LogLevel::Info, c.in.empty() ? "disconnected" : "disconnected mid-request");
  }
}

void StoreServer::Impl::reply(Connection& c, std::string frame) {
  if (c.out_sent == c.out.size()) {
    c.out = std::move(frame);
    c.out_sent = 0;
  } else {
    c.out += frame;
  }
  flush(c);
}

void StoreServer::Impl::flush(Connection& c) {
  while (!c.dead && c.out_sent < c.out.size()) {
    ssize_t n = ::send(c.socket.fd(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      c.out_sent += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;  // POLLOUT resumes
    } else if (errno != EINTR) {
      drop(c, LogLevel::Info, "send failed: " + net::detail::error_text(errno));
    }
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out.shrink_to_fit();  // a large Get reply should not stay allocated
    c.out_sent = 0;
  }
}

void StoreServer::Impl::drop(Connection& c, LogLevel level, const std::string& why) {
  if (c.dead) return;
  c.dead = true;
  c.socket.close();
  if (log_enabled(level)) {
    std::string who = c.peer.empty() ? "a client" : c.peer;
    log(level, "store server: dropped connection from " + who + ": " + why);
  }
}

StoreServer::StoreServer(const std::string& host, std::uint16_t port, const std::string& secret)
    : impl_(std::make_unique<Impl>(host, port, secret)) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

StoreServer::~StoreServer() {
  impl_->stopping.store(true);
  char byte = 1;
  ssize_t ignored = ::write(impl_->wake_write.fd(), &byte, 1);
  (void)ignored;
  impl_->thread.join();
}

std::uint16_t StoreServer::port() const { return impl_->bound_port; }

}  // namespace chorus