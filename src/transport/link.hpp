// A Link is the byte stream between this rank and one peer, in both
// directions; it is the one small interface a new fabric (UCX, verbs)
// implements. It never blocks: the ProgressEngine frames messages over it
// (frame.hpp), drives every link from wait(), and sleeps on the descriptors
// and the shared-memory doorbell the links expose.
//
// Errors: a peer that is gone (closed the connection, died) makes read_some or
// write_some throw Error(RemoteError, sentence naming the peer) once nothing
// that it sent before is left to read. Other failures throw SystemError.
#pragma once

#include <cstddef>
#include <string_view>

namespace chorus::transport {

class Link {
 public:
  virtual ~Link() = default;

  /// Hands up to `bytes` (> 0) bytes to the stream; returns how many were
  /// taken, 0 when the stream is full for now.
  virtual std::size_t write_some(const void* data, std::size_t bytes) = 0;
  /// Takes up to `bytes` (> 0) bytes out of the stream; returns how many, 0
  /// when nothing has arrived yet.
  virtual std::size_t read_some(void* data, std::size_t bytes) = 0;

  /// Descriptor to poll() while sleeping (readable = data or hang-up), or -1
  /// when the link signals through the shared-memory doorbell instead.
  virtual int poll_fd() const = 0;
  /// Notices a peer that died without closing its side (shared memory: pid
  /// check). Called about every 50 ms while waiting; afterwards read_some and
  /// write_some report the death once nothing is left to read.
  virtual void check_peer() = 0;
  /// "tcp" or "shm", for messages.
  virtual std::string_view kind() const = 0;
};

}  // namespace chorus::transport
