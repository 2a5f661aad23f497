// Client of the StoreServer: one request at a time over one authenticated socket.
//
// Get and Wait send their remaining time to the server, which answers with a
// Timeout reply when it runs out; the client reads that reply with a short
// grace period, so a timed-out request never leaves a stale reply on the
// stream. Any transport failure marks the connection broken: later calls fail
// at once with the first failure's sentence instead of reading garbage.
#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_protocol.hpp"
#include "core/env.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <mutex>
#include <type_traits>

namespace chorus {
namespace {

using store_wire::Op;
using store_wire::ReplyCode;
using store_wire::Request;

constexpr auto kReplyGrace = std::chrono::seconds(2);

struct Reply {
  ReplyCode code = ReplyCode::Ok;
  std::string body;
};

std::string quote_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (std::size_t i = 0; i < keys.size() && i < 8; ++i) text += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 8) text += " and " + std::to_string(keys.size() - 8) + " more";
  return text;
}

void check_key(const std::string& key) {
  require_argument(
      key.size() <= store_wire::kMaxKeyBytes,
      "store keys are limited to 4096 bytes, got one of " + std::to_string(key.size()));
}

std::uint32_t timeout_ms_until(Deadline deadline) {
  return static_cast<std::uint32_t>(remaining_ms(deadline));
}

class StoreClient final : public Store {
 public:
  StoreClient(net::Socket socket, std::string where, std::chrono::milliseconds request_timeout)
      : socket_(std::move(socket)), where_(std::move(where)), request_timeout_(request_timeout) {}

  void set(const std::string& key, const std::string& value) override {
    check_key(key);
    require_argument(value.size() <= store_wire::kMaxValueBytes,
                     "store values are limited to 256 MiB, got " + std::to_string(value.size()) +
                         " bytes for key '" + key + "'");
    Request request{Op::Set, {key}, value, 0, 0};
    expect_ok(call(request, deadline_after(request_timeout_)));
  }

  std::string get(const std::string& key, Deadline deadline) override {
    check_key(key);
    Request request{Op::Get, {key}, {}, 0, timeout_ms_until(deadline)};
    Reply reply = call(request, deadline + kReplyGrace);
    if (reply.code == ReplyCode::Timeout) {
      throw Error(Status::Timeout, "timed out waiting for store key '" + key + "' at " + where_);
    }
    expect_ok(reply);
    return std::move(reply.body);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    check_key(key);
    Request request{Op::Add, {key}, {}, delta, 0};
    Reply reply = call(request, deadline_after(request_timeout_));
    expect_ok(reply);
    store_wire::Reader reader(reply.body);
    return parse_or_break([&] { return reader.i64(); }, reader);
  }

  void wait(const std::vector<std::string>& keys, Deadline deadline) override {
    for (const auto& key : keys) check_key(key);
    // Requests carry at most kMaxKeysPerRequest keys; longer lists wait chunk by chunk.
    for (std::size_t first = 0; first < keys.size(); first += store_wire::kMaxKeysPerRequest) {
      std::size_t last = std::min(keys.size(), first + store_wire::kMaxKeysPerRequest);
      Request request{
          Op::Wait, {keys.begin() + first, keys.begin() + last}, {}, 0, timeout_ms_until(deadline)};
      Reply reply = call(request, deadline + kReplyGrace);
      if (reply.code == ReplyCode::Timeout) {
        store_wire::Reader reader(reply.body);
        auto missing = parse_or_break([&] { return reader.keys(); }, reader);
        throw Error(Status::Timeout,
                    "timed out waiting for store keys " + quote_keys(missing) + " at " + where_);
      }
      expect_ok(reply);
    }
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) check_key(key);
    for (std::size_t first = 0; first < keys.size(); first += store_wire::kMaxKeysPerRequest) {
      std::size_t last = std::min(keys.size(), first + store_wire::kMaxKeysPerRequest);
      Request request{Op::Check, {keys.begin() + first, keys.begin() + last}, {}, 0, 0};
      if (!flag_reply(call(request, deadline_after(request_timeout_)))) return false;
    }
    return true;
  }

  bool erase(const std::string& key) override {
    check_key(key);
    Request request{Op::Erase, {key}, {}, 0, 0};
    return flag_reply(call(request, deadline_after(request_timeout_)));
  }

 private:
  Reply call(const Request& request, Deadline deadline);
  void exchange(const Request& request, Deadline deadline, Reply* reply);
  [[noreturn]] void break_connection(Status status, const std::string& sentence);

  void expect_ok(const Reply& reply) {
    if (reply.code == ReplyCode::Ok) return;
    store_wire::Reader reader(reply.body);
    std::string sentence = parse_or_break([&] { return reader.string(4096); }, reader);
    throw Error(Status::InvalidArgument, sentence);
  }

  bool flag_reply(const Reply& reply) {
    expect_ok(reply);
    store_wire::Reader reader(reply.body);
    return parse_or_break([&] { return reader.u8(); }, reader) != 0;
  }

  /// Runs a Reader step over a whole reply body; a malformed reply breaks the connection.
  template <typename Parse>
  std::invoke_result_t<Parse> parse_or_break(Parse parse, const store_wire::Reader& reader) {
    try {
      auto value = parse();
      reader.expect_end();
      return value;
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      break_connection(Status::RemoteError, "store at " + where_ + " sent a " + e.what());
    }
  }

  std::mutex mutex_;
  net::Socket socket_;
  std::string where_;
  std::chrono::milliseconds request_timeout_;
  std::string broken_;  ///< the failure that broke the connection, "" while healthy
  Status broken_status_ = Status::Success;
};

Reply StoreClient::call(const Request& request, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) throw Error(broken_status_, broken_);
  Reply reply;
  try {
    exchange(request, deadline, &reply);
  } catch (const Error& e) {
    if (e.status() == Status::RemoteError) {
      break_connection(Status::RemoteError, "store at " + where_ + " closed the connection");
    }
    if (e.status() == Status::Timeout) {
      break_connection(Status::Timeout, "store at " + where_ + " did not answer in time");
    }
    break_connection(e.status(), "store at " + where_ + ": " + e.what());
  }
  return reply;
}

void StoreClient::exchange(const Request& request, Deadline deadline, Reply* reply) {
  std::string frame = store_wire::encode_request(request);
  net::write_full(socket_.fd(), frame.data(), frame.size(), deadline);
  std::uint8_t header_bytes[store_wire::kHeaderBytes];
  net::read_full(socket_.fd(), header_bytes, sizeof(header_bytes), deadline);
  auto header = store_wire::decode_header(header_bytes);
  if (header.code > static_cast<std::uint8_t>(ReplyCode::Invalid) ||
      header.body_bytes > store_wire::max_reply_body_bytes()) {
    throw Error(Status::InternalError, "sent a malformed reply header (code " +
                                           std::to_string(header.code) + ", " +
                                           std::to_string(header.body_bytes) + " bytes)");
  }
  reply->code = static_cast<ReplyCode>(header.code);
  reply->body.resize(header.body_bytes);
  net::read_full(socket_.fd(), reply->body.data(), header.body_bytes, deadline);
}

void StoreClient::break_connection(Status status, const std::string& sentence) {
  if (broken_.empty()) {
    broken_ = sentence;
    broken_status_ = status;
    socket_.close();
  }
  throw Error(status, sentence);
}

}  // namespace

std::unique_ptr<Store> connect_store(const std::string& host, std::uint16_t port,
                                     const std::string& secret, Deadline deadline,
                                     std::chrono::milliseconds request_timeout) {
  net::HostPort address{host, port};
  net::Socket socket = net::connect_tcp(address, deadline);
  std::string where = net::to_string(address);
  try {
    auth::handshake_as_client(socket.fd(), secret, "store", deadline);
  } catch (const Error& e) {
    throw Error(e.status(), "cannot join the store at " + where + ": " + e.what());
  }
  return std::make_unique<StoreClient>(std::move(socket), where, request_timeout);
}

std::unique_ptr<Store> connect_store(const std::string& host, std::uint16_t port,
                                     const std::string& secret, Deadline deadline) {
  return connect_store(host, port, secret, deadline, read_config().timeout);
}

}  // namespace chorus
