// The TcpLinks opener behind make_tcp_links (tcp_links.hpp): opening in tcp_links.cpp, the
// acceptor thread in tcp_acceptor.cpp.
#pragma once

#include "bootstrap/auth.hpp"
#include "transport/tcp/tcp_links.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace chorus::transport::tcp {

/// One accepted connection on its way in: the handshake's response, then the record.
struct Admission {
  net::Socket socket;
  std::string from;  ///< the peer's address, for the log line
  Deadline deadline;
  auth::ServerHandshake handshake;
  bool authenticated = false;
  std::array<std::uint8_t, auth::ServerHandshake::kResponseBytes> bytes{};
  std::size_t have = 0;  ///< bytes of the frame read so far
  std::size_t need() const {
    return authenticated ? sizeof(Identification) : auth::ServerHandshake::kResponseBytes;
  }
};

class TcpLinks final : public LinkOpener {
 public:
  TcpLinks(net::Socket listener, TcpLinksPlan plan);
  ~TcpLinks() override;
  TcpLinks(const TcpLinks&) = delete;
  TcpLinks& operator=(const TcpLinks&) = delete;

  void start(std::function<void()> wake) override;
  bool reaches(int peer) const override;
  std::unique_ptr<Link> open(int peer) override;
  bool has_arrivals() const override { return arrivals_waiting_.load(std::memory_order_acquire); }
  std::vector<std::pair<int, std::unique_ptr<Link>>> arrivals() override;
  void abort_arrivals(std::vector<std::byte> frame) override;

 private:
  /// Per peer: no link; this rank is connecting; the peer's link is here, not yet handed over;
  /// handed over (or failed to open: later connections claiming the peer are duplicates).
  enum class State { Idle, Dialing, Arrived, Taken };

  /// Connects and identifies; an invalid socket when the peer answered with a crossing record.
  net::Socket dial(int peer, Deadline deadline) const;
  /// The arrived link of `peer`, handed over. Caller holds mutex_.
  std::unique_ptr<Link> take(int peer);
  /// The verdict on an authenticated connection that sent `id`: answers it and keeps it as
  /// the peer's link, or answers with a crossing record; throws with the reason to drop it.
  void admit(const Identification& id, net::Socket& socket);

  /// The acceptor thread's loop (tcp_acceptor.cpp), until the destructor signals stop_fd_.
  void serve();
  /// Accepts every pending connection; false when accept() lacked descriptors or memory.
  bool accept_new(std::vector<Admission>& admissions) const;
  /// Moves one admission on; true when it is finished (handed over, answered or dropped).
  bool step(Admission& admission);
  void drop(const Admission& admission, const std::string& reason) const;

  TcpLinksPlan plan_;
  net::Socket listener_;
  int stop_fd_ = -1;
  std::function<void()> wake_;
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable arrived_signal_;
  std::vector<State> states_;           ///< by rank; guarded by mutex_
  std::vector<net::Socket> links_;      ///< arrived links by rank; guarded by mutex_
  std::vector<std::byte> abort_frame_;  ///< abort_arrivals(); guarded by mutex_
  std::atomic<bool> arrivals_waiting_{false};
  int opened_ = 0;    ///< links this rank opened (guarded by mutex_)
  int admitted_ = 0;  ///< links peers opened to this rank (guarded by mutex_)
};

}  // namespace chorus::transport::tcp
