// PeerChannel over a scripted link: framing of sends, matching and buffering
// of receives, and every check done on a header before a byte is allocated or
// copied (garbage on the wire, oversized payloads, unknown kinds).
#include "transport/abort_frame.hpp"
#include "transport/peer_channel.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

namespace chorus::transport {
namespace {

/// A link whose incoming bytes the test scripts and whose outgoing bytes it
/// inspects. `chunk` limits bytes per call, to exercise partial reads/writes.
struct Script {
  std::vector<std::byte> incoming;
  std::size_t read_offset = 0;
  std::vector<std::byte> outgoing;
  std::size_t chunk = 7;
  std::size_t write_budget = SIZE_MAX;  ///< total bytes the link takes before it is "full"
  bool closed = false;
};

class ScriptedLink final : public Link {
 public:
  explicit ScriptedLink(Script* script) : script_(script) {}
  std::size_t write_some(const void* data, std::size_t bytes) override {
    std::size_t n = std::min({bytes, script_->chunk, script_->write_budget});
    script_->write_budget -= n;
    auto* from = static_cast<const std::byte*>(data);
    script_->outgoing.insert(script_->outgoing.end(), from, from + n);
    return n;
  }
  std::size_t read_some(void* data, std::size_t bytes) override {
    std::size_t left = script_->incoming.size() - script_->read_offset;
    if (left == 0 && script_->closed)
      throw Error(Status::RemoteError, "rank 1 closed the connection");
    std::size_t n = std::min({bytes, left, script_->chunk});
    if (n > 0) std::memcpy(data, script_->incoming.data() + script_->read_offset, n);
    script_->read_offset += n;
    return n;
  }
  int poll_fd() const override { return -1; }
  void check_peer() override {}
  std::string_view kind() const override { return "scripted"; }

 private:
  Script* script_;
};

Fingerprint stamp(Collective collective, std::uint64_t seq, std::uint64_t count) {
  Fingerprint fp;
  fp.collective = collective;
  fp.seq = seq;
  fp.count = count;
  return fp;
}

void append_frame(Script& script, FrameHeader header, const std::string& payload) {
  auto* h = reinterpret_cast<const std::byte*>(&header);
  script.incoming.insert(script.incoming.end(), h, h + sizeof(header));
  auto* p = reinterpret_cast<const std::byte*>(payload.data());
  script.incoming.insert(script.incoming.end(), p, p + payload.size());
}

FrameHeader data_header(std::uint64_t seq, std::uint64_t bytes) {
  FrameHeader header;
  header.payload_bytes = bytes;
  header.fingerprint = stamp(Collective::Send, seq, bytes);
  return header;
}

/// Drives the channel until nothing moves; returns the error it threw, if any.
std::optional<Error> drive(PeerChannel& channel, PendingMap& pending) {
  try {
    for (int i = 0; i < 100000 && channel.progress(pending);) ++i;
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

TEST(PeerChannel, FramesSendsAndMatchesDirectAndBufferedReceives) {
  Script script;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}, {2, 1}, {3, 1}};
  channel.post_send(1, "hello", 5, stamp(Collective::Send, 0, 5));
  append_frame(script, data_header(0, 3), "abc");
  append_frame(script, data_header(1, 4), "wxyz");
  char first[3], second[4];
  channel.post_recv(2, first, 3, stamp(Collective::Recv, 0, 3));
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_EQ(pending.count(1) + pending.count(2), 0u);
  EXPECT_EQ(std::string(first, 3), "abc");
  channel.post_recv(3, second, 4, stamp(Collective::Recv, 1, 4));  // already buffered
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(std::string(second, 4), "wxyz");
  ASSERT_EQ(script.outgoing.size(), sizeof(FrameHeader) + 5);
  FrameHeader sent;
  std::memcpy(&sent, script.outgoing.data(), sizeof(sent));
  EXPECT_EQ(sent.magic, kFrameMagic);
  EXPECT_EQ(sent.payload_bytes, 5u);
  EXPECT_EQ(std::memcmp(script.outgoing.data() + sizeof(sent), "hello", 5), 0);
}

TEST(PeerChannel, LargeSendIsWrittenHeaderThenPayload) {
  Script script;
  script.chunk = 10000;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}};
  std::vector<char> big(100000, 'q');
  channel.post_send(1, big.data(), big.size(), stamp(Collective::Send, 0, big.size()));
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(script.outgoing.size(), sizeof(FrameHeader) + big.size());
}

/// Feeds one header and expects the channel to refuse it with `status` and `words`.
void expect_refused(FrameHeader header, bool post_small_recv, Status status,
                    const std::string& words) {
  Script script;
  append_frame(script, header, "0123456789");
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}};
  char small[4];
  if (post_small_recv) channel.post_recv(1, small, sizeof(small), stamp(Collective::Recv, 0, 4));
  auto error = drive(channel, pending);
  ASSERT_TRUE(error) << "accepted a header expected to be refused: " << words;
  EXPECT_EQ(error->status(), status) << error->what();
  EXPECT_NE(std::string(error->what()).find(words), std::string::npos) << error->what();
}

TEST(PeerChannel, RefusesGarbageBeforeAllocatingOrCopying) {
  FrameHeader bad_magic = data_header(0, 10);
  bad_magic.magic = 0x12345678;
  expect_refused(bad_magic, false, Status::RemoteError, "garbage on the wire from rank 1");
  FrameHeader bad_kind = data_header(0, 10);
  bad_kind.kind = 9;
  expect_refused(bad_kind, false, Status::RemoteError, "unknown frame kind 9");
  FrameHeader huge = data_header(0, std::uint64_t{1} << 40);  // 1 TiB: never allocated
  expect_refused(huge, false, Status::RemoteError, "the limit is 64 GiB");
  FrameHeader huge_abort = data_header(0, std::uint64_t{1} << 20);
  huge_abort.kind = static_cast<std::uint8_t>(FrameKind::Abort);
  expect_refused(huge_abort, false, Status::RemoteError, "an abort message of 1048576 bytes");
  // Bigger than the posted receive: a Mismatch, and the 4-byte buffer is never overrun.
  FrameHeader too_big = data_header(0, 10);
  too_big.fingerprint.count = 4;
  expect_refused(too_big, true, Status::Mismatch, "expected 4 bytes from rank 1");
  FrameHeader other_call = data_header(9, 4);
  expect_refused(other_call, true, Status::Mismatch,
                 "rank 0 is in recv #0 (count 4, int8) but rank 1 sent send #9");
}

FrameHeader probe_header(Collective collective, std::uint64_t seq) {
  FrameHeader header;
  header.kind = static_cast<std::uint8_t>(FrameKind::Probe);
  header.fingerprint = stamp(collective, seq, 4);
  return header;
}

TEST(PeerChannel, ProbesAreValidatedLikeOtherFrames) {
  FrameHeader with_payload = probe_header(Collective::AllReduce, 3);
  with_payload.payload_bytes = 10;
  expect_refused(with_payload, false, Status::RemoteError, "a probe with 10 payload bytes");
  FrameHeader unknown = probe_header(Collective::AllReduce, 3);
  unknown.fingerprint.collective = static_cast<Collective>(200);
  expect_refused(unknown, false, Status::RemoteError, "a probe for unknown collective 200");
}

TEST(PeerChannel, ProbeIsRememberedBesideTheDataStream) {
  Script script;
  append_frame(script, data_header(0, 2), "ab");
  append_frame(script, probe_header(Collective::Broadcast, 3), "");
  append_frame(script, probe_header(Collective::Broadcast, 4), "");  // the latest one wins
  append_frame(script, data_header(1, 2), "cd");
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}, {2, 1}};
  char first[2], second[2];
  channel.post_recv(1, first, 2, stamp(Collective::Recv, 0, 2));
  channel.post_recv(2, second, 2, stamp(Collective::Recv, 1, 2));
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(std::string(second, 2), "cd");
  ASSERT_TRUE(channel.probe());
  EXPECT_EQ(channel.probe()->seq, 4u);
  EXPECT_TRUE(channel.take_probe_news());
  EXPECT_FALSE(channel.take_probe_news());
  channel.drop_probe();
  EXPECT_FALSE(channel.probe());
}

TEST(PeerChannel, ProbeIsQueuedBehindSendsAndCompletesNoRequest) {
  Script script;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}};
  channel.post_send(1, "xy", 2, stamp(Collective::AllReduce, 5, 2));
  channel.post_probe(stamp(Collective::AllReduce, 5, 2));
  EXPECT_EQ(channel.fingerprint_of(1)->seq, 5u);
  EXPECT_FALSE(channel.fingerprint_of(2));
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_TRUE(pending.empty());
  ASSERT_EQ(script.outgoing.size(), 2 * sizeof(FrameHeader) + 2);
  FrameHeader probe;
  std::memcpy(&probe, script.outgoing.data() + sizeof(FrameHeader) + 2, sizeof(probe));
  EXPECT_EQ(probe.kind, static_cast<std::uint8_t>(FrameKind::Probe));
  EXPECT_EQ(probe.payload_bytes, 0u);
  EXPECT_EQ(probe.fingerprint.seq, 5u);
}

TEST(PeerChannel, AbortFrameBecomesTheSendersError) {
  Script script;
  auto frame = make_abort_frame(Status::Timeout, "gave up");
  script.incoming = frame;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending;
  auto error = drive(channel, pending);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status(), Status::RemoteError);
  EXPECT_STREQ(error->what(), "rank 1 aborted: gave up");
  EXPECT_TRUE(channel.sent_abort());
}

TEST(PeerChannel, ClosedLinkIsRecordedNotThrown) {
  Script script;
  append_frame(script, data_header(0, 2), "ok");
  script.closed = true;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}, {2, 1}};
  char buffer[2];
  channel.post_recv(1, buffer, 2, stamp(Collective::Recv, 0, 2));
  channel.post_recv(2, buffer, 2, stamp(Collective::Recv, 1, 2));
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_EQ(pending.count(1), 0u) << "the message sent before the close is delivered";
  EXPECT_EQ(pending.count(2), 1u);
  ASSERT_TRUE(channel.failure());
  EXPECT_EQ(channel.failure()->status(), Status::RemoteError);
}

TEST(PeerChannel, AbortFinishesTheFrameOnTheWireFirst) {
  Script script;
  script.chunk = 1000;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  PendingMap pending{{1, 1}, {2, 1}};
  std::vector<char> big(50000, 'z');
  channel.post_send(1, big.data(), big.size(), stamp(Collective::Send, 0, big.size()));
  channel.post_send(2, big.data(), big.size(), stamp(Collective::Send, 1, big.size()));
  script.write_budget = 20000;
  channel.progress_send(pending);  // the link fills up: the first frame is partly written
  auto frame = make_abort_frame(Status::InternalError, "bye");
  channel.begin_abort(frame);
  EXPECT_FALSE(channel.push_abort());
  script.write_budget = SIZE_MAX;
  EXPECT_TRUE(channel.push_abort());
  ASSERT_EQ(script.outgoing.size(), sizeof(FrameHeader) + big.size() + frame.size());
  EXPECT_EQ(std::memcmp(script.outgoing.data() + sizeof(FrameHeader) + big.size(), frame.data(),
                        frame.size()),
            0);
}

// Holding (peer_channel.hpp): a large collective message that arrives before its receive
// stays in the link and then streams straight into the receive, never copied twice.

FrameHeader collective_header(std::uint64_t seq, std::uint64_t bytes) {
  FrameHeader header;
  header.payload_bytes = bytes;
  header.fingerprint = stamp(Collective::Broadcast, seq, bytes);
  return header;
}

std::string filler(std::size_t bytes, char seed) {
  std::string text(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) text[i] = static_cast<char>(seed + i % 61);
  return text;
}

/// Drives the channel once and checks that it read the whole script and holds nothing.
void expect_read_at_once(Script& script, PeerChannel& channel) {
  PendingMap pending;
  drive(channel, pending);
  EXPECT_EQ(script.read_offset, script.incoming.size());
  EXPECT_FALSE(channel.hold_expiry());
}

/// Posts broadcast receive `id` for `expected`, drives the channel, and checks that every
/// pending request completed and the receive holds `expected`.
void expect_delivered(PeerChannel& channel, PendingMap& pending, RequestId id,
                      const std::string& expected) {
  std::string in(expected.size(), '-');
  channel.post_recv(id, in.data(), in.size(), stamp(Collective::Broadcast, 0, in.size()));
  drive(channel, pending);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(in, expected);
}

TEST(PeerChannel, LargeCollectiveMessageWaitsInTheLinkForItsReceive) {
  Script script;
  script.chunk = 50000;
  const std::size_t bytes = kHoldBytes + 123;
  const std::string first = filler(bytes, 'a'), second = filler(bytes, 'k');
  append_frame(script, collective_header(0, bytes), first);
  append_frame(script, collective_header(1, bytes), second);
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}, {2, 1}};
  EXPECT_FALSE(drive(channel, pending));
  EXPECT_EQ(script.read_offset, sizeof(FrameHeader)) << "only the header is taken";
  ASSERT_TRUE(channel.hold_expiry());
  std::string in1(bytes, '-'), in2(bytes, '-');
  channel.post_recv(1, in1.data(), bytes, stamp(Collective::Broadcast, 0, bytes));
  drive(channel, pending);
  EXPECT_EQ(pending.count(1), 0u);
  EXPECT_EQ(in1, first);
  EXPECT_EQ(script.read_offset, 2 * sizeof(FrameHeader) + bytes) << "the next one is held too";
  channel.post_recv(2, in2.data(), bytes, stamp(Collective::Broadcast, 1, bytes));
  drive(channel, pending);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(in2, second);
  EXPECT_FALSE(channel.hold_expiry());
}

TEST(PeerChannel, HeldMessageIsBufferedWhenItsHoldEnds) {
  Script script;
  script.chunk = 1 << 20;
  const std::size_t bytes = kHoldBytes * 3;
  const std::string message = filler(bytes, 'c');
  append_frame(script, collective_header(0, bytes), message);
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}};
  drive(channel, pending);
  ASSERT_TRUE(channel.hold_expiry());
  EXPECT_LE(*channel.hold_expiry(), Clock::now() + kHoldTime);
  std::this_thread::sleep_until(*channel.hold_expiry() + std::chrono::milliseconds(1));
  drive(channel, pending);
  EXPECT_EQ(script.read_offset, script.incoming.size()) << "buffered after the hold";
  EXPECT_FALSE(channel.hold_expiry());
  expect_delivered(channel, pending, 1, message);
}

TEST(PeerChannel, HoldTimeGrowsWithTheMessage) {
  EXPECT_EQ(hold_time(kHoldBytes), kHoldTime);
  EXPECT_EQ(hold_time(std::uint64_t{4} << 20), kHoldTime) << "4 MiB: 8.4 ms scaled";
  EXPECT_EQ(hold_time(std::uint64_t{64} << 20), std::chrono::nanoseconds(134217728));
  EXPECT_GT(hold_time(std::uint64_t{16} << 20), kHoldTime);
  EXPECT_LT(hold_time(std::uint64_t{16} << 20), hold_time(std::uint64_t{32} << 20));
  EXPECT_EQ(hold_time(std::uint64_t{1} << 30), kMaxHoldTime) << "capped";
  EXPECT_EQ(hold_time(std::uint64_t{64} << 30), kMaxHoldTime);
}

TEST(PeerChannel, LargeHeldMessageIsHeldForItsOwnHoldTime) {
  // Only the header is on the wire: a held message's payload stays in the link.
  Script script;
  const std::uint64_t bytes = std::uint64_t{48} << 20;
  append_frame(script, collective_header(0, bytes), "");
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}};
  const auto before = Clock::now();
  drive(channel, pending);
  const auto after = Clock::now();
  ASSERT_TRUE(channel.hold_expiry());
  EXPECT_EQ(script.read_offset, sizeof(FrameHeader));
  EXPECT_GE(*channel.hold_expiry(), before + hold_time(bytes));
  EXPECT_LE(*channel.hold_expiry(), after + hold_time(bytes));
  EXPECT_GT(hold_time(bytes), kHoldTime * 4);
}

TEST(PeerChannel, HeldMessageIsBufferedAtOnceWhenTheSendToThatPeerIsStuck) {
  // Both ranks sending first and waiting for their sends must not wait on each other.
  Script script;
  script.chunk = 1 << 20;
  script.write_budget = 1000;
  const std::size_t bytes = kHoldBytes * 2;
  const std::string message = filler(bytes, 'd');
  append_frame(script, collective_header(0, bytes), message);
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}, {2, 1}};
  std::vector<char> out(bytes, 'o');
  channel.post_send(1, out.data(), bytes, stamp(Collective::Broadcast, 0, bytes));
  drive(channel, pending);
  EXPECT_EQ(pending.count(1), 1u) << "the link took only part of the send";
  EXPECT_EQ(script.read_offset, script.incoming.size()) << "buffered, not held";
  script.write_budget = SIZE_MAX;
  expect_delivered(channel, pending, 2, message);
}

TEST(PeerChannel, HeldMessageIsBufferedWhenThePeerHangsUp) {
  Script script;
  script.chunk = 1 << 20;
  const std::size_t bytes = kHoldBytes;
  append_frame(script, collective_header(0, bytes), filler(bytes, 'h'));
  script.closed = true;
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}};
  channel.end_hold();  // nothing held yet: no effect on the message to come
  drive(channel, pending);
  ASSERT_TRUE(channel.hold_expiry());
  EXPECT_FALSE(channel.failure());
  channel.end_hold();
  drive(channel, pending);
  EXPECT_EQ(script.read_offset, script.incoming.size());
  ASSERT_TRUE(channel.failure()) << "read on to the hang-up behind the message";
  expect_delivered(channel, pending, 1, filler(bytes, 'h'));
}

TEST(PeerChannel, SmallAndPointToPointMessagesAreNeverHeld) {
  Script script;
  script.chunk = 1 << 20;
  const std::size_t big = kHoldBytes * 2, small = kHoldBytes - 1;
  append_frame(script, data_header(0, big), filler(big, 'e'));  // a Send: point-to-point
  append_frame(script, collective_header(0, small), filler(small, 'f'));
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  expect_read_at_once(script, channel);
}

TEST(PeerChannel, WithoutHoldingLargeCollectiveMessagesAreBufferedAtOnce) {
  Script script;
  script.chunk = 1 << 20;
  const std::size_t bytes = kHoldBytes * 2;
  append_frame(script, collective_header(0, bytes), filler(bytes, 'i'));
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  expect_read_at_once(script, channel);
}

TEST(PeerChannel, HeldMessageIsCheckedAgainstTheReceiveThatComes) {
  Script script;
  const std::size_t bytes = kHoldBytes;
  append_frame(script, collective_header(7, bytes), filler(bytes, 'g'));
  PeerChannel channel(0, 1, std::make_unique<ScriptedLink>(&script));
  channel.set_holding(true);
  PendingMap pending{{1, 1}};
  drive(channel, pending);
  ASSERT_TRUE(channel.hold_expiry());
  std::string in(bytes / 2, '-');
  channel.post_recv(1, in.data(), in.size(), stamp(Collective::Broadcast, 7, in.size()));
  auto error = drive(channel, pending);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status(), Status::Mismatch) << error->what();
  EXPECT_EQ(in, std::string(bytes / 2, '-')) << "nothing is written into a mismatched receive";
}

}  // namespace
}  // namespace chorus::transport
