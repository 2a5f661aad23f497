// ABORT frame encoding.
#include "transport/abort_frame.hpp"

#include <cstdint>
#include <cstring>

namespace chorus::transport {
namespace {

constexpr std::size_t kMaxSentence = 4096;

}  // namespace

std::vector<std::byte> make_abort_frame(Status status, const std::string& sentence) {
  std::size_t text_bytes = std::min(sentence.size(), kMaxSentence);
  FrameHeader header;
  header.kind = static_cast<std::uint8_t>(FrameKind::Abort);
  header.payload_bytes = sizeof(std::int32_t) + text_bytes;
  std::vector<std::byte> frame(sizeof(header) + header.payload_bytes);
  auto code = static_cast<std::int32_t>(status);
  std::memcpy(frame.data(), &header, sizeof(header));
  std::memcpy(frame.data() + sizeof(header), &code, sizeof(code));
  std::memcpy(frame.data() + sizeof(header) + sizeof(code), sentence.data(), text_bytes);
  return frame;
}

Error error_from_abort(int peer, std::span<const std::byte> payload) {
  std::int32_t code = static_cast<std::int32_t>(Status::RemoteError);
  std::string sentence = "(no reason given)";
  if (payload.size() >= sizeof(code)) {
    std::memcpy(&code, payload.data(), sizeof(code));
    sentence.assign(reinterpret_cast<const char*>(payload.data()) + sizeof(code),
                    payload.size() - sizeof(code));
  }
  Status status =
      code == static_cast<std::int32_t>(Status::Mismatch) ? Status::Mismatch : Status::RemoteError;
  return Error(status, "rank " + std::to_string(peer) + " aborted: " + sentence);
}

}  // namespace chorus::transport
