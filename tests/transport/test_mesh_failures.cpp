// Failures are named and fast: fingerprint and size mismatches, abort() from
// another thread, a peer that goes away, a peer process that died, timeouts,
// the broken state, and strangers knocking on the TCP listener.
#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "mesh_harness.hpp"
#include "transport/rank_info.hpp"
#include "transport/tcp/tcp_links.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <filesystem>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

class MeshFailure : public ::testing::TestWithParam<Kind> {};

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

TEST_P(MeshFailure, FingerprintMismatchNamesBothCalls) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    float data[4] = {1, 2, 3, 4};
    if (r == 0) {
      RequestId ids[2] = {t.post_send(1, data, sizeof(data), allreduce_stamp(3)),
                          t.post_recv(1, data, sizeof(data), allreduce_stamp(3))};
      Error e = expect_error([&] { t.wait(ids, deadline_after(10s)); });
      EXPECT_EQ(e.status(), Status::Mismatch) << e.what();
      EXPECT_TRUE(contains(text_of(e), "rank 1 aborted: rank 1 is in broadcast #3")) << e.what();
    } else {
      RequestId id = t.post_recv(0, data, sizeof(data), broadcast_stamp(3));
      Error e = expect_error([&] { wait_one(t, id); });
      EXPECT_EQ(e.status(), Status::Mismatch);
      EXPECT_EQ(text_of(e),
                "rank 1 is in broadcast #3 (count 4, float32, root 0) but rank 0 sent "
                "allreduce #3 (count 4, float32, sum)");
    }
  });
}

TEST_P(MeshFailure, SizeMismatchNamesBothByteCounts) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  Fingerprint v{7, 0, -1, Collective::AllToAllV, static_cast<std::uint8_t>(DataType::Uint8), 0, 0};
  std::vector<unsigned char> out(32), in(16);
  RequestId send = mesh[0].post_send(1, out.data(), out.size(), v);
  RequestId recv = mesh[1].post_recv(0, in.data(), in.size(), v);
  wait_one(mesh[0], send);
  Error e = expect_error([&] { wait_one(mesh[1], recv); });
  EXPECT_EQ(e.status(), Status::Mismatch);
  EXPECT_TRUE(contains(text_of(e), "expected 16 bytes from rank 0")) << e.what();
  EXPECT_TRUE(contains(text_of(e), "sent 32 bytes")) << e.what();
  // Broken: every later call rethrows the same error.
  Error again = expect_error([&] { mesh[1].post_send(0, out.data(), 1, send_stamp(0, 1)); });
  EXPECT_EQ(again.status(), Status::Mismatch);
  EXPECT_EQ(text_of(again), text_of(e));
}

TEST_P(MeshFailure, AbortFromAnotherThreadWakesWaitAndTellsPeers) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.run([&](int r, Transport& t) {
    char byte = 0;
    RequestId id = t.post_recv(r == 0 ? 1 : 0, &byte, 1, recv_stamp(0, 1));
    auto start = Clock::now();
    std::thread aborter;
    if (r == 0) {
      aborter = std::thread([&] {
        std::this_thread::sleep_for(300ms);
        t.abort(Status::InternalError, "stop now");
      });
    }
    Error e = expect_error([&] { wait_one(t, id, 15s); });
    auto waited = Clock::now() - start;
    if (aborter.joinable()) aborter.join();
    if (r == 0) {
      EXPECT_EQ(e.status(), Status::InternalError);
      EXPECT_EQ(text_of(e), "stop now");
      EXPECT_LT(waited, 1300ms);
    } else {
      // Rank 2 may hear it from rank 0 directly or relayed by rank 1 first.
      EXPECT_EQ(e.status(), Status::RemoteError);
      if (r == 1) {
        EXPECT_EQ(text_of(e), "rank 0 aborted: stop now");
      }
      EXPECT_TRUE(text_of(e).ends_with("rank 0 aborted: stop now")) << e.what();
      EXPECT_LT(waited, 2500ms);
    }
  });
}

TEST_P(MeshFailure, AbortOutsideWaitStillTellsPeers) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  char byte = 0;
  RequestId id = mesh[1].post_recv(0, &byte, 1, recv_stamp(0, 1));
  mesh[0].abort(Status::InvalidUsage, "the application aborted");
  mesh[0].abort(Status::InternalError, "a second reason is ignored");
  auto start = Clock::now();
  Error e = expect_error([&] { wait_one(mesh[1], id, 15s); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(text_of(e), "rank 0 aborted: the application aborted");
  Error own = expect_error([&] { mesh[0].post_recv(1, &byte, 1, recv_stamp(0, 1)); });
  EXPECT_EQ(own.status(), Status::InvalidUsage);
}

TEST_P(MeshFailure, DestroyedPeerIsRemoteErrorAfterItsLastMessage) {
  Mesh mesh(2, GetParam());
  ASSERT_TRUE(mesh.ok());
  auto out = pattern(1, 0, 0, 3000);
  wait_one(mesh[1], mesh[1].post_send(0, out.data(), out.size(), send_stamp(0, out.size())));
  std::thread closer([&] {
    std::this_thread::sleep_for(200ms);
    mesh.destroy(1);
  });
  // Sent before the close: still delivered.
  std::vector<unsigned char> in(3000);
  wait_one(mesh[0], mesh[0].post_recv(1, in.data(), in.size(), recv_stamp(0, in.size())));
  EXPECT_TRUE(in == out);
  auto start = Clock::now();
  RequestId id = mesh[0].post_recv(1, in.data(), in.size(), recv_stamp(1, in.size()));
  Error e = expect_error([&] { wait_one(mesh[0], id, 15s); });
  closer.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(e.status(), Status::RemoteError);
  EXPECT_EQ(text_of(e), "rank 1 closed the connection (process died or aborted)");
}

TEST_P(MeshFailure, TimeoutNamesThePeerAndTheRequest) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  char data[64];
  RequestId ids[2] = {mesh[0].post_recv(2, data, 64, recv_stamp(5, 64)),
                      mesh[0].post_recv(1, data, 64, recv_stamp(6, 64))};
  auto start = Clock::now();
  Error e = expect_error([&] { mesh[0].wait(ids, deadline_after(300ms)); });
  auto waited = Clock::now() - start;
  EXPECT_EQ(e.status(), Status::Timeout);
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 1500ms);
  EXPECT_TRUE(contains(text_of(e),
                       "timed out after 0.3s waiting for rank(s) 1, 2 (recv of 64 "
                       "bytes from rank 2 for recv #5 (count 64, uint8), and 1 more)"))
      << e.what();
}

TEST_P(MeshFailure, UnrelatedClosedPeerDoesNotBreakOthers) {
  Mesh mesh(3, GetParam());
  ASSERT_TRUE(mesh.ok());
  mesh.destroy(2);
  std::this_thread::sleep_for(100ms);
  auto out = pattern(0, 1, 0, 100000);
  std::vector<unsigned char> in(out.size());
  RequestId send = mesh[0].post_send(1, out.data(), out.size(), send_stamp(0, out.size()));
  RequestId recv = mesh[1].post_recv(0, in.data(), in.size(), recv_stamp(0, in.size()));
  std::thread receiver([&] { wait_one(mesh[1], recv); });
  wait_one(mesh[0], send);
  receiver.join();
  EXPECT_TRUE(in == out);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MeshFailure, ::testing::Values(Kind::Tcp, Kind::Shm),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

/// A pid that is certainly not running: a child that exited and was reaped.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(MeshShm, DeadPeerProcessIsDetected) {
  pid_t gone = dead_pid();
  auto identity = [&](int r) { return LocalIdentity{"test-host", r == 1 ? gone : ::getpid()}; };
  Mesh mesh(2, Kind::Shm, identity);
  ASSERT_TRUE(mesh.ok());
  char byte = 0;
  RequestId id = mesh[0].post_recv(1, &byte, 1, recv_stamp(0, 1));
  auto start = Clock::now();
  Error e = expect_error([&] { wait_one(mesh[0], id, 15s); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(e.status(), Status::RemoteError);
  EXPECT_EQ(text_of(e), "rank 1 (pid " + std::to_string(gone) + ") died");
}

TEST(MeshShm, NothingIsLeftInDevShm) {
  Mesh mesh(3, Kind::Shm);
  ASSERT_TRUE(mesh.ok());
  for (int r = 0; r < 3; ++r) {
    RankInfo info = decode_rank_info(mesh.store(0).get(rank_info_key(r), deadline_after(1s)), r);
    std::string path = "/dev/shm/chorus-" + info.token + "-" + std::to_string(r);
    EXPECT_FALSE(std::filesystem::exists(path)) << path;
  }
}

// The strangers reach rank 0's listener before rank 1 has even started, and are
// dropped; rank 1's link, opened on first use, still forms.
TEST(MeshTcp, StrangersAreDroppedAndTheMeshStillForms) {
  StoreServer server("127.0.0.1", 0, kSecret);
  std::vector<std::unique_ptr<Transport>> transports(2);
  auto join = [&](int r) {
    auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(10s));
    MeshOptions options;
    options.kind = Kind::Tcp;
    options.secret = kSecret;
    options.advertise_host = "127.0.0.1";
    options.deadline = deadline_after(30s);
    transports[r] = connect_mesh_as(*store, r, 2, options, same_host(r)).transport;
  };
  std::vector<std::thread> threads;
  threads.emplace_back([&] { EXPECT_NO_THROW(join(0)); });
  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(10s));
  RankInfo info = decode_rank_info(store->get(rank_info_key(0), deadline_after(10s)), 0);
  net::HostPort listener{"127.0.0.1", info.port};
  auto stranger = [&](std::function<void(const net::Socket&)> behave) {
    auto socket = std::make_shared<net::Socket>(net::connect_tcp(listener, deadline_after(5s)));
    threads.emplace_back([socket, behave] { behave(*socket); });
  };
  stranger([](const net::Socket& s) {
    std::string bytes(100, 'x');
    net::write_full(s.fd(), bytes.data(), bytes.size(), deadline_after(5s));
    expect_dropped(s, "garbage");
  });
  stranger([](const net::Socket& s) {
    EXPECT_THROW(auth::handshake_as_client(s.fd(), "wrong secret", "data", deadline_after(20s)),
                 Error);
  });
  for (auto id : {tcp::make_identification(1, 2, std::string(32, '0')),  // other communicator
                  tcp::make_identification(0, 2, info.token),            // not a higher rank
                  tcp::make_identification(7, 2, info.token)}) {         // no such rank
    stranger([id](const net::Socket& s) {
      auth::handshake_as_client(s.fd(), kSecret, "data", deadline_after(20s));
      net::write_full(s.fd(), &id, sizeof(id), deadline_after(5s));
      expect_dropped(s, "bad identification");
    });
  }
  threads.emplace_back([&] { EXPECT_NO_THROW(join(1)); });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(transports[0] && transports[1]);
  auto out = pattern(1, 0, 0, 5000);
  std::vector<unsigned char> in(out.size());
  RequestId recv = transports[0]->post_recv(1, in.data(), in.size(), recv_stamp(0, in.size()));
  RequestId send = transports[1]->post_send(0, out.data(), out.size(), send_stamp(0, out.size()));
  std::thread sender([&] { wait_one(*transports[1], send); });
  wait_one(*transports[0], recv);
  sender.join();
  EXPECT_TRUE(in == out);
}

}  // namespace
}  // namespace chorus::transport::testing
