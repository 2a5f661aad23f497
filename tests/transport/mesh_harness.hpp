// Threads as ranks for transport tests: an in-process StoreServer on port 0,
// one store client per rank, and connect_mesh_as() so that a test can put
// ranks on several pretend hosts or give them other pids.
#pragma once

#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "transport/mesh_internal.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::transport::testing {

inline constexpr char kSecret[] = "transport-test-secret";

inline const char* kind_name(Kind kind) {
  return kind == Kind::Tcp ? "tcp" : kind == Kind::Shm ? "shm" : "auto";
}

/// Every rank on one pretend host with this process's pid.
inline LocalIdentity same_host(int) { return LocalIdentity{"test-host", ::getpid()}; }

/// Runs body(rank) on n threads; a throw becomes a test failure naming the rank.
inline void run_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw: " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

class Mesh {
 public:
  using Identity = std::function<LocalIdentity(int)>;

  /// `advertise`: MeshOptions::advertise_host (CHORUS_SOCKET_IFNAME) of every rank.
  Mesh(int n, Kind kind, Identity identity = same_host,
       std::chrono::milliseconds timeout = std::chrono::seconds(20),
       const std::string& advertise = "127.0.0.1")
      : server_("127.0.0.1", 0, kSecret), transports_(n) {
    for (int r = 0; r < n; ++r) stores_.push_back(client());
    run_threads(n, [&](int r) {
      MeshOptions options;
      options.kind = kind;
      options.secret = kSecret;
      options.advertise_host = advertise;
      options.deadline = deadline_after(timeout);
      transports_[r] = connect_mesh_as(*stores_[r], r, n, options, identity(r));
    });
  }

  bool ok() const {
    for (const auto& c : transports_) {
      if (!c.transport) return false;
    }
    return true;
  }
  int size() const { return static_cast<int>(transports_.size()); }
  Transport& operator[](int rank) { return *transports_[rank].transport; }
  /// Rank `rank`'s host arena (null unless every rank is on one host and shm is allowed).
  HostArena* arena(int rank) { return transports_[rank].arena.get(); }
  void destroy(int rank) {
    transports_[rank].arena.reset();
    transports_[rank].transport.reset();
  }
  Store& store(int rank) { return *stores_[rank]; }
  std::uint16_t store_port() const { return server_.port(); }

  /// Runs body(rank, transport) on every rank concurrently.
  void run(const std::function<void(int, Transport&)>& body) {
    run_threads(size(), [&](int r) { body(r, *transports_[r].transport); });
  }

  std::shared_ptr<Store> client() {
    return connect_store("127.0.0.1", server_.port(), kSecret,
                         deadline_after(std::chrono::seconds(10)));
  }

 private:
  StoreServer server_;
  std::vector<std::shared_ptr<Store>> stores_;
  std::vector<Connection> transports_;
};

/// Send and receive stamps of the `seq`-th message of a pair.
inline Fingerprint send_stamp(std::uint64_t seq, std::size_t bytes) {
  Fingerprint fp;
  fp.seq = seq;
  fp.count = bytes;
  fp.collective = Collective::Send;
  fp.dtype = static_cast<std::uint8_t>(DataType::Uint8);
  return fp;
}
inline Fingerprint recv_stamp(std::uint64_t seq, std::size_t bytes) {
  Fingerprint fp = send_stamp(seq, bytes);
  fp.collective = Collective::Recv;
  return fp;
}

/// Deterministic content of message `tag` from `from` to `to`.
inline std::vector<unsigned char> pattern(int from, int to, int tag, std::size_t bytes) {
  std::vector<unsigned char> data(bytes);
  std::uint32_t x = static_cast<std::uint32_t>(from) * 7919u +
                    static_cast<std::uint32_t>(to) * 104729u +
                    static_cast<std::uint32_t>(tag) * 15485863u + 1u;
  for (std::size_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    data[i] = static_cast<unsigned char>(x >> 24);
  }
  return data;
}

inline std::string text_of(const Error& e) { return e.what(); }
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Runs `call`, which must throw Error; returns it.
template <typename Call>
Error expect_error(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error was thrown";
  return Error(Status::Success, "");
}

/// Reads until the other side closes; fails the test if it does not within 20 s.
inline void expect_dropped(const net::Socket& socket, const char* who) {
  try {
    for (;;) {
      char byte;
      net::read_full(socket.fd(), &byte, 1, deadline_after(std::chrono::seconds(20)));
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError) << who << ": " << e.what();
  }
}

inline void wait_one(Transport& t, RequestId id,
                     std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  t.wait({&id, 1}, deadline_after(timeout));
}

}  // namespace chorus::transport::testing
