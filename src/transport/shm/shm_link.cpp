// Shared-memory link; see shm_link.hpp.
#include "transport/shm/shm_link.hpp"

#include <chorus/error.hpp>

#include <string>

namespace chorus::transport::shm {

ShmLink::ShmLink(int peer, pid_t peer_pid, const Inbox& mine, const Inbox& theirs, int my_slot,
                 int peer_slot, std::shared_ptr<ProcessWatch> watch)
    : peer_(peer),
      peer_pid_(peer_pid),
      peer_slot_(peer_slot),
      watch_(std::move(watch)),
      my_segment_(mine.segment()),
      peer_segment_(theirs.segment()),
      rx_(mine.ring(peer_slot)),
      tx_(theirs.ring(my_slot)),
      peer_doorbell_(theirs.doorbell()) {}

ShmLink::~ShmLink() {
  tx_.close_producer();
  rx_.close_consumer();
  peer_doorbell_.ring();
}

std::size_t ShmLink::write_some(const void* data, std::size_t bytes) {
  if (tx_.consumer_closed() || peer_died_) throw_gone();
  std::size_t n = tx_.write(data, bytes);
  if (n > 0) peer_doorbell_.ring();
  return n;
}

std::size_t ShmLink::read_some(void* data, std::size_t bytes) {
  std::size_t n = rx_.read(data, bytes);
  if (n > 0) {
    peer_doorbell_.ring();
    return n;
  }
  // Empty: report the loss only now, so that every byte sent before it is delivered.
  if (rx_.producer_gone_and_drained() || peer_died_) throw_gone();
  return 0;
}

void ShmLink::check_peer() {
  if (!peer_died_ && !watch_->alive(static_cast<std::size_t>(peer_slot_))) peer_died_ = true;
}

void ShmLink::throw_gone() const {
  if (peer_died_) {
    throw Error(Status::RemoteError,
                "rank " + std::to_string(peer_) + " (pid " + std::to_string(peer_pid_) + ") died");
  }
  throw Error(Status::RemoteError,
              "rank " + std::to_string(peer_) + " closed the connection (process died or aborted)");
}

}  // namespace chorus::transport::shm
