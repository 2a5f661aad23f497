// Data moves correctly over every link kind and mesh size: ring exchanges and
// ping-pong of 0, 1, odd and 10 MiB messages, everybody-sends-first (buffering
// of unexpected messages, no deadlock), and per-pair ordering.
#include "mesh_harness.hpp"
#include "transport/mesh.hpp"

#include <gtest/gtest.h>

#include <tuple>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

class MeshData : public ::testing::TestWithParam<std::tuple<Kind, int>> {
 protected:
  Kind kind() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

/// Every rank sends `bytes` to its right neighbour and receives from its left.
void ring_exchange(Mesh& mesh, std::size_t bytes, int tag) {
  mesh.run([&](int r, Transport& t) {
    int n = t.size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    auto out = pattern(r, right, tag, bytes);
    std::vector<unsigned char> in(bytes, 0xee);
    RequestId ids[2] = {t.post_recv(left, in.data(), bytes, recv_stamp(tag, bytes)),
                        t.post_send(right, out.data(), bytes, send_stamp(tag, bytes))};
    t.wait(ids, deadline_after(30s));
    EXPECT_TRUE(in == pattern(left, r, tag, bytes)) << "rank " << r << ", " << bytes << " bytes";
  });
}

/// Rank 0 and the last rank bounce a message back and forth.
void ping_pong(Mesh& mesh, std::size_t bytes, int tag) {
  int last = mesh.size() - 1;
  mesh.run([&](int r, Transport& t) {
    if (r != 0 && r != last) return;
    int peer = r == 0 ? last : 0;
    std::vector<unsigned char> buffer(bytes);
    for (int round = 0; round < 3; ++round) {
      std::uint64_t seq = static_cast<std::uint64_t>(tag * 10 + round);
      if (r == 0) {
        auto out = pattern(0, last, tag + round, bytes);
        wait_one(t, t.post_send(peer, out.data(), bytes, send_stamp(seq, bytes)));
        wait_one(t, t.post_recv(peer, buffer.data(), bytes, recv_stamp(seq, bytes)));
        EXPECT_TRUE(buffer == out) << "the echo of round " << round << " differs";
      } else {
        wait_one(t, t.post_recv(peer, buffer.data(), bytes, recv_stamp(seq, bytes)));
        EXPECT_TRUE(buffer == pattern(0, last, tag + round, bytes));
        wait_one(t, t.post_send(peer, buffer.data(), bytes, send_stamp(seq, bytes)));
      }
    }
  });
}

TEST_P(MeshData, RingExchangeAndPingPong) {
  Mesh mesh(ranks(), kind());
  ASSERT_TRUE(mesh.ok());
  int tag = 0;
  for (std::size_t bytes :
       {std::size_t{0}, std::size_t{1}, std::size_t{12345}, std::size_t{10} << 20}) {
    ring_exchange(mesh, bytes, ++tag);
    ping_pong(mesh, bytes, ++tag);
  }
}

TEST_P(MeshData, EverybodySendsBeforeReceiving) {
  Mesh mesh(ranks(), kind());
  ASSERT_TRUE(mesh.ok());
  // Larger than a shared-memory ring and than the socket buffers: only
  // buffering on the receiving side lets every send complete before any recv.
  const std::size_t bytes = ranks() <= 3 ? (6u << 20) : (2u << 20) + 17;
  mesh.run([&](int r, Transport& t) {
    int n = t.size();
    std::vector<std::vector<unsigned char>> out(n), in(n);
    std::vector<RequestId> sends, recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      out[p] = pattern(r, p, 1, bytes);
      sends.push_back(t.post_send(p, out[p].data(), bytes, send_stamp(0, bytes)));
    }
    t.wait(sends, deadline_after(30s));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      in[p].resize(bytes);
      recvs.push_back(t.post_recv(p, in[p].data(), bytes, recv_stamp(0, bytes)));
    }
    t.wait(recvs, deadline_after(30s));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      EXPECT_TRUE(in[p] == pattern(p, r, 1, bytes)) << "from rank " << p;
    }
  });
}

TEST_P(MeshData, OrderIsPreservedPerPair) {
  Mesh mesh(ranks(), kind());
  ASSERT_TRUE(mesh.ok());
  constexpr int kMessages = 200;
  auto size_of = [](int i) { return static_cast<std::size_t>((i * 2039) % 40000); };
  mesh.run([&](int r, Transport& t) {
    int n = t.size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    std::vector<std::vector<unsigned char>> out(kMessages), in(kMessages);
    std::vector<RequestId> ids;
    // Half of the receives are posted before the sends, half after: both the
    // direct and the buffered path must keep the order.
    for (int i = 0; i < kMessages / 2; ++i) {
      in[i].resize(size_of(i));
      ids.push_back(t.post_recv(left, in[i].data(), in[i].size(), recv_stamp(i, in[i].size())));
    }
    for (int i = 0; i < kMessages; ++i) {
      out[i] = pattern(r, right, i, size_of(i));
      ids.push_back(t.post_send(right, out[i].data(), out[i].size(), send_stamp(i, out[i].size())));
    }
    for (int i = kMessages / 2; i < kMessages; ++i) {
      in[i].resize(size_of(i));
      ids.push_back(t.post_recv(left, in[i].data(), in[i].size(), recv_stamp(i, in[i].size())));
    }
    t.wait(ids, deadline_after(30s));
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_TRUE(in[i] == pattern(left, r, i, size_of(i))) << "message " << i;
    }
  });
}

/// The stamp of the `seq`-th collective message of a pair (collective messages may be held).
Fingerprint collective_stamp(std::uint64_t seq, std::size_t bytes) {
  Fingerprint fp = send_stamp(seq, bytes);
  fp.collective = Collective::AllGather;
  return fp;
}

// Large collective messages from every peer at once, their receives posted late and in
// another order per peer (held messages, some of them buffered, all interleaved), and
// both directions of every pair sending first and waiting for their sends.
TEST_P(MeshData, LargeCollectiveMessagesFromEveryPeerPostedLate) {
  Mesh mesh(ranks(), kind());
  ASSERT_TRUE(mesh.ok());
  constexpr int kMessages = 3;
  const std::size_t bytes = ranks() <= 3 ? (3u << 20) + 5 : (512u << 10) + 5;
  mesh.run([&](int r, Transport& t) {
    const int n = t.size();
    std::vector<std::vector<unsigned char>> out(n * kMessages), in(n * kMessages);
    std::vector<RequestId> sends, recvs;
    for (int i = 0; i < kMessages; ++i) {
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        out[p * kMessages + i] = pattern(r, p, i, bytes);
        sends.push_back(
            t.post_send(p, out[p * kMessages + i].data(), bytes, collective_stamp(i, bytes)));
      }
    }
    if (r % 2 == 0) t.wait(sends, deadline_after(30s));  // half the ranks: sends first
    for (int k = 1; k < n; ++k) {
      const int p = (r + n - k) % n;  // peers in another order on every rank
      for (int i = 0; i < kMessages; ++i) {
        in[p * kMessages + i].assign(bytes, 0xee);
        recvs.push_back(
            t.post_recv(p, in[p * kMessages + i].data(), bytes, collective_stamp(i, bytes)));
      }
      RequestId first = recvs[recvs.size() - kMessages];
      t.wait({&first, 1}, deadline_after(30s));
    }
    t.wait(recvs, deadline_after(30s));
    t.wait(sends, deadline_after(30s));
    for (int p = 0; p < n; ++p) {
      for (int i = 0; p != r && i < kMessages; ++i) {
        ASSERT_TRUE(in[p * kMessages + i] == pattern(p, r, i, bytes))
            << "message " << i << " from rank " << p;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(KindsAndSizes, MeshData,
                         ::testing::Combine(::testing::Values(Kind::Tcp, Kind::Shm),
                                            ::testing::Values(2, 3, 5, 8)),
                         [](const auto& info) {
                           return std::string(kind_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Two pretend hosts: shared memory inside each, TCP between them, in one engine.
TEST(MeshMixed, TwoHostsUseBothLinkKinds) {
  auto two_hosts = [](int r) { return LocalIdentity{r % 2 ? "host-b" : "host-a", ::getpid()}; };
  Mesh mesh(5, Kind::Auto, two_hosts);
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh[0].topology().num_hosts, 2);
  EXPECT_EQ(mesh[3].topology().host_of_rank, (std::vector<int>{0, 1, 0, 1, 0}));
  int tag = 0;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{777}, std::size_t{3} << 20}) {
    ring_exchange(mesh, bytes, ++tag);
  }
}

// Ranks on other hosts connect to what each advertises: an interface name
// (CHORUS_SOCKET_IFNAME=lo) is advertised as its address, never as the name.
TEST(MeshMixed, AnInterfaceNameIsAdvertisedAsItsAddress) {
  auto two_hosts = [](int r) { return LocalIdentity{r % 2 ? "host-b" : "host-a", ::getpid()}; };
  Mesh mesh(2, Kind::Tcp, two_hosts, 5s, "lo");
  ASSERT_TRUE(mesh.ok());
  ring_exchange(mesh, 777, 1);
}

TEST(MeshMixed, ShmNeedsOneHost) {
  StoreServer server("127.0.0.1", 0, kSecret);
  run_threads(2, [&](int r) {
    auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(10s));
    MeshOptions options;
    options.kind = Kind::Shm;
    options.secret = kSecret;
    options.deadline = deadline_after(10s);
    LocalIdentity identity{r == 0 ? "host-a" : "host-b", ::getpid()};
    try {
      connect_mesh_as(*store, r, 2, options, identity);
      ADD_FAILURE() << "rank " << r << " formed a shm mesh across two hosts";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidUsage) << e.what();
    }
  });
}

// The production entry point, with this machine's real host identity.
TEST(MeshReal, ConnectMeshAutoAndSizeOne) {
  StoreServer server("127.0.0.1", 0, kSecret);
  std::vector<std::unique_ptr<Transport>> transports(3);
  run_threads(3, [&](int r) {
    auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(10s));
    MeshOptions options;
    options.secret = kSecret;
    options.deadline = deadline_after(20s);
    transports[r] = connect_mesh(*store, r, 3, options).transport;
  });
  ASSERT_TRUE(transports[0] && transports[1] && transports[2]);
  EXPECT_EQ(transports[2]->topology().num_hosts, 1);
  auto out = pattern(0, 2, 0, 100);
  std::vector<unsigned char> in(100);
  RequestId send = transports[0]->post_send(2, out.data(), 100, send_stamp(0, 100));
  RequestId recv = transports[2]->post_recv(0, in.data(), 100, recv_stamp(0, 100));
  wait_one(*transports[0], send);
  wait_one(*transports[2], recv);
  EXPECT_TRUE(in == out);

  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(10s));
  MeshOptions options;
  auto alone = connect_mesh(*store, 0, 1, options).transport;
  EXPECT_EQ(alone->size(), 1);
  EXPECT_EQ(alone->topology().num_hosts, 1);
  alone->wait({}, deadline_after(1s));
}

TEST(ParseKind, NamesAndErrors) {
  EXPECT_EQ(parse_kind("auto"), Kind::Auto);
  EXPECT_EQ(parse_kind("tcp"), Kind::Tcp);
  EXPECT_EQ(parse_kind("shm"), Kind::Shm);
  try {
    parse_kind("ucx");
    ADD_FAILURE() << "parse_kind accepted ucx";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ucx"), std::string::npos);
  }
}

}  // namespace
}  // namespace chorus::transport::testing
