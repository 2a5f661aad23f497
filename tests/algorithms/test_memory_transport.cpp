// The in-process MemoryTransport that the algorithm sweep runs on must keep
// the transport contract: FIFO per pair, buffering, mismatch and timeout
// errors with sentences, abort reaching every rank, broken after a throw.
#include "algorithms/common.hpp"
#include "memory_transport.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;
using transport::RequestId;

Fingerprint fingerprint(Collective collective, std::uint64_t seq, std::uint64_t count = 1) {
  Fingerprint f;
  f.collective = collective;
  f.seq = seq;
  f.count = count;
  return f;
}

const Fingerprint kCall = fingerprint(Collective::AllReduce, 1);

Status status_of(const std::function<void()>& action, std::string* message = nullptr) {
  try {
    action();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.status();
  }
  return Status::Success;
}

TEST(MemoryTransport, MessagesOfAPairArriveInOrderAndEarlyOnesAreBuffered) {
  MemoryFabric fabric(2);
  auto& a = fabric.transport(0);
  auto& b = fabric.transport(1);
  EXPECT_EQ(a.rank(), 0);
  EXPECT_EQ(b.size(), 2);
  int first = 1, second = 2, got_first = 0, got_second = 0;
  RequestId s1 = a.post_send(1, &first, sizeof first, kCall);
  RequestId s2 = a.post_send(1, &second, sizeof second, kCall);
  a.wait(std::vector{s1, s2}, Clock::now() + 1s);  // sends complete without a receiver
  std::vector ids = {b.post_recv(0, &got_first, sizeof got_first, kCall),
                     b.post_recv(0, &got_second, sizeof got_second, kCall)};
  b.wait(ids, Clock::now() + 1s);
  EXPECT_EQ(got_first, 1);
  EXPECT_EQ(got_second, 2);
  EXPECT_EQ(fabric.messages_sent(0), 2u);
  EXPECT_EQ(fabric.messages_sent(1), 0u);
}

TEST(MemoryTransport, BothSidesSendingFirstDoNotDeadlock) {
  auto failures = run_ranks(2, [](transport::Transport& t, int rank) {
    int mine = rank + 10, theirs = 0, peer = 1 - rank;
    RequestId s = t.post_send(peer, &mine, sizeof mine, kCall);
    t.wait(std::span(&s, 1), Clock::now() + 2s);
    RequestId r = t.post_recv(peer, &theirs, sizeof theirs, kCall);
    t.wait(std::span(&r, 1), Clock::now() + 2s);
    if (theirs != peer + 10) throw Error(Status::InternalError, "wrong payload");
  });
  EXPECT_TRUE(failures.empty()) << failures[0];
}

TEST(MemoryTransport, ADifferentCallIsAMismatchNamingBoth) {
  MemoryFabric fabric(2);
  int value = 0;
  fabric.transport(0).post_send(1, &value, sizeof value, fingerprint(Collective::Broadcast, 1));
  RequestId r = fabric.transport(1).post_recv(0, &value, sizeof value, kCall);
  std::string message;
  EXPECT_EQ(
      status_of([&] { fabric.transport(1).wait(std::span(&r, 1), Clock::now() + 1s); }, &message),
      Status::Mismatch);
  EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
  EXPECT_NE(message.find("broadcast"), std::string::npos) << message;
  // Broken afterwards: later calls fail the same way.
  EXPECT_EQ(status_of([&] { fabric.transport(1).post_recv(0, &value, 4, kCall); }),
            Status::Mismatch);
}

TEST(MemoryTransport, ADifferentByteCountIsAMismatch) {
  MemoryFabric fabric(2);
  std::int64_t wide = 0;
  int narrow = 0;
  fabric.transport(0).post_send(1, &wide, sizeof wide, kCall);
  RequestId r = fabric.transport(1).post_recv(0, &narrow, sizeof narrow, kCall);
  EXPECT_EQ(status_of([&] { fabric.transport(1).wait(std::span(&r, 1), Clock::now() + 1s); }),
            Status::Mismatch);
}

TEST(MemoryTransport, AMissingMessageTimesOutNamingThePeer) {
  MemoryFabric fabric(3);
  int value = 0;
  RequestId r = fabric.transport(0).post_recv(2, &value, sizeof value, kCall);
  auto start = Clock::now();
  std::string message;
  EXPECT_EQ(
      status_of([&] { fabric.transport(0).wait(std::span(&r, 1), Clock::now() + 50ms); }, &message),
      Status::Timeout);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("2"), std::string::npos) << message;
}

TEST(MemoryTransport, AbortWakesEveryRankWithRemoteError) {
  MemoryFabric fabric(3);
  int value = 0;
  Status seen = Status::Success;
  std::thread waiter([&] {
    RequestId r = fabric.transport(1).post_recv(2, &value, sizeof value, kCall);
    seen = status_of([&] { fabric.transport(1).wait(std::span(&r, 1), Clock::now() + 10s); });
  });
  std::this_thread::sleep_for(20ms);
  auto start = Clock::now();
  fabric.transport(0).abort(Status::InternalError, "test over");
  waiter.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(seen, Status::RemoteError);
  EXPECT_EQ(status_of([&] { fabric.transport(0).post_send(1, &value, 4, kCall); }),
            Status::InternalError);
}

TEST(MemoryTransport, PostingToAnInvalidPeerIsAnError) {
  MemoryFabric fabric(2);
  int value = 0;
  EXPECT_THROW(fabric.transport(0).post_send(0, &value, 4, kCall), Error);
  EXPECT_THROW(fabric.transport(0).post_recv(2, &value, 4, kCall), Error);
}

TEST(MemoryTransport, RunRanksReportsThrowingRanksAndReleasesTheOthers) {
  auto failures = run_ranks(3, [](transport::Transport& t, int rank) {
    if (rank == 0) throw Error(Status::InvalidArgument, "rank 0 gives up");
    int value = 0;
    RequestId r = t.post_recv(0, &value, sizeof value, kCall);
    t.wait(std::span(&r, 1), Clock::now() + 10s);
  });
  EXPECT_EQ(failures.size(), 3u);
}

/// Scratch buffers return to a per-thread pool: a later call reuses the smallest one that
/// fits (no fresh pages), two live buffers never share memory, and moves hand over ownership.
TEST(Scratch, ReusesPooledBuffersWithoutSharingLiveOnes) {
  std::thread([] {  // a fresh thread: an empty pool
    using algorithms::Scratch;
    std::byte* big_data = nullptr;
    std::byte* small_data = nullptr;
    {
      Scratch big(1 << 20, DataType::Float32);
      Scratch small(1 << 10, DataType::Float32);
      big_data = big.data();
      small_data = small.data();
      ASSERT_NE(big_data, small_data);
    }
    Scratch again(1 << 12, DataType::Uint8);  // 4 KiB: fits both; the smaller is taken
    EXPECT_EQ(again.data(), small_data);
    Scratch larger(1 << 19, DataType::Float32);  // 2 MiB: only the big one fits
    EXPECT_EQ(larger.data(), big_data);
    Scratch fresh(1 << 10, DataType::Float32);  // nothing left in the pool
    EXPECT_NE(fresh.data(), small_data);
    EXPECT_NE(fresh.data(), big_data);
    Scratch moved = std::move(fresh);
    EXPECT_EQ(moved.at(0), moved.data());
    EXPECT_EQ(fresh.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  })
      .join();
}

}  // namespace
}  // namespace chorus::testing
