// Encoding and bounds-checked decoding of store frames (see store_protocol.hpp).
#include "bootstrap/store_protocol.hpp"

#include <chorus/error.hpp>

#include <algorithm>

namespace chorus::store_wire {
namespace {

[[noreturn]] void malformed(const std::string& why) {
  throw Error(Status::RemoteError, "malformed store message: " + why);
}

constexpr std::size_t string_bytes(std::size_t max) { return 4 + max; }
constexpr std::size_t kKeyListBytes = 4 + kMaxKeysPerRequest * string_bytes(kMaxKeyBytes);

std::uint64_t load_le(const char* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(p[i]);
  return value;
}

void store_le(std::string* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

std::string header(std::uint8_t code, std::size_t body_bytes) {
  std::string frame;
  frame.push_back(static_cast<char>(code));
  frame.append(3, '\0');
  store_le(&frame, body_bytes, 4);
  return frame;
}

}  // namespace

std::size_t max_reply_body_bytes() { return std::max(string_bytes(kMaxValueBytes), kKeyListBytes); }

Header decode_header(const std::uint8_t* bytes) {
  Header result;
  result.code = bytes[0];
  result.body_bytes =
      static_cast<std::uint32_t>(load_le(reinterpret_cast<const char*>(bytes) + 4, 4));
  return result;
}

bool is_valid_op(std::uint8_t code) {
  return code >= static_cast<std::uint8_t>(Op::Set) && code <= static_cast<std::uint8_t>(Op::Erase);
}

std::size_t max_body_bytes(Op op) {
  switch (op) {
    case Op::Set:
      return string_bytes(kMaxKeyBytes) + string_bytes(kMaxValueBytes);
    case Op::Get:
      return 4 + string_bytes(kMaxKeyBytes);
    case Op::Add:
      return 8 + string_bytes(kMaxKeyBytes);
    case Op::Wait:
      return 4 + kKeyListBytes;
    case Op::Check:
      return kKeyListBytes;
    case Op::Erase:
      return string_bytes(kMaxKeyBytes);
  }
  return 0;
}

void put_u32(std::string* out, std::uint32_t value) { store_le(out, value, 4); }

void put_i64(std::string* out, std::int64_t value) {
  store_le(out, static_cast<std::uint64_t>(value), 8);
}

void put_string(std::string* out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out->append(text);
}

std::string encode_keys(const std::vector<std::string>& keys) {
  std::string body;
  put_u32(&body, static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) put_string(&body, key);
  return body;
}

std::string encode_request(const Request& request) {
  std::string body;
  switch (request.op) {
    case Op::Set:
      put_string(&body, request.keys.at(0));
      put_string(&body, request.value);
      break;
    case Op::Get:
      put_u32(&body, request.timeout_ms);
      put_string(&body, request.keys.at(0));
      break;
    case Op::Add:
      put_i64(&body, request.delta);
      put_string(&body, request.keys.at(0));
      break;
    case Op::Wait:
      put_u32(&body, request.timeout_ms);
      body += encode_keys(request.keys);
      break;
    case Op::Check:
      body = encode_keys(request.keys);
      break;
    case Op::Erase:
      put_string(&body, request.keys.at(0));
      break;
  }
  return header(static_cast<std::uint8_t>(request.op), body.size()) + body;
}

Request parse_request(Op op, std::string_view body) {
  Reader reader(body);
  Request request;
  request.op = op;
  switch (op) {
    case Op::Set:
      request.keys.push_back(reader.string(kMaxKeyBytes));
      request.value = reader.string(kMaxValueBytes);
      break;
    case Op::Get:
      request.timeout_ms = reader.u32();
      request.keys.push_back(reader.string(kMaxKeyBytes));
      break;
    case Op::Add:
      request.delta = reader.i64();
      request.keys.push_back(reader.string(kMaxKeyBytes));
      break;
    case Op::Wait:
      request.timeout_ms = reader.u32();
      request.keys = reader.keys();
      break;
    case Op::Check:
      request.keys = reader.keys();
      break;
    case Op::Erase:
      request.keys.push_back(reader.string(kMaxKeyBytes));
      break;
  }
  reader.expect_end();
  return request;
}

std::string encode_reply(ReplyCode code, std::string_view body) {
  return header(static_cast<std::uint8_t>(code), body.size()) + std::string(body);
}

std::string_view Reader::take(std::size_t bytes) {
  if (bytes > rest_.size()) {
    malformed("needs " + std::to_string(bytes) + " more bytes, " + std::to_string(rest_.size()) +
              " left");
  }
  std::string_view part = rest_.substr(0, bytes);
  rest_.remove_prefix(bytes);
  return part;
}

std::uint8_t Reader::u8() { return static_cast<std::uint8_t>(take(1)[0]); }

std::uint32_t Reader::u32() { return static_cast<std::uint32_t>(load_le(take(4).data(), 4)); }

std::int64_t Reader::i64() { return static_cast<std::int64_t>(load_le(take(8).data(), 8)); }

std::string Reader::string(std::size_t max_bytes) {
  std::uint32_t length = u32();
  if (length > max_bytes) {
    malformed("a string of " + std::to_string(length) + " bytes exceeds the limit of " +
              std::to_string(max_bytes));
  }
  return std::string(take(length));
}

std::vector<std::string> Reader::keys() {
  std::uint32_t count = u32();
  if (count > kMaxKeysPerRequest) {
    malformed(std::to_string(count) + " keys exceed the limit of " +
              std::to_string(kMaxKeysPerRequest));
  }
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) keys.push_back(string(kMaxKeyBytes));
  return keys;
}

void Reader::expect_end() const {
  if (!rest_.empty()) malformed(std::to_string(rest_.size()) + " unexpected trailing bytes");
}

}  // namespace chorus::store_wire
