// Wire format of the store (private to bootstrap). After the handshake
// (purpose "store") a client sends one request at a time and reads one reply.
//
//   frame  = header (8 bytes) + body
//   header = code (1 byte: an Op in a request, a ReplyCode in a reply),
//            3 zero bytes, body length (u32, little-endian)
//   string = u32 length + bytes; integers are little-endian
//
//   request bodies:                         reply bodies (ReplyCode::Ok):
//   Set   key, value                        (empty)
//   Get   u32 timeout_ms, key               value
//   Add   i64 delta, key                    i64 new value
//   Wait  u32 timeout_ms, u32 n, n keys     (empty)
//   Check u32 n, n keys                     u8 all present
//   Erase key                               u8 existed
//
// ReplyCode::Timeout (Get, Wait: the keys did not appear within timeout_ms) carries
// u32 n + the missing keys; ReplyCode::Invalid carries one string, a sentence.
// Every length is checked against the limits below before it is used, by both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::store_wire {

enum class Op : std::uint8_t { Set = 1, Get = 2, Add = 3, Wait = 4, Check = 5, Erase = 6 };
enum class ReplyCode : std::uint8_t { Ok = 0, Timeout = 1, Invalid = 2 };

inline constexpr std::size_t kHeaderBytes = 8;
inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxValueBytes = std::size_t{256} << 20;
inline constexpr std::size_t kMaxKeysPerRequest = 4096;
/// Longest reply body: a value (Get) or a list of missing keys (Wait).
std::size_t max_reply_body_bytes();

struct Header {
  std::uint8_t code = 0;
  std::uint32_t body_bytes = 0;
};
Header decode_header(const std::uint8_t* bytes);

/// True when `code` is an Op; then max_body_bytes gives its longest valid body.
bool is_valid_op(std::uint8_t code);
std::size_t max_body_bytes(Op op);

struct Request {
  Op op = Op::Set;
  std::vector<std::string> keys;  ///< one key, except Wait/Check
  std::string value;              ///< Set
  std::int64_t delta = 0;         ///< Add
  std::uint32_t timeout_ms = 0;   ///< Get, Wait
};

/// The whole frame (header + body) of a request; the caller has checked the limits.
std::string encode_request(const Request& request);
/// Parses a body whose header said `op`. Throws Error(RemoteError, "malformed ...").
Request parse_request(Op op, std::string_view body);

/// The whole frame of a reply.
std::string encode_reply(ReplyCode code, std::string_view body);

/// Little-endian builders and a bounds-checked reader for bodies.
void put_u32(std::string* out, std::uint32_t value);
void put_i64(std::string* out, std::int64_t value);
void put_string(std::string* out, std::string_view text);
std::string encode_keys(const std::vector<std::string>& keys);

class Reader {
 public:
  /// Views `body`, which must outlive the reader (hence no temporaries).
  explicit Reader(std::string_view body) : rest_(body) {}
  explicit Reader(std::string&& temporary) = delete;
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  /// A string no longer than `max_bytes`.
  std::string string(std::size_t max_bytes);
  /// u32 n (<= kMaxKeysPerRequest) and n keys.
  std::vector<std::string> keys();
  /// Throws unless every byte was consumed.
  void expect_end() const;

 private:
  std::string_view take(std::size_t bytes);
  std::string_view rest_;
};

}  // namespace chorus::store_wire
