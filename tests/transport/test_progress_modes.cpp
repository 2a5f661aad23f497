// Non-blocking progress: test() never sleeps, wait_until() gives the deadline
// back to the caller and leaves the transport intact, interrupt() wakes a
// sleeping wait_until() at once (eventfd, shared-memory doorbell) and never
// fails a wait(). Over both mesh kinds and over the in-process MemoryTransport.
#include "memory_transport.hpp"
#include "mesh_harness.hpp"
#include "transport/progress_engine.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

Fingerprint allreduce_stamp(std::uint64_t seq) {
  Fingerprint fp;
  fp.seq = seq;
  fp.count = 4;
  fp.collective = Collective::AllReduce;
  fp.dtype = static_cast<std::uint8_t>(DataType::Float32);
  return fp;
}

/// How long `call` took.
template <typename Call>
Clock::duration timed(Call&& call) {
  const auto start = Clock::now();
  call();
  return Clock::now() - start;
}

class ProgressModes : public ::testing::TestWithParam<Kind> {};

TEST_P(ProgressModes, TestPollsWithoutSleepingFromAnotherThread) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  auto out = pattern(1, 0, 0, 50000);
  std::vector<unsigned char> in(out.size());
  RequestId recv = mesh[0].post_recv(1, in.data(), in.size(), recv_stamp(0, in.size()));
  bool done = true;
  EXPECT_LT(timed([&] { done = mesh[0].test({&recv, 1}); }), 20ms);
  EXPECT_FALSE(done);
  RequestId send = mesh[1].post_send(0, out.data(), out.size(), send_stamp(0, out.size()));
  std::thread poller([&] {  // test() may come from another thread than the post
    const auto until = Clock::now() + 10s;
    bool received = false, sent = false;
    while (!(received && sent) && Clock::now() < until) {
      received = received || mesh[0].test({&recv, 1});
      sent = sent || mesh[1].test({&send, 1});
      std::this_thread::sleep_for(100us);
    }
    EXPECT_TRUE(received && sent);
  });
  poller.join();
  EXPECT_TRUE(in == out);
  EXPECT_TRUE(mesh[0].test({&recv, 1})) << "a completed request stays completed";
}

TEST_P(ProgressModes, WaitUntilReturnsFalseAndTheTransportStaysUsable) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char in = 0, out = 'k';
  RequestId recv = mesh[0].post_recv(1, &in, 1, recv_stamp(0, 1));
  bool done = true;
  auto waited = timed([&] { done = mesh[0].wait_until({&recv, 1}, deadline_after(100ms)); });
  EXPECT_FALSE(done);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 1s);
  wait_one(mesh[1], mesh[1].post_send(0, &out, 1, send_stamp(0, 1)));
  EXPECT_TRUE(mesh[0].wait_until({&recv, 1}, deadline_after(10s)));
  EXPECT_EQ(in, 'k');
}

TEST_P(ProgressModes, InterruptWakesWaitUntilAtOnce) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char in = 0;
  RequestId recv = mesh[0].post_recv(1, &in, 1, recv_stamp(0, 1));
  for (int round = 0; round < 3; ++round) {
    std::atomic<std::int64_t> interrupted_at{0};
    std::thread interrupter([&] {
      std::this_thread::sleep_for(150ms);  // long enough for the waiter to be asleep
      interrupted_at = Clock::now().time_since_epoch().count();
      mesh[0].interrupt();
    });
    bool done = mesh[0].wait_until({&recv, 1}, deadline_after(10s));
    auto woke = Clock::now();
    interrupter.join();
    EXPECT_FALSE(done);
    auto latency = woke - Clock::time_point(Clock::duration(interrupted_at.load()));
    EXPECT_LT(latency, 50ms) << "round " << round;  // ~1 ms unloaded; slack for a shared machine
  }
}

TEST_P(ProgressModes, InterruptWithNobodyWaitingEndsTheNextWaitUntilOnly) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char in = 0;
  RequestId recv = mesh[0].post_recv(1, &in, 1, recv_stamp(0, 1));
  mesh[0].interrupt();
  bool done = true;
  EXPECT_LT(timed([&] { done = mesh[0].wait_until({&recv, 1}, deadline_after(5s)); }), 500ms);
  EXPECT_FALSE(done);
  EXPECT_GE(timed([&] { done = mesh[0].wait_until({&recv, 1}, deadline_after(100ms)); }), 100ms);
  EXPECT_FALSE(done);
}

TEST_P(ProgressModes, InterruptNeverFailsABlockingWait) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char in = 0, out = 'w';
  RequestId recv = mesh[0].post_recv(1, &in, 1, recv_stamp(0, 1));
  std::thread peer([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(40ms);
      mesh[0].interrupt();
    }
    wait_one(mesh[1], mesh[1].post_send(0, &out, 1, send_stamp(0, 1)));
  });
  EXPECT_NO_THROW(wait_one(mesh[0], recv, 10s));
  peer.join();
  EXPECT_EQ(in, 'w');
}

TEST_P(ProgressModes, TestThrowsOnceThePeerIsGone) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char in = 0;
  RequestId recv = mesh[0].post_recv(1, &in, 1, recv_stamp(0, 1));
  mesh.destroy(1);
  const auto until = Clock::now() + 2s;
  Status status = Status::Success;
  while (status == Status::Success && Clock::now() < until) {
    try {
      mesh[0].test({&recv, 1});
      std::this_thread::sleep_for(1ms);
    } catch (const Error& e) {
      status = e.status();
    }
  }
  EXPECT_EQ(status, Status::RemoteError);
}

// The communicator waits in short wait_until() slices; a stall spanning many
// slices still probes, so crossed calls still fail with Mismatch.
TEST_P(ProgressModes, StallProbesSpanWaitUntilSlices) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    float data[4] = {};
    Fingerprint mine = allreduce_stamp(2);
    if (r == 1) mine.collective = Collective::AllGather;
    RequestId id = t.post_recv(1 - r, data, sizeof(data), mine);
    const auto until = Clock::now() + 5s;
    try {
      while (!t.wait_until({&id, 1}, deadline_after(20ms)) && Clock::now() < until) {
      }
      ADD_FAILURE() << "rank " << r << " was not told about the mismatch";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Mismatch) << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, ProgressModes, ::testing::Values(Kind::Tcp, Kind::Shm),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

// A rank with links of both kinds (rank 0: shared memory to rank 1 on its host, TCP to rank 2
// on another) sleeps in poll() on its TCP descriptors; a shared-memory message rings its
// doorbell, which its relay turns into a wake of that poll: each wait for a message sent 10 ms
// late polls about once, not once per millisecond until it is seen.
TEST(ProgressModesMixed, ASharedMemoryMessageEndsAPollAtOnce) {
  auto two_hosts = [](int r) { return LocalIdentity{r == 2 ? "host-b" : "host-a", ::getpid()}; };
  Mesh mesh(3, Kind::Auto, two_hosts);
  ASSERT_TRUE(mesh.ok());
  constexpr int kWaits = 10;
  std::uint64_t polls = 0;
  run_threads(3, [&](int r) {
    Transport& t = mesh[r];
    std::uint64_t word = 0;
    const Deadline deadline = deadline_after(20s);
    if (r != 1) {  // the TCP link between ranks 0 and 2, opened by first use
      const int peer = 2 - r;
      RequestId ids[2] = {t.post_send(peer, &word, sizeof word, allreduce_stamp(0)),
                          t.post_recv(peer, &word, sizeof word, allreduce_stamp(0))};
      t.wait(ids, deadline);
    }
    if (r == 2) return;
    auto* engine = dynamic_cast<ProgressEngine*>(&t);
    ASSERT_NE(engine, nullptr);
    const std::uint64_t before = engine->polls();
    for (std::uint64_t i = 1; i <= kWaits; ++i) {
      if (r == 1) {
        std::this_thread::sleep_for(10ms);
        RequestId id = t.post_send(0, &i, sizeof i, allreduce_stamp(i));
        t.wait({&id, 1}, deadline);
      } else {
        RequestId id = t.post_recv(1, &word, sizeof word, allreduce_stamp(i));
        t.wait({&id, 1}, deadline);
        EXPECT_EQ(word, i);
      }
    }
    if (r == 0) polls = engine->polls() - before;
  });
  // Without the relay each wait polled until a 1 ms timeout found the message: about 10 each.
  EXPECT_LE(polls, 3u * kWaits) << polls << " polls in " << kWaits << " waits";
}

TEST(MemoryTransportModes, TestWaitUntilAndInterrupt) {
  chorus::testing::MemoryFabric fabric(2);
  Transport& a = fabric.transport(0);
  Transport& b = fabric.transport(1);
  char in = 0, out = 'm';
  RequestId recv = a.post_recv(1, &in, 1, recv_stamp(0, 1));
  EXPECT_FALSE(a.test({&recv, 1}));
  EXPECT_GE(timed([&] { EXPECT_FALSE(a.wait_until({&recv, 1}, deadline_after(50ms))); }), 50ms);
  std::thread interrupter([&] {
    std::this_thread::sleep_for(100ms);
    a.interrupt();
  });
  EXPECT_LT(timed([&] { EXPECT_FALSE(a.wait_until({&recv, 1}, deadline_after(10s))); }), 2s);
  interrupter.join();
  a.interrupt();  // nobody waiting: ends the next wait_until only
  EXPECT_FALSE(a.wait_until({&recv, 1}, deadline_after(10s)));
  RequestId send = b.post_send(0, &out, 1, send_stamp(0, 1));
  EXPECT_TRUE(b.test({&send, 1}));
  EXPECT_TRUE(a.wait_until({&recv, 1}, deadline_after(10s)));
  EXPECT_TRUE(a.test({&recv, 1}));
  EXPECT_EQ(in, 'm');
}

}  // namespace
}  // namespace chorus::transport::testing
