// Regression for the first fuzzing finding: PeerChannel used to allocate the whole
// payload of an unexpected message when its header arrived (a 40-byte header could ask
// for 64 GiB). It now grows the buffer as bytes arrive; these tests check that a real
// unexpected message spanning several growth steps still arrives intact, and that a
// header announcing a huge message followed by a closed stream fails cleanly.
#include "transport/peer_channel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace chorus::transport {
namespace {

/// Serves `bytes` in pieces of at most 64 KiB; then reports the peer gone.
class ScriptedLink final : public Link {
 public:
  explicit ScriptedLink(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  std::size_t write_some(const void*, std::size_t bytes) override { return bytes; }
  std::size_t read_some(void* out, std::size_t bytes) override {
    if (offset_ == bytes_.size()) throw Error(Status::RemoteError, "rank 1 closed the connection");
    std::size_t n = std::min({bytes, std::size_t{64} << 10, bytes_.size() - offset_});
    std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  int poll_fd() const override { return -1; }
  void check_peer() override {}
  std::string_view kind() const override { return "scripted"; }

 private:
  std::vector<std::byte> bytes_;
  std::size_t offset_ = 0;
};

std::vector<std::byte> data_frame(const Fingerprint& fingerprint, std::size_t payload_bytes,
                                  std::size_t bytes_present) {
  FrameHeader header;
  header.payload_bytes = payload_bytes;
  header.fingerprint = fingerprint;
  std::vector<std::byte> frame(sizeof(header) + bytes_present);
  std::memcpy(frame.data(), &header, sizeof(header));
  for (std::size_t i = 0; i < bytes_present; ++i) {
    frame[sizeof(header) + i] = static_cast<std::byte>((i * 131 + i / 4099) & 0xff);
  }
  return frame;
}

Fingerprint fingerprint_of_allreduce() {
  Fingerprint f;
  f.seq = 7;
  f.count = 1;
  f.collective = Collective::AllReduce;
  f.dtype = 1;
  return f;
}

TEST(FrameBuffering, UnexpectedMessageLargerThanTheFirstBufferArrivesIntact) {
  const std::size_t bytes = (std::size_t{7} << 20) / 2 + 13;  // 3.5 MiB + 13: three growth steps
  Fingerprint f = fingerprint_of_allreduce();
  std::vector<std::byte> frame = data_frame(f, bytes, bytes);
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(frame));
  PendingMap pending;
  while (!channel.failure()) channel.progress(pending);  // no receive posted: buffered
  std::vector<std::byte> out(bytes);
  channel.post_recv(1, out.data(), out.size(), f);
  pending.emplace(1, 1);
  channel.progress(pending);
  EXPECT_EQ(pending.count(1), 0u) << "the buffered message did not complete the receive";
  EXPECT_TRUE(std::equal(out.begin(), out.end(), frame.begin() + sizeof(FrameHeader)));
}

TEST(FrameBuffering, HugeAnnouncedMessageThenClosedStreamFailsCleanly) {
  std::vector<std::byte> frame = data_frame(fingerprint_of_allreduce(), std::size_t{60} << 30, 100);
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(frame));
  PendingMap pending;
  for (int i = 0; i < 100 && !channel.failure(); ++i) channel.progress(pending);
  ASSERT_TRUE(channel.failure().has_value());
  EXPECT_NE(std::string(channel.failure()->what()).find("rank 1"), std::string::npos);
}

}  // namespace
}  // namespace chorus::transport
