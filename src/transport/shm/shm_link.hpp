// Link to a peer on the same host through two SPSC rings: the peer's ring in
// my inbox (rx) and my ring in the peer's inbox (tx). Writing rings the peer's
// doorbell (bytes to read); reading rings it too (space to write).
//
// Peer loss: the destructor closes both rings (producer side of tx, consumer
// side of rx) and rings the peer, so a peer in the same process sees
// "closed the connection"; check_peer() notices a peer process that died
// without running its destructor (the mesh's ProcessWatch: no such pid, or a
// zombie its parent has not reaped yet).
#pragma once

#include "transport/link.hpp"
#include "transport/shm/inbox.hpp"
#include "transport/shm/process_state.hpp"

#include <sys/types.h>

namespace chorus::transport::shm {

class ShmLink final : public Link {
 public:
  /// `mine` is this rank's inbox, `theirs` the peer's; `my_slot`/`peer_slot`
  /// are the two ranks' indices among the host's ranks; the peer's process is
  /// `watch`'s process `peer_slot`, whose pid is `peer_pid`.
  ShmLink(int peer, pid_t peer_pid, const Inbox& mine, const Inbox& theirs, int my_slot,
          int peer_slot, std::shared_ptr<ProcessWatch> watch);
  ~ShmLink() override;
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  std::size_t write_some(const void* data, std::size_t bytes) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  int poll_fd() const override { return -1; }
  void check_peer() override;
  std::string_view kind() const override { return "shm"; }

 private:
  [[noreturn]] void throw_gone() const;

  int peer_;
  pid_t peer_pid_;
  int peer_slot_;
  std::shared_ptr<ProcessWatch> watch_;
  std::shared_ptr<Segment> my_segment_;    ///< keeps rx mapped
  std::shared_ptr<Segment> peer_segment_;  ///< keeps tx and the peer's doorbell mapped
  Ring rx_;
  Ring tx_;
  Doorbell peer_doorbell_;
  bool peer_died_ = false;
};

}  // namespace chorus::transport::shm
