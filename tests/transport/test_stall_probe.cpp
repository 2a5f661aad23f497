// Stall probes: ranks in different collectives that wait on each other with no
// message flowing fail with Mismatch on every rank, fast; a slow rank, a rank
// ahead or behind, and point-to-point traffic are never reported.
#include "mesh_harness.hpp"
#include "transport/call_history.hpp"
#include "transport/stall_probe.hpp"

#include <gtest/gtest.h>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

Fingerprint allreduce_stamp(std::uint64_t seq) {
  return Fingerprint{seq,
                     4,
                     -1,
                     Collective::AllReduce,
                     static_cast<std::uint8_t>(DataType::Float32),
                     static_cast<std::uint8_t>(ReduceOp::Sum),
                     0};
}
Fingerprint broadcast_stamp(std::uint64_t seq) {
  return Fingerprint{seq, 4, 0, Collective::Broadcast, static_cast<std::uint8_t>(DataType::Float32),
                     0,   0};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ProbeConflict, OnlySameSequenceDifferentCallsConflict) {
  auto sentence = probe_conflict(0, allreduce_stamp(3), 2, broadcast_stamp(3));
  ASSERT_TRUE(sentence);
  EXPECT_EQ(*sentence,
            "rank 0 is in allreduce #3 (count 4, float32, sum) but rank 2 is in broadcast #3 "
            "(count 4, float32, root 0)");
  EXPECT_FALSE(probe_conflict(0, allreduce_stamp(3), 2, allreduce_stamp(3)));
  EXPECT_FALSE(probe_conflict(0, allreduce_stamp(3), 2, broadcast_stamp(4)));
  Fingerprint recv = send_stamp(3, 4);
  recv.collective = Collective::Recv;
  EXPECT_FALSE(probe_conflict(0, allreduce_stamp(3), 2, send_stamp(3, 4)));
  EXPECT_FALSE(probe_conflict(0, recv, 2, broadcast_stamp(3)));
}

// A call this rank made is compared with a peer's call of the same number, even after
// this rank left it; roots count; forgotten, unknown and point-to-point calls never conflict.
TEST(CallHistory, NamesThisRanksOwnCallOfThatNumber) {
  CallHistory history;
  Fingerprint root1 = broadcast_stamp(3);
  root1.root = 1;
  history.made(root1);
  history.made(allreduce_stamp(4));
  history.made(send_stamp(3, 4));  // point-to-point: not remembered
  auto sentence = history.conflict(1, 0, broadcast_stamp(3), "sent");
  ASSERT_TRUE(sentence);
  EXPECT_EQ(*sentence,
            "rank 1 made broadcast #3 (count 4, float32, root 1) but rank 0 sent broadcast #3 "
            "(count 4, float32, root 0)");
  EXPECT_FALSE(history.conflict(1, 0, root1, "sent"));
  EXPECT_FALSE(history.conflict(1, 0, broadcast_stamp(5), "sent"));  // not made yet
  EXPECT_FALSE(history.conflict(1, 0, send_stamp(3, 4), "sent"));
  history.made(allreduce_stamp(3 + CallHistory::kCalls));  // call #3 forgotten
  EXPECT_FALSE(history.conflict(1, 0, broadcast_stamp(3), "sent"));
}

TEST(StallClock, ProbesOnceAfterTheDelayThenEveryRepeat) {
  StallClock clock;
  const auto t0 = Clock::now();
  clock.activity(t0);
  EXPECT_FALSE(clock.probe_due(t0 + kStallProbeDelay - 1ms));
  EXPECT_TRUE(clock.probe_due(t0 + kStallProbeDelay));
  EXPECT_FALSE(clock.probe_due(t0 + kStallProbeDelay + 1ms));
  EXPECT_FALSE(clock.probe_due(t0 + kStallProbeDelay + kStallProbeRepeat - 1ms));
  EXPECT_TRUE(clock.probe_due(t0 + kStallProbeDelay + kStallProbeRepeat));
  const auto t1 = t0 + 10s;
  clock.activity(t1);
  EXPECT_FALSE(clock.probe_due(t1 + 1ms));
  EXPECT_TRUE(clock.probe_due(t1 + kStallProbeDelay));
}

class StallProbe : public ::testing::TestWithParam<Kind> {};

// Rank 0 is in allreduce #3 waiting for rank 2; ranks 1 and 2 are in broadcast
// #3 (root 0) waiting for rank 0. Nothing is ever sent.
TEST_P(StallProbe, CrossedCallsFailWithMismatchOnEveryRank) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    float data[4] = {};
    RequestId id = r == 0 ? t.post_recv(2, data, sizeof(data), allreduce_stamp(3))
                          : t.post_recv(0, data, sizeof(data), broadcast_stamp(3));
    const auto start = Clock::now();
    try {
      wait_one(t, id, 30s);
      ADD_FAILURE() << "rank " << r << " completed a mismatched call";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Mismatch) << "rank " << r << ": " << e.what();
      EXPECT_TRUE(contains(e.what(), "allreduce #3")) << e.what();
      EXPECT_TRUE(contains(e.what(), "broadcast #3")) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 5s) << "rank " << r;
  });
}

// A ring allreduce #3 where rank 2 joins a second late: the others stall and
// probe each other (and rank 2, which reads the probes when it joins); all match.
TEST_P(StallProbe, SlowMatchingRankIsNotReported) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    if (r == 2) std::this_thread::sleep_for(1s);
    float out[4] = {1, 2, 3, static_cast<float>(r)}, in[4] = {};
    RequestId ids[2] = {t.post_send((r + 1) % 3, out, sizeof(out), allreduce_stamp(3)),
                        t.post_recv((r + 2) % 3, in, sizeof(in), allreduce_stamp(3))};
    t.wait(ids, deadline_after(20s));
    EXPECT_EQ(in[3], static_cast<float>((r + 2) % 3));
  });
}

// Rank 0 is already in allreduce #4 while rank 1 is still in broadcast #3,
// waiting (over a second) for rank 2: probes of other calls are ignored.
TEST_P(StallProbe, RanksAheadOrBehindAreNotReported) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    float data[4] = {};
    if (r == 0) {
      wait_one(t, t.post_recv(1, data, sizeof(data), allreduce_stamp(4)));
    } else if (r == 1) {
      wait_one(t, t.post_recv(2, data, sizeof(data), broadcast_stamp(3)));
      wait_one(t, t.post_send(0, data, sizeof(data), allreduce_stamp(4)));
    } else {
      std::this_thread::sleep_for(1s);
      wait_one(t, t.post_send(1, data, sizeof(data), broadcast_stamp(3)));
    }
  });
}

// Point-to-point sequence numbers count per pair, so they are never compared:
// a recv #3 stalled beside a peer stalled in allreduce #3 is no mismatch.
TEST_P(StallProbe, PointToPointIsNeverProbedOrCompared) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    float data[4] = {};
    if (r == 0) {
      RequestId id = t.post_recv(1, data, sizeof(data), recv_stamp(3, sizeof(data)));
      Error e(Status::Success, "");
      try {
        wait_one(t, id, 700ms);
      } catch (const Error& caught) {
        e = caught;
      }
      EXPECT_EQ(e.status(), Status::Timeout) << e.what();
    } else {
      RequestId id = t.post_recv(0, data, sizeof(data), allreduce_stamp(3));
      EXPECT_FALSE(t.wait_until({&id, 1}, deadline_after(500ms)));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, StallProbe, ::testing::Values(Kind::Tcp, Kind::Shm),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

}  // namespace
}  // namespace chorus::transport::testing
