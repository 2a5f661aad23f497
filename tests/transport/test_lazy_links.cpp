// TCP links opened on first use (transport/tcp/tcp_links.hpp): no link is open after the
// start-up; the first message between two ranks opens exactly one, also when both open it at
// the same moment; a stranger knocking on a listener mid-job is dropped and changes nothing;
// a peer that is gone before its link was opened is named at once.
#include "bootstrap/auth.hpp"
#include "mesh_harness.hpp"
#include "transport/rank_info.hpp"
#include "transport/tcp/tcp_links.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

/// The ports rank listeners of `mesh` are bound to.
std::set<std::uint16_t> listener_ports(Mesh& mesh) {
  std::set<std::uint16_t> ports;
  for (int r = 0; r < mesh.size(); ++r) {
    ports.insert(decode_rank_info(mesh.store(0).get(rank_info_key(r), deadline_after(5s)), r).port);
  }
  return ports;
}

/// Established IPv4 connections whose local end is one of `ports` (the admitting side of each
/// link: one entry per link).
int links_to(const std::set<std::uint16_t>& ports) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // header
  int links = 0;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    const auto port =
        static_cast<std::uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
    links += state == "01" && ports.count(port) ? 1 : 0;
  }
  return links;
}

/// Every listed pair (a, b) exchanges one message each way, all pairs at once; a rank's
/// messages to its peers are all posted before it waits, so both sides open together.
void exchange(Mesh& mesh, const std::vector<std::pair<int, int>>& pairs, int tag) {
  mesh.run([&](int r, Transport& t) {
    std::vector<int> peers;
    for (auto [a, b] : pairs) {
      if (a == r) peers.push_back(b);
      if (b == r) peers.push_back(a);
    }
    std::vector<std::vector<unsigned char>> out, in;
    std::vector<RequestId> ids;
    for (int p : peers) {
      out.push_back(pattern(r, p, tag, 64));
      in.emplace_back(64);
      ids.push_back(t.post_send(p, out.back().data(), 64, send_stamp(tag, 64)));
    }
    for (std::size_t i = 0; i < peers.size(); ++i) {
      ids.push_back(t.post_recv(peers[i], in[i].data(), 64, recv_stamp(tag, 64)));
    }
    t.wait(ids, deadline_after(20s));
    for (std::size_t i = 0; i < peers.size(); ++i) {
      EXPECT_TRUE(in[i] == pattern(peers[i], r, tag, 64)) << r << " from " << peers[i];
    }
  });
}

TEST(LazyLinks, NoneIsOpenAtStartAndTheFirstUseOpensOne) {
  Mesh mesh(6, Kind::Tcp);
  ASSERT_TRUE(mesh.ok());
  const std::set<std::uint16_t> ports = listener_ports(mesh);
  EXPECT_EQ(links_to(ports), 0);
  exchange(mesh, {{0, 1}}, 0);
  EXPECT_EQ(links_to(ports), 1);
  exchange(mesh, {{0, 1}, {2, 3}}, 1);  // the open link serves again
  EXPECT_EQ(links_to(ports), 2);
}

TEST(LazyLinks, RanksOpeningTheirLinkToEachOtherAtOnceShareOneConnection) {
  const int n = 8;
  Mesh mesh(n, Kind::Tcp);
  ASSERT_TRUE(mesh.ok());
  std::vector<std::pair<int, int>> every_pair;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) every_pair.emplace_back(a, b);
  }
  exchange(mesh, every_pair, 0);
  EXPECT_EQ(links_to(listener_ports(mesh)), n * (n - 1) / 2);
  exchange(mesh, every_pair, 1);
}

TEST(LazyLinks, AStrangerMidJobIsDroppedAndChangesNothing) {
  Mesh mesh(3, Kind::Tcp);
  ASSERT_TRUE(mesh.ok());
  exchange(mesh, {{0, 1}}, 0);
  const RankInfo zero =
      decode_rank_info(mesh.store(0).get(rank_info_key(0), deadline_after(5s)), 0);
  const net::HostPort listener{"127.0.0.1", zero.port};
  std::vector<std::thread> strangers;
  auto knock = [&](std::function<void(const net::Socket&)> behave) {
    auto socket = std::make_shared<net::Socket>(net::connect_tcp(listener, deadline_after(5s)));
    strangers.emplace_back([socket, behave] { behave(*socket); });
  };
  knock([](const net::Socket& s) {
    EXPECT_THROW(auth::handshake_as_client(s.fd(), "wrong secret", "data", deadline_after(5s)),
                 Error);
  });
  knock([&](const net::Socket& s) {  // another communicator
    auth::handshake_as_client(s.fd(), kSecret, "data", deadline_after(5s));
    auto id = tcp::make_identification(2, 3, std::string(32, '0'));
    net::write_full(s.fd(), &id, sizeof(id), deadline_after(5s));
    expect_dropped(s, "another communicator");
  });
  knock([&](const net::Socket& s) {  // rank 1 again, whose link is open: told to keep that one
    auth::handshake_as_client(s.fd(), kSecret, "data", deadline_after(5s));
    auto id = tcp::make_identification(1, 3, zero.token);
    net::write_full(s.fd(), &id, sizeof(id), deadline_after(5s));
    tcp::Identification answer;
    net::read_full(s.fd(), &answer, sizeof(answer), deadline_after(5s));
    EXPECT_EQ(answer.magic, tcp::kCrossingMagic);
    expect_dropped(s, "a second link of rank 1");
  });
  for (auto& t : strangers) t.join();  // each dropped (or answered) before rank 2 calls
  strangers.clear();
  knock([](const net::Socket& s) { expect_dropped(s, "silent"); });  // held open for 5 s
  // While the silent stranger still holds its connection, rank 2's link opens at once.
  const auto start = Clock::now();
  exchange(mesh, {{0, 1}, {0, 2}}, 1);
  EXPECT_LT(Clock::now() - start, 2s);
  for (auto& t : strangers) t.join();
  exchange(mesh, {{0, 1}, {0, 2}, {1, 2}}, 2);
  EXPECT_EQ(links_to(listener_ports(mesh)), 3);
}

TEST(LazyLinks, APeerGoneBeforeItsLinkWasOpenedIsNamedAtOnce) {
  Mesh mesh(3, Kind::Tcp);
  ASSERT_TRUE(mesh.ok());
  exchange(mesh, {{0, 1}}, 0);
  const RankInfo two = decode_rank_info(mesh.store(0).get(rank_info_key(2), deadline_after(5s)), 2);
  mesh.destroy(2);  // its listener closes, as when its process exits or dies
  char byte = 0;
  const auto start = Clock::now();
  RequestId id = mesh[0].post_recv(2, &byte, 1, recv_stamp(1, 1));
  Error e = expect_error([&] { wait_one(mesh[0], id, 15s); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(e.status(), Status::RemoteError);
  EXPECT_TRUE(contains(text_of(e), "rank 0 cannot open its link to rank 2 (127.0.0.1:" +
                                       std::to_string(two.port) + "): "))
      << e.what();
  EXPECT_TRUE(text_of(e).ends_with("(rank 2 exited or died before the link was opened)"))
      << e.what();
}

/// CPU time this process has used (every thread).
std::chrono::microseconds cpu_time() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return std::chrono::seconds(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         std::chrono::microseconds(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// A listener that cannot accept (no descriptor left) pauses instead of spinning, and admits
// links again once descriptors are back.
TEST(LazyLinks, AnAcceptorWithoutDescriptorsWaitsAndRecovers) {
  Mesh mesh(2, Kind::Tcp);
  ASSERT_TRUE(mesh.ok());
  const RankInfo zero =
      decode_rank_info(mesh.store(0).get(rank_info_key(0), deadline_after(5s)), 0);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Its descriptor exists now; it connects once the acceptor can have no new one.
  net::Socket waiting(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(waiting.valid());
  int highest = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    highest = std::max(highest, std::stoi(entry.path().filename().string()));
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(highest + 1);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<int> fillers;  // the free descriptors below the limit, so accept() has none
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(zero.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(waiting.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const auto before = cpu_time();
  std::this_thread::sleep_for(500ms);
  const auto used = cpu_time() - before;
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_LT(used, 150ms) << "the acceptor spun on a listener it could not accept from";
  exchange(mesh, {{0, 1}}, 0);
  const std::string garbage(100, 'x');
  net::write_full(waiting.fd(), garbage.data(), garbage.size(), deadline_after(5s));
  expect_dropped(waiting, "the connection that waited, admitted once descriptors were back");
}

}  // namespace
}  // namespace chorus::transport::testing
