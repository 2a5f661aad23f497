// Point-to-point matching in the transport, threads as ranks over TCP and shared memory:
// receives match by tag (Fingerprint::root) with other tags left buffered, any-source
// receives take messages from every peer and report the sender, named and any-source
// receives compete in posting order, collective and point-to-point messages never match
// each other, and a lost peer fails a pending any-source receive.
#include "mesh_harness.hpp"
#include "transport/mesh.hpp"

#include <gtest/gtest.h>

#include <map>
#include <thread>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

/// The `seq`-th message to a peer, with `tag`.
Fingerprint tagged_send(int tag, std::uint64_t seq, std::size_t bytes) {
  Fingerprint fp = send_stamp(seq, bytes);
  fp.root = tag;
  return fp;
}
/// A receive of `tag` that accepts any sequence number (what the communicator posts).
Fingerprint tagged_recv(int tag, std::size_t bytes) {
  Fingerprint fp = recv_stamp(0, bytes);
  fp.root = tag;
  fp.reserved = kAnySeq;
  return fp;
}

class P2pMatching : public ::testing::TestWithParam<Kind> {};

TEST_P(P2pMatching, TagsAreMatchedOutOfOrder) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  auto one = pattern(1, 0, 1, 100), two = pattern(1, 0, 2, 70000);  // small, and streamed
  mesh.run([&](int r, Transport& t) {
    if (r == 1) {
      RequestId ids[2] = {t.post_send(0, one.data(), one.size(), tagged_send(1, 0, one.size())),
                          t.post_send(0, two.data(), two.size(), tagged_send(2, 1, two.size()))};
      t.wait(ids, deadline_after(20s));
      return;
    }
    std::vector<unsigned char> in_two(two.size()), in_one(one.size());
    // Tag 2 completes alone although tag 1 arrived first and has no receive yet.
    wait_one(t, t.post_recv(1, in_two.data(), in_two.size(), tagged_recv(2, two.size())));
    EXPECT_TRUE(in_two == two);
    wait_one(t, t.post_recv(1, in_one.data(), in_one.size(), tagged_recv(1, one.size())));
    EXPECT_TRUE(in_one == one);
  });
}

TEST_P(P2pMatching, CollectiveReceivesSkipPointToPointMessages) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  Fingerprint barrier;
  barrier.seq = 1;
  barrier.collective = Collective::Barrier;
  auto p2p = pattern(1, 0, 5, 16), coll = pattern(1, 0, 6, 8);
  mesh.run([&](int r, Transport& t) {
    if (r == 1) {
      RequestId ids[2] = {t.post_send(0, p2p.data(), p2p.size(), tagged_send(5, 0, p2p.size())),
                          t.post_send(0, coll.data(), coll.size(), barrier)};
      t.wait(ids, deadline_after(20s));
      return;
    }
    std::vector<unsigned char> in_coll(coll.size()), in_p2p(p2p.size());
    wait_one(t, t.post_recv(1, in_coll.data(), in_coll.size(), barrier));
    EXPECT_TRUE(in_coll == coll);
    wait_one(t, t.post_recv(1, in_p2p.data(), in_p2p.size(), tagged_recv(5, p2p.size())));
    EXPECT_TRUE(in_p2p == p2p);
  });
}

/// Senders 1..n-1 each send `per_sender` numbered messages; rank 0 takes them all with
/// any-source receives: each exactly once, in order per sender, with the right source.
TEST_P(P2pMatching, AnySourceTakesEveryMessageOnceWithItsSource) {
  static constexpr int kPerSender = 6;
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    if (r != 0) {
      std::vector<std::uint32_t> out(kPerSender);
      std::vector<RequestId> ids;
      for (int i = 0; i < kPerSender; ++i) {
        out[i] = static_cast<std::uint32_t>(r * 1000 + i);
        ids.push_back(t.post_send(0, &out[i], 4, tagged_send(7, i, 4)));
      }
      t.wait(ids, deadline_after(20s));
      return;
    }
    std::map<int, int> next;  // sender -> index of its next message
    for (int k = 0; k < 2 * kPerSender; ++k) {
      std::uint32_t value = 0;
      int source = -1;
      wait_one(t, t.post_recv_any(&value, 4, tagged_recv(7, 4), &source));
      ASSERT_TRUE(source == 1 || source == 2) << source;
      EXPECT_EQ(value, static_cast<std::uint32_t>(source * 1000 + next[source]));
      ++next[source];
    }
    EXPECT_EQ(next[1], kPerSender);
    EXPECT_EQ(next[2], kPerSender);
  });
}

/// With both messages buffered, the receive posted first takes the first message.
TEST_P(P2pMatching, NamedAndAnySourceReceivesCompeteInPostingOrder) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    for (int round = 0; round < 2; ++round) {
      const std::uint64_t base = static_cast<std::uint64_t>(round) * 3;
      if (r == 1) {
        std::uint32_t out[3] = {10u + round, 20u + round, 0};
        RequestId ids[3] = {t.post_send(0, &out[0], 4, tagged_send(0, base, 4)),
                            t.post_send(0, &out[1], 4, tagged_send(0, base + 1, 4)),
                            t.post_send(0, &out[2], 4, tagged_send(9, base + 2, 4))};
        t.wait(ids, deadline_after(20s));
        continue;
      }
      std::uint32_t marker = 0, named = 0, any = 0;
      int source = -1;
      // The tag-9 marker left rank 1 last: once it is here, both tag-0 messages are buffered.
      wait_one(t, t.post_recv(1, &marker, 4, tagged_recv(9, 4)));
      RequestId ids[2];
      if (round == 0) {
        ids[0] = t.post_recv(1, &named, 4, tagged_recv(0, 4));
        ids[1] = t.post_recv_any(&any, 4, tagged_recv(0, 4), &source);
      } else {
        ids[1] = t.post_recv_any(&any, 4, tagged_recv(0, 4), &source);
        ids[0] = t.post_recv(1, &named, 4, tagged_recv(0, 4));
      }
      t.wait(ids, deadline_after(20s));
      EXPECT_EQ(named, round == 0 ? 10u : 21u) << "round " << round;
      EXPECT_EQ(any, round == 0 ? 20u : 11u) << "round " << round;
      EXPECT_EQ(source, 1);
    }
  });
}

TEST_P(P2pMatching, ZeroByteTaggedAndAnySourceMessages) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    if (r != 0) {
      wait_one(t, t.post_send(0, nullptr, 0, tagged_send(r, 0, 0)));
      return;
    }
    int source = -1;
    wait_one(t, t.post_recv_any(nullptr, 0, tagged_recv(2, 0), &source));
    EXPECT_EQ(source, 2);
    wait_one(t, t.post_recv(1, nullptr, 0, tagged_recv(1, 0)));
  });
}

TEST_P(P2pMatching, SizeMismatchOfATaggedMessageNamesBothSides) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  std::vector<unsigned char> out(8), in(4);
  wait_one(mesh[1], mesh[1].post_send(0, out.data(), out.size(), tagged_send(4, 0, 8)));
  int source = -1;
  Fingerprint want = tagged_recv(4, 4);
  want.count = 8;  // same call as the sender's, but room for 4 bytes only
  RequestId id = mesh[0].post_recv_any(in.data(), in.size(), want, &source);
  Error e = expect_error([&] { wait_one(mesh[0], id); });
  EXPECT_EQ(e.status(), Status::Mismatch);
  EXPECT_TRUE(contains(text_of(e), "rank 0 expected 4 bytes from rank 1 for any-source recv"))
      << e.what();
  EXPECT_TRUE(contains(text_of(e), "with tag 4 but rank 1 sent 8 bytes")) << e.what();
  EXPECT_EQ(source, -1) << "a failed receive reports no source";
}

TEST_P(P2pMatching, LosingAnyPeerFailsAPendingAnySourceReceive) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  std::uint32_t value = 0;
  int source = -1;
  RequestId id = mesh[0].post_recv_any(&value, 4, tagged_recv(0, 4), &source);
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    mesh.destroy(2);
  });
  auto start = Clock::now();
  Error e = expect_error([&] { wait_one(mesh[0], id, 15s); });
  closer.join();
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(e.status(), Status::RemoteError);
  EXPECT_TRUE(contains(text_of(e), "rank 2")) << e.what();
}

TEST_P(P2pMatching, AnySourceTimeoutNamesTheReceive) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  std::uint32_t value = 0;
  int source = -1;
  RequestId id = mesh[0].post_recv_any(&value, 4, tagged_recv(3, 4), &source);
  Error e = expect_error([&] { mesh[0].wait({&id, 1}, deadline_after(200ms)); });
  EXPECT_EQ(e.status(), Status::Timeout);
  EXPECT_TRUE(contains(text_of(e), "waiting for rank(s) any (any-source recv of 4 bytes"))
      << e.what();
}

INSTANTIATE_TEST_SUITE_P(Kinds, P2pMatching, ::testing::Values(Kind::Tcp, Kind::Shm),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

}  // namespace
}  // namespace chorus::transport::testing
