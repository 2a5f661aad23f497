// The key-value store every rank uses to find the others (rendezvous).
// Values are byte strings. Every blocking call has a deadline.
#pragma once

#include "core/deadline.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Waits until `key` exists, then returns its value. Throws Timeout naming the key.
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
  /// Adds `delta` to the integer stored at `key` (absent = 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Waits until every key exists. Throws Timeout naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
  /// True when every key exists now.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Removes a key; true when it existed.
  virtual bool erase(const std::string& key) = 0;
};

/// A view of another store with every key prefixed by `prefix` + "/".
std::unique_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, const std::string& prefix);

/// Client of a StoreServer. Thread-safe (one request at a time). Authenticates
/// with `secret` (see bootstrap/auth.hpp) before any request.
/// `deadline` bounds connecting and the handshake (the server may start later:
/// refused connections are retried). Requests without a deadline of their own
/// (set, add, check, erase) wait at most CHORUS_TIMEOUT (read now) for the reply.
/// Errors: Timeout; RemoteError "store at host:port closed the connection";
/// RemoteError "cannot join the store ...: authentication failed ..." for a wrong
/// secret; InvalidArgument for a key over 4 KiB, a value over 256 MiB, or add()
/// on a value that is not a decimal integer. After a Timeout or RemoteError the
/// client is broken and every later call throws the same error.
std::unique_ptr<Store> connect_store(const std::string& host, std::uint16_t port,
                                     const std::string& secret, Deadline deadline);
/// Same, with an explicit bound for requests that take no deadline.
std::unique_ptr<Store> connect_store(const std::string& host, std::uint16_t port,
                                     const std::string& secret, Deadline deadline,
                                     std::chrono::milliseconds request_timeout);

/// An in-process store (threads as ranks, tests): same semantics as the TCP
/// store, no sockets. Thread-safe.
std::unique_ptr<Store> make_memory_store();

/// The store server: a thread serving many clients over TCP. Strangers that fail
/// authentication (or do not finish it within 5 s), and clients that send
/// malformed requests, are disconnected with a log line; other clients are not
/// disturbed. Limits: keys up to 4 KiB, values up to 256 MiB. add() keeps its
/// counter as decimal text, so get() of a counter returns e.g. "3".
class StoreServer {
 public:
  /// Binds host:port (port 0 picks a free port) and starts serving.
  StoreServer(const std::string& host, std::uint16_t port, const std::string& secret);
  /// Stops the thread promptly and closes every connection.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus
