// Frame decoding under hostile bytes: a PeerChannel reads the input through a
// fake Link. Input layout: byte 0 = number of receives to post (mod 4) and the
// seed of the read sizes; per receive, u16 size + 24-byte fingerprint; the rest
// is the stream. When the stream is used up the link reports the peer gone, as a
// closed socket does. Every outcome must be an Error (garbage, mismatch, abort)
// or a recorded peer failure; the channel must never write outside a buffer.
#include "harnesses.hpp"
#include "transport/peer_channel.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace chorus::fuzz {
namespace {

class HostileLink final : public transport::Link {
 public:
  HostileLink(const std::uint8_t* data, std::size_t size, std::uint32_t seed)
      : data_(data), size_(size), state_(seed | 1) {}

  std::size_t write_some(const void*, std::size_t bytes) override { return bytes; }

  /// Hands out the stream in pseudo-random pieces (1..64 bytes, or all that is asked).
  std::size_t read_some(void* out, std::size_t bytes) override {
    if (offset_ == size_) throw Error(Status::RemoteError, "the fuzz peer closed the stream");
    state_ = state_ * 1103515245u + 12345u;
    std::size_t piece = (state_ >> 16) % 8 == 0 ? bytes : 1 + (state_ >> 16) % 64;
    std::size_t n = std::min({bytes, piece, size_ - offset_});
    std::memcpy(out, data_ + offset_, n);
    offset_ += n;
    return n;
  }
  int poll_fd() const override { return -1; }
  void check_peer() override {}
  std::string_view kind() const override { return "fuzz"; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t offset_ = 0;
  std::uint32_t state_;
};

constexpr std::size_t kRecvSpecBytes = 2 + sizeof(Fingerprint);

}  // namespace

void frames(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  const std::size_t receives = data[0] % 4;
  const std::uint32_t seed = data[0] >> 2;
  ++data;
  --size;
  if (size < receives * kRecvSpecBytes) return;
  std::vector<std::vector<std::byte>> buffers;
  transport::PendingMap pending;
  std::vector<std::pair<std::size_t, Fingerprint>> specs;
  for (std::size_t i = 0; i < receives; ++i, data += kRecvSpecBytes, size -= kRecvSpecBytes) {
    Fingerprint fingerprint;
    std::memcpy(&fingerprint, data + 2, sizeof(fingerprint));
    specs.emplace_back(std::size_t{data[0]} | std::size_t{data[1]} << 8, fingerprint);
  }
  transport::PeerChannel channel(0, 1, std::make_unique<HostileLink>(data, size, seed));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    buffers.emplace_back(specs[i].first);
    channel.post_recv(i + 1, buffers.back().data(), buffers.back().size(), specs[i].second);
    pending.emplace(i + 1, 1);
  }
  try {
    // Each round consumes at least one byte or records the failure, so this ends.
    for (std::size_t round = 0; round <= size + 1 && !channel.failure(); ++round) {
      channel.progress(pending);
    }
  } catch (const Error& e) {
    require(e.status() == Status::RemoteError || e.status() == Status::Mismatch,
            "a hostile frame must fail with RemoteError or Mismatch");
    return;
  }
  require(channel.failure().has_value(), "the channel stopped before the stream ended");
}

}  // namespace chorus::fuzz
