// Links opened on first use. A ProgressEngine given a LinkOpener starts without links to the
// peers the opener reaches; the first request naming such a peer opens its link (open()),
// and links that peers open towards this rank are adopted as they arrive (arrivals()), so
// that a peer's messages are read, and its ABORT and PROBE frames seen, before this rank
// posts anything for it.
#pragma once

#include "transport/link.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace chorus::transport {

class LinkOpener {
 public:
  virtual ~LinkOpener() = default;

  /// Starts admitting the links peers open; `wake` (thread-safe, noexcept) is called from
  /// another thread after each arrival. Called once, before any other member.
  virtual void start(std::function<void()> wake) = 0;
  /// True when the link to `peer` is opened through this opener.
  virtual bool reaches(int peer) const = 0;
  /// The link to `peer` (reaches(peer), asked once): the one the peer opened, or a new one.
  /// Blocks until it is up. Throws Error: RemoteError naming the peer when it is gone,
  /// Timeout when it does not answer in time.
  virtual std::unique_ptr<Link> open(int peer) = 0;
  /// Cheap, any thread: whether arrivals() has links to hand over.
  virtual bool has_arrivals() const = 0;
  /// The links peers opened towards this rank since the last call, with their ranks.
  virtual std::vector<std::pair<int, std::unique_ptr<Link>>> arrivals() = 0;
  /// The engine broke: every link a peer opens from now on is answered with `frame` (an
  /// ABORT, abort_frame.hpp) and then kept open, unread, until the opener is destroyed.
  virtual void abort_arrivals(std::vector<std::byte> frame) = 0;
};

}  // namespace chorus::transport
