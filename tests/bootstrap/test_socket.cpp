// TCP helpers: address parsing, connect retries, deadlines, and peer closure.
#include "bootstrap/socket.hpp"
#include "socket_pair.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

namespace chorus::net {
namespace {

using namespace std::chrono_literals;

TEST(ParseHostPort, AcceptsNamesIpv4AndBracketedIpv6) {
  HostPort a = parse_host_port("node-1.cluster:29500");
  EXPECT_EQ(a.host, "node-1.cluster");
  EXPECT_EQ(a.port, 29500);
  HostPort b = parse_host_port("10.0.0.7:1");
  EXPECT_EQ(b.host, "10.0.0.7");
  EXPECT_EQ(b.port, 1);
  HostPort c = parse_host_port("[fe80::1]:65535");
  EXPECT_EQ(c.host, "fe80::1");
  EXPECT_EQ(c.port, 65535);
  EXPECT_EQ(to_string(c), "[fe80::1]:65535");
  EXPECT_EQ(to_string(a), "node-1.cluster:29500");
}

TEST(ParseHostPort, RejectsMalformedTextQuotingIt) {
  for (const char* text : {"", "host", "host:", ":80", "host:80x", "host:-1", "host:65536",
                           "host:123456", "::1:80", "[::1]80", "[::1", "[]:80", "host: 80"}) {
    try {
      parse_host_port(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + text + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Socket, RoundTripBothWays) {
  auto [client, server] = testing::tcp_pair();
  auto deadline = deadline_after(5s);
  std::string big(3 << 20, 'x');  // larger than the socket buffers: exercises partial writes
  std::thread writer([&, fd = client.fd()] { write_full(fd, big.data(), big.size(), deadline); });
  std::string got(big.size(), '\0');
  read_full(server.fd(), got.data(), got.size(), deadline);
  writer.join();
  EXPECT_EQ(got, big);
  write_full(server.fd(), "ok", 2, deadline);
  char reply[2];
  read_full(client.fd(), reply, 2, deadline);
  EXPECT_EQ(std::string(reply, 2), "ok");
}

TEST(Socket, ReadTimesOutAtTheDeadline) {
  auto [client, server] = testing::tcp_pair();
  char byte;
  auto start = Clock::now();
  try {
    read_full(server.fd(), &byte, 1, deadline_after(150ms));
    FAIL() << "read returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
  }
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 140ms);
  EXPECT_LT(elapsed, 2s);
}

TEST(Socket, PeerCloseIsRemoteErrorForReadsAndWrites) {
  auto [client, server] = testing::tcp_pair();
  client.close();
  char byte;
  try {
    read_full(server.fd(), &byte, 1, deadline_after(5s));
    FAIL() << "read returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_NE(std::string(e.what()).find("connection closed by peer"), std::string::npos);
  }
  // Writing into a closed connection fails (EPIPE/ECONNRESET) without SIGPIPE killing us.
  std::string chunk(1 << 16, 'y');
  try {
    for (int i = 0; i < 100; ++i)
      write_full(server.fd(), chunk.data(), chunk.size(), deadline_after(5s));
    FAIL() << "writes kept succeeding";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
  }
}

TEST(Socket, ConnectRetriesUntilTheListenerComesUp) {
  // Reserve a port, free it, and listen on it again a little later.
  std::uint16_t port = local_port(listen_tcp("127.0.0.1", 0));
  std::thread late_listener([port] {
    std::this_thread::sleep_for(200ms);
    Socket listener = listen_tcp("127.0.0.1", port);
    Socket accepted = accept_until(listener, deadline_after(5s));
    EXPECT_TRUE(accepted.valid());
    write_full(accepted.fd(), "!", 1, deadline_after(5s));
  });
  Socket client = connect_tcp({"127.0.0.1", port}, deadline_after(5s));
  char byte = 0;
  read_full(client.fd(), &byte, 1, deadline_after(5s));
  EXPECT_EQ(byte, '!');
  late_listener.join();
}

TEST(Socket, ConnectToNobodyTimesOut) {
  std::uint16_t port = local_port(listen_tcp("127.0.0.1", 0));
  auto start = Clock::now();
  try {
    connect_tcp({"127.0.0.1", port}, deadline_after(200ms));
    FAIL() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
    EXPECT_NE(std::string(e.what()).find(std::to_string(port)), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(Socket, AcceptReturnsInvalidAtTheDeadline) {
  Socket listener = listen_tcp("", 0);
  EXPECT_FALSE(accept_until(listener, deadline_after(50ms)).valid());
}

TEST(Socket, LocalhostNameAndIpv6Loopback) {
  Socket listener = listen_tcp("127.0.0.1", 0);
  Socket client = connect_tcp({"localhost", local_port(listener)}, deadline_after(5s));
  EXPECT_TRUE(accept_until(listener, deadline_after(5s)).valid());
  EXPECT_EQ(local_address_of(client), "127.0.0.1");
  Socket v6;
  try {
    v6 = listen_tcp("::1", 0);
  } catch (const Error&) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  Socket v6_client = connect_tcp({"::1", local_port(v6)}, deadline_after(5s));
  EXPECT_EQ(local_address_of(v6_client), "::1");
}

TEST(Socket, UnresolvableNameIsInvalidArgument) {
  try {
    connect_tcp({"no-such-host.invalid", 80}, deadline_after(2s));
    FAIL() << "resolved";
  } catch (const Error& e) {
    EXPECT_TRUE(e.status() == Status::InvalidArgument || e.status() == Status::Timeout) << e.what();
  }
}

}  // namespace
}  // namespace chorus::net
