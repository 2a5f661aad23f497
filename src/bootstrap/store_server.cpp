// The store server: one thread, one epoll loop over the listener, a wake-up
// pipe and every client. Nothing in the loop blocks on a single client:
// sockets are non-blocking, the handshake is the ServerHandshake state machine,
// and a Get/Wait whose keys are missing is parked and answered when a later
// Set/Add provides them (or with a Timeout reply when its time runs out).
// A client is served one request at a time: its next request is read only
// after the previous reply was fully sent, which bounds the memory it can use.
// A round touches only the clients its events concern (store_server_impl.hpp).
#include "bootstrap/address.hpp"
#include "bootstrap/store_server_impl.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

namespace chorus {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kAcceptsPerRound = 64;
constexpr int kEventsPerRound = 256;

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
  epoll = net::Socket(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    throw Error(Status::SystemError,
                "store server: epoll_create1 failed: " + net::detail::error_text(errno));
  }
  watch(wake_read.fd(), EPOLLIN, &wake_read);
  watch(listener.fd(), EPOLLIN, &listener);
}

void StoreServer::Impl::run() {
  while (!stopping.load()) {
    try {
      serve_once();
    } catch (const std::exception& e) {
      // Only loop-wide failures land here (epoll itself); pause so they cannot spin.
      log(LogLevel::Error, std::string("store server: ") + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

/// Registers `fd` (tagged `tag`) for `events`, or changes its events.
void StoreServer::Impl::watch(int fd, std::uint32_t events, void* tag) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = tag;
  if (::epoll_ctl(epoll.fd(), EPOLL_CTL_MOD, fd, &event) == 0) return;
  if (errno == ENOENT && ::epoll_ctl(epoll.fd(), EPOLL_CTL_ADD, fd, &event) == 0) return;
  throw Error(Status::SystemError,
              "store server: epoll_ctl failed: " + net::detail::error_text(errno));
}

void StoreServer::Impl::serve_once() {
  epoll_event events[kEventsPerRound];
  int n = ::epoll_wait(epoll.fd(), events, kEventsPerRound, poll_timeout_ms());
  if (n < 0) {
    if (errno != EINTR) {
      throw Error(Status::SystemError, "epoll_wait failed: " + net::detail::error_text(errno));
    }
    n = 0;
  }
  if (stopping.load()) return;
  for (int i = 0; i < n; ++i) {
    void* tag = events[i].data.ptr;
    if (tag == &wake_read) {
      drain_wake_pipe();
    } else if (tag == &listener) {
      accept_new();
    } else {
      on_events(*static_cast<Connection*>(tag), events[i].events);
    }
  }
  if (!accepting && Clock::now() >= accept_paused_until) {
    accepting = true;
    watch(listener.fd(), EPOLLIN, &listener);
  }
  handle_buffered_units();
  expire_timers();
  settle();
}

void StoreServer::Impl::drain_wake_pipe() {
  char drain[64];
  while (::read(wake_read.fd(), drain, sizeof(drain)) > 0) {
  }
}

int StoreServer::Impl::poll_timeout_ms() {
  std::optional<Deadline> next;
  if (!accepting) next = accept_paused_until;
  if (!timers.empty() && (!next || timers.begin()->first < *next)) next = timers.begin()->first;
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
        accepting = false;
        watch(listener.fd(), 0, &listener);
      }
      return;  // EAGAIN (no more), or a connection that vanished
    }
    auto owned = std::make_unique<Connection>();
    Connection& c = *owned;
    c.socket = net::Socket(fd);
    c.peer = net::detail::peer_name(fd);
    c.handshake.emplace(secret, "store");
    c.handshake_deadline = deadline_after(kHandshakeTimeout);
    connections.emplace(&c, std::move(owned));
    touch(c);
    const auto& challenge = c.handshake->challenge();
    reply(c, std::string(challenge.begin(), challenge.end()));
  }
}

void StoreServer::Impl::on_events(Connection& c, std::uint32_t events) {
  touch(c);
  if (events & EPOLLOUT) flush(c);
  if (c.dead) return;
  if (wants_input(c) && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    read_some(c);
  } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    drop(c, LogLevel::Info, "closed the connection while a request was pending");
  }
}

void StoreServer::Impl::touch(Connection& c) {
  if (c.touched) return;
  c.touched = true;
  touched.push_back(&c);
}

/// For every client touched this round: removes it when it died, else registers the events
/// it now needs (input only when it may read its next unit; always EPOLLRDHUP, so that a
/// client vanishing while parked is noticed) and files its deadline.
void StoreServer::Impl::settle() {
  for (Connection* c : touched) {
    c->touched = false;
    if (c->timer) timers.erase({*c->timer, c});
    c->timer.reset();
    if (c->dead) {
      connections.erase(c);  // closing its socket took it out of the epoll set
      continue;
    }
    c->timer = c->deadline();
    if (c->timer) timers.insert({*c->timer, c});
    std::uint32_t events = EPOLLRDHUP;
    if (wants_input(*c)) events |= EPOLLIN;
    if (c->out_sent < c->out.size()) events |= EPOLLOUT;
    if (events != c->registered) {
      watch(c->socket.fd(), events, c);
      c->registered = events;
    }
  }
  touched.clear();
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
  touch(c);
  if (c.parked) unpark(c);
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