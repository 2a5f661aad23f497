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

/// Serves `bytes` in pieces of at most 64 KiB, but nothing past `limit` (as if the rest
/// had not arrived yet); then reports the peer gone.
class ScriptedLink final : public Link {
 public:
  explicit ScriptedLink(std::vector<std::byte> bytes, std::size_t* limit = nullptr)
      : bytes_(std::move(bytes)), limit_(limit) {}
  std::size_t write_some(const void*, std::size_t bytes) override { return bytes; }
  std::size_t read_some(void* out, std::size_t bytes) override {
    const std::size_t end = limit_ ? std::min(*limit_, bytes_.size()) : bytes_.size();
    if (limit_ && offset_ == end && end < bytes_.size()) return 0;
    if (offset_ == bytes_.size()) throw Error(Status::RemoteError, "rank 1 closed the connection");
    std::size_t n = std::min({bytes, std::size_t{64} << 10, end - offset_});
    std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  int poll_fd() const override { return -1; }
  void check_peer() override {}
  std::string_view kind() const override { return "scripted"; }

 private:
  std::vector<std::byte> bytes_;
  std::size_t* limit_;
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

/// A receive posted while its message is half arrived (buffered) gets the buffered part and
/// the rest streams in; then two more early messages (reusing the spare buffer) arrive intact.
TEST(FrameBuffering, LateReceiveAdoptsTheMessageArrivingNowAndBuffersAreReused) {
  const std::size_t bytes = (std::size_t{5} << 20) + 7;
  Fingerprint f = fingerprint_of_allreduce();
  std::vector<std::byte> stream = data_frame(f, bytes, bytes);
  Fingerprint g = f;
  g.seq = 8;
  std::vector<std::byte> second = data_frame(g, bytes / 2, bytes / 2);
  Fingerprint h = f;
  h.seq = 9;
  std::vector<std::byte> third = data_frame(h, bytes + 1000, bytes + 1000);
  const std::size_t first_frame = stream.size();
  stream.insert(stream.end(), second.begin(), second.end());
  stream.insert(stream.end(), third.begin(), third.end());
  std::size_t limit = sizeof(FrameHeader) + bytes / 3;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(stream, &limit));
  PendingMap pending;
  for (int i = 0; i < 10; ++i) channel.progress(pending);  // a third arrived, buffered
  std::vector<std::byte> out(bytes);
  channel.post_recv(1, out.data(), out.size(), f);
  pending.emplace(1, 1);
  limit = first_frame;
  for (int i = 0; i < 1000 && pending.count(1); ++i) channel.progress(pending);
  EXPECT_EQ(pending.count(1), 0u) << "the adopted receive did not complete";
  EXPECT_TRUE(std::equal(out.begin(), out.end(), stream.begin() + sizeof(FrameHeader)));

  limit = stream.size();
  for (int i = 0; i < 1000 && !channel.failure(); ++i) channel.progress(pending);  // both early
  std::vector<std::byte> out2(bytes / 2), out3(bytes + 1000);
  channel.post_recv(2, out2.data(), out2.size(), g);
  channel.post_recv(3, out3.data(), out3.size(), h);
  pending.emplace(2, 1);
  pending.emplace(3, 1);
  channel.progress(pending);
  EXPECT_EQ(pending.size(), 0u);
  EXPECT_TRUE(std::equal(out2.begin(), out2.end(), second.begin() + sizeof(FrameHeader)));
  EXPECT_TRUE(std::equal(out3.begin(), out3.end(), third.begin() + sizeof(FrameHeader)));
}

/// A late receive of the wrong size for the message arriving now: Mismatch, not an overflow.
TEST(FrameBuffering, LateReceiveOfTheWrongSizeIsAMismatch) {
  const std::size_t bytes = std::size_t{3} << 20;
  Fingerprint f = fingerprint_of_allreduce();
  std::vector<std::byte> frame = data_frame(f, bytes, bytes);
  std::size_t limit = sizeof(FrameHeader) + bytes / 4;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(frame, &limit));
  PendingMap pending;
  for (int i = 0; i < 10; ++i) channel.progress(pending);
  std::vector<std::byte> small(bytes / 2);
  channel.post_recv(1, small.data(), small.size(), f);
  pending.emplace(1, 1);
  try {
    channel.progress(pending);
    FAIL() << "no mismatch";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Mismatch);
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
  }
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
