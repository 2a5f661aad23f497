// Private to the store server: its per-client state and the parts of its loop.
// store_server.cpp has the lifecycle, the poll loop and the socket I/O;
// store_server_requests.cpp the handshake and the requests.
#pragma once

#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_table.hpp"
#include "core/log.hpp"

#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace store_server_detail {

/// A client that does not finish the handshake in this time is dropped.
inline constexpr auto kHandshakeTimeout = std::chrono::seconds(5);

struct Connection {
  net::Socket socket;
  std::string peer;
  std::optional<auth::ServerHandshake> handshake;  ///< engaged until the client is authenticated
  Deadline handshake_deadline;
  std::string in;   ///< received bytes not yet consumed
  std::string out;  ///< reply bytes not yet sent, from out_sent on
  std::size_t out_sent = 0;
  std::optional<store_wire::Request> parked;  ///< a Get/Wait waiting for keys
  Deadline parked_deadline;
  bool dead = false;

  bool blocked() const { return dead || parked || out_sent < out.size(); }
};

/// Bytes `in` must hold before the connection's next unit (handshake response or
/// request frame) can be handled. A header whose length is out of range needs no more.
std::size_t bytes_needed(const Connection& c);

/// True when the loop should read from `c`: it may proceed and lacks bytes.
inline bool wants_input(const Connection& c) {
  return !c.blocked() && c.in.size() < bytes_needed(c);
}

}  // namespace store_server_detail

struct StoreServer::Impl {
  using Connection = store_server_detail::Connection;

  Impl(const std::string& host, std::uint16_t port, std::string secret_text);
  void run();

  // One round of the loop and its parts.
  void serve_once();
  std::vector<pollfd> poll_set() const;
  void drain_wake_pipe();
  void handle_buffered_units();
  int poll_timeout_ms() const;
  void accept_new();
  void on_events(Connection& c, short revents);
  void read_some(Connection& c);
  bool handle_next_unit(Connection& c);
  void authenticate(Connection& c);
  void handle_request(Connection& c);
  void reply(Connection& c, std::string frame);
  void flush(Connection& c);
  void wake_parked();
  void expire_timers();
  void drop(Connection& c, LogLevel level, const std::string& why);

  std::string secret;
  net::Socket listener;
  net::Socket wake_read;
  net::Socket wake_write;
  std::uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};
  StoreTable table;
  std::vector<std::unique_ptr<Connection>> connections;
  Deadline accept_paused_until{};
  std::thread thread;
};

}  // namespace chorus
