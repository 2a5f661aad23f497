// Store server request decoding under hostile bytes: the same checks the server
// applies (store_server_requests.cpp: op code, body limit, parse), then the
// table executes what parsed. Invariant: a request that parses re-encodes to
// exactly the bytes it came from (the format has one encoding per request).
#include "bootstrap/store_protocol.hpp"
#include "bootstrap/store_table.hpp"
#include "harnesses.hpp"

#include <chorus/error.hpp>

#include <string_view>

namespace chorus::fuzz {

void store_request(const std::uint8_t* data, std::size_t size) {
  using namespace store_wire;
  if (size < kHeaderBytes) return;
  Header header = decode_header(data);
  if (!is_valid_op(header.code)) return;
  auto op = static_cast<Op>(header.code);
  if (header.body_bytes > max_body_bytes(op)) return;
  if (size - kHeaderBytes < header.body_bytes) return;  // the server waits for more bytes
  std::string_view frame(reinterpret_cast<const char*>(data), kHeaderBytes + header.body_bytes);
  Request request;
  try {
    request = parse_request(op, frame.substr(kHeaderBytes));
  } catch (const Error& e) {
    require(e.status() == Status::RemoteError, "a parse error must be a RemoteError");
    return;
  }
  // The three zero bytes of the header are not checked by the server; compare the rest.
  std::string again = encode_request(request);
  require(again.size() == frame.size(), "re-encoded request has another length");
  require(again[0] == frame[0] && again.substr(4) == frame.substr(4), "re-encoded request differs");
  StoreTable table;
  table.execute(request);
  if (!table.answer_if_ready(request)) table.timeout_reply(request);
}

}  // namespace chorus::fuzz
