// The store server against strangers, malformed frames and stalled clients:
// each is dropped (with a log line) or ignored, and real clients keep working.
#include "allocation_probe.hpp"
#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_protocol.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;
using store_wire::Op;

const std::string kSecret = "robust";

net::Socket raw_connect(const StoreServer& server) {
  return net::connect_tcp({"127.0.0.1", server.port()}, deadline_after(5s));
}

net::Socket authenticated_raw_client(const StoreServer& server) {
  net::Socket socket = raw_connect(server);
  auth::handshake_as_client(socket.fd(), kSecret, "store", deadline_after(5s));
  return socket;
}

void send_text(const net::Socket& socket, const std::string& bytes) {
  net::write_full(socket.fd(), bytes.data(), bytes.size(), deadline_after(5s));
}

/// Reads and discards until the server closes; returns how long that took.
Clock::duration time_until_closed(const net::Socket& socket, Deadline deadline) {
  auto start = Clock::now();
  char byte;
  try {
    for (;;) net::read_full(socket.fd(), &byte, 1, deadline);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError)
        << "server did not close the connection: " << e.what();
  }
  return Clock::now() - start;
}

std::string header(std::uint8_t code, std::uint32_t body_bytes) {
  std::string frame(1, static_cast<char>(code));
  frame.append(3, '\0');
  store_wire::put_u32(&frame, body_bytes);
  return frame;
}

void expect_store_works(Store& store, const std::string& tag) {
  store.set("check-" + tag, tag);
  EXPECT_EQ(store.get("check-" + tag, deadline_after(1s)), tag);
}

TEST(StoreRobustness, GarbageFromStrangersIsDroppedWithALogLine) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  ::testing::internal::CaptureStderr();
  net::Socket chatty = raw_connect(server);
  send_text(chatty, std::string(200, 'G'));
  net::Socket quitter = raw_connect(server);
  send_text(quitter, "GET / HTTP/1.0\r\n");
  quitter.close();
  EXPECT_LT(time_until_closed(chatty, deadline_after(5s)), 2s);
  expect_store_works(*store, "after-garbage");
  std::this_thread::sleep_for(50ms);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("does not speak the chorus handshake protocol"), std::string::npos) << log;
  EXPECT_NE(log.find("closed the connection before authenticating"), std::string::npos) << log;
}

TEST(StoreRobustness, SilentStrangerIsDroppedAfterFiveSeconds) {
  StoreServer server("127.0.0.1", 0, kSecret);
  ::testing::internal::CaptureStderr();
  net::Socket silent = raw_connect(server);
  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  expect_store_works(*store, "while-silent");  // the silent stranger blocks nobody
  auto waited = time_until_closed(silent, deadline_after(10s));
  EXPECT_GE(waited, 4s);
  EXPECT_LT(waited, 8s);
  expect_store_works(*store, "after-silent");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("did not authenticate within 5 s"), std::string::npos) << log;
}

TEST(StoreRobustness, MalformedFramesDropOnlyTheirSender) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  ::testing::internal::CaptureStderr();
  testing::reset_largest_allocation();

  net::Socket absurd = authenticated_raw_client(server);
  send_text(absurd, header(static_cast<std::uint8_t>(Op::Set), 0xFFFFFFFFu));
  EXPECT_LT(time_until_closed(absurd, deadline_after(5s)), 2s);

  net::Socket bad_op = authenticated_raw_client(server);
  send_text(bad_op, header(99, 0));
  EXPECT_LT(time_until_closed(bad_op, deadline_after(5s)), 2s);

  // A frame of plausible size whose key length points far past its end.
  net::Socket lying = authenticated_raw_client(server);
  std::string body;
  store_wire::put_u32(&body, 1u << 20);
  body += "short";
  send_text(lying, header(static_cast<std::uint8_t>(Op::Erase), body.size()) + body);
  EXPECT_LT(time_until_closed(lying, deadline_after(5s)), 2s);

  EXPECT_LT(testing::largest_allocation(), std::size_t{1} << 20) << "a lying length was allocated";
  expect_store_works(*store, "after-malformed");
  std::this_thread::sleep_for(50ms);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("over the limit"), std::string::npos) << log;
  EXPECT_NE(log.find("unknown operation code 99"), std::string::npos) << log;
  EXPECT_NE(log.find("malformed store message"), std::string::npos) << log;
}

TEST(StoreRobustness, StalledClientsDoNotDelayOthers) {
  StoreServer server("127.0.0.1", 0, kSecret);
  net::Socket half_frame = authenticated_raw_client(server);
  send_text(half_frame, header(static_cast<std::uint8_t>(Op::Set), 100).substr(0, 5));
  net::Socket half_handshake = raw_connect(server);
  send_text(half_handshake, std::string(10, 'C'));
  // A client that asks for a large value again and again and never reads the replies.
  auto writer = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  writer->set("blob", std::string(4 << 20, 'b'));
  net::Socket deaf = authenticated_raw_client(server);
  store_wire::Request get{Op::Get, {"blob"}, {}, 0, 1000};
  std::string requests;
  for (int i = 0; i < 20; ++i) requests += store_wire::encode_request(get);
  send_text(deaf, requests);

  auto start = Clock::now();
  auto store = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  for (int i = 0; i < 20; ++i) expect_store_works(*store, std::to_string(i));
  EXPECT_LT(Clock::now() - start, 1s);
}

TEST(StoreRobustness, PipelinedRequestsAreAnsweredInOrder) {
  StoreServer server("127.0.0.1", 0, kSecret);
  net::Socket client = authenticated_raw_client(server);
  std::string batch = store_wire::encode_request({Op::Get, {"k"}, {}, 0, 5000});
  // The Get parks; the Set comes from another client and unparks it.
  send_text(client, batch + store_wire::encode_request({Op::Add, {"n"}, {}, 7, 0}));
  auto other = connect_store("127.0.0.1", server.port(), kSecret, deadline_after(5s));
  other->set("k", "value");
  auto read_reply = [&] {
    std::uint8_t head[store_wire::kHeaderBytes];
    net::read_full(client.fd(), head, sizeof(head), deadline_after(5s));
    auto h = store_wire::decode_header(head);
    std::string body(h.body_bytes, '\0');
    net::read_full(client.fd(), body.data(), body.size(), deadline_after(5s));
    EXPECT_EQ(h.code, 0);
    return body;
  };
  EXPECT_EQ(read_reply(), "value");
  std::string add_reply = read_reply();
  store_wire::Reader reader(add_reply);
  EXPECT_EQ(reader.i64(), 7);
}

}  // namespace
}  // namespace chorus
