// The mutual handshake: success, wrong secrets detected on either side, strangers.
#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "socket_pair.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <future>

namespace chorus::auth {
namespace {

using namespace std::chrono_literals;

/// Runs the server side in a thread; returns its error sentence ("" on success).
std::future<std::string> serve(int fd, std::string secret, std::string purpose) {
  return std::async(std::launch::async, [fd, secret, purpose] {
    try {
      handshake_as_server(fd, secret, purpose, deadline_after(5s));
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
}

TEST(Handshake, SucceedsWithTheSameSecret) {
  for (std::string secret : {std::string("s3cret"), std::string(), random_secret()}) {
    auto [client, server] = testing::tcp_pair();
    auto server_result = serve(server.fd(), secret, "store");
    EXPECT_NO_THROW(handshake_as_client(client.fd(), secret, "store", deadline_after(5s)));
    EXPECT_EQ(server_result.get(), "");
  }
}

TEST(Handshake, ServerDetectsAClientWithTheWrongSecret) {
  auto [client, server] = testing::tcp_pair();
  auto server_result = serve(server.fd(), "right", "store");
  try {
    handshake_as_client(client.fd(), "wrong", "store", deadline_after(5s));
    FAIL() << "client was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_NE(std::string(e.what()).find("authentication failed"), std::string::npos) << e.what();
  }
  EXPECT_NE(server_result.get().find("authentication failed"), std::string::npos);
}

TEST(Handshake, PurposeIsPartOfTheProof) {
  auto [client, server] = testing::tcp_pair();
  auto server_result = serve(server.fd(), "same", "data");
  EXPECT_THROW(handshake_as_client(client.fd(), "same", "store", deadline_after(5s)), Error);
  EXPECT_NE(server_result.get().find("authentication failed"), std::string::npos);
}

TEST(Handshake, ClientDetectsAServerThatDoesNotKnowTheSecret) {
  // A fake server that accepts any client and answers with a made-up proof.
  auto [client, server] = testing::tcp_pair();
  auto fake = std::async(std::launch::async, [fd = server.fd()] {
    ServerHandshake real("whatever", "store");
    net::write_full(fd, real.challenge().data(), real.challenge().size(), deadline_after(5s));
    std::uint8_t response[ServerHandshake::kResponseBytes];
    net::read_full(fd, response, sizeof(response), deadline_after(5s));
    ServerHandshake::Verdict forged = ServerHandshake::reject_frame();
    forged[5] = 3;  // "accept", with a zero MAC
    net::write_full(fd, forged.data(), forged.size(), deadline_after(5s));
  });
  try {
    handshake_as_client(client.fd(), "secret", "store", deadline_after(5s));
    FAIL() << "forged server accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_NE(std::string(e.what()).find("did not prove"), std::string::npos) << e.what();
  }
  fake.get();
}

TEST(Handshake, GarbageFromAStrangerFailsCleanly) {
  auto [client, server] = testing::tcp_pair();
  auto server_result = serve(server.fd(), "secret", "store");
  char challenge[ServerHandshake::kChallengeBytes];
  net::read_full(client.fd(), challenge, sizeof(challenge), deadline_after(5s));
  std::string garbage(ServerHandshake::kResponseBytes, 'G');
  net::write_full(client.fd(), garbage.data(), garbage.size(), deadline_after(5s));
  EXPECT_NE(server_result.get().find("does not speak"), std::string::npos);
}

TEST(Handshake, SilentPeerTimesOut) {
  auto [client, server] = testing::tcp_pair();
  try {
    handshake_as_client(client.fd(), "secret", "store", deadline_after(100ms));
    FAIL() << "handshake finished without a server";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
  }
}

}  // namespace
}  // namespace chorus::auth
