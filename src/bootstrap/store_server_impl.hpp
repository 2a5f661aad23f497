// Private to the store server: its per-client state and the parts of its loop.
// store_server.cpp has the lifecycle, the epoll loop and the socket I/O;
// store_server_requests.cpp the handshake and the requests.
//
// Each round of the loop costs what its events need, not a pass over every client: clients
// stay registered in one epoll set (their interest changed only when it changes), a parked
// Get/Wait is indexed by the first key it lacks (a Set or Add looks only at the clients
// waiting for its key), and deadlines (handshakes, parked requests) sit in one ordered set.
#pragma once

#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_table.hpp"
#include "core/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
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
  std::string parked_on;  ///< the key of `parked` it is indexed under (one it lacks)
  bool dead = false;
  std::uint32_t registered = 0;   ///< the epoll events it is registered for
  std::optional<Deadline> timer;  ///< the deadline it has in the server's timers
  bool touched = false;           ///< in this round's list of clients whose state may change

  /// Its pending deadline: the handshake's, or the parked request's.
  std::optional<Deadline> deadline() const {
    if (handshake) return handshake_deadline;
    if (parked) return parked_deadline;
    return std::nullopt;
  }

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
  using Timer = std::pair<Deadline, Connection*>;

  Impl(const std::string& host, std::uint16_t port, std::string secret_text);
  void run();

  // One round of the loop and its parts.
  void serve_once();
  void watch(int fd, std::uint32_t events, void* tag);
  void drain_wake_pipe();
  void handle_buffered_units();
  int poll_timeout_ms();
  void accept_new();
  void on_events(Connection& c, std::uint32_t events);
  void read_some(Connection& c);
  bool handle_next_unit(Connection& c);
  void authenticate(Connection& c);
  void handle_request(Connection& c);
  void park(Connection& c, store_wire::Request request);
  void reply(Connection& c, std::string frame);
  void flush(Connection& c);
  void wake_parked(const std::string& key);
  void expire_timers();
  void drop(Connection& c, LogLevel level, const std::string& why);
  /// Notes that `c`'s state may change in this round: its buffered units, interest and timer
  /// are settled at the round's end (settle).
  void touch(Connection& c);
  void settle();
  void unpark(Connection& c);

  std::string secret;
  net::Socket listener;
  net::Socket wake_read;
  net::Socket wake_write;
  net::Socket epoll;
  std::uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};
  StoreTable table;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections;
  std::unordered_multimap<std::string, Connection*> parked_by_key;
  std::set<Timer> timers;
  std::vector<Connection*> touched;  ///< this round's clients whose state may change
  bool accepting = true;             ///< the listener is registered for input
  Deadline accept_paused_until{};
  std::thread thread;
};

}  // namespace chorus
