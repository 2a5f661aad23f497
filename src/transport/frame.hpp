// The wire format every link carries: a fixed header, then `payload_bytes`
// bytes of payload. Frames are written in host byte order (the magic read back
// wrongly on a host of the other endianness is rejected as garbage).
#pragma once

#include "core/collective.hpp"

#include <cstdint>

namespace chorus::transport {

inline constexpr std::uint32_t kFrameMagic = 0x46524843;  // "CHRF" in memory order

enum class FrameKind : std::uint8_t {
  Data = 1,   ///< payload = the bytes of one post_send
  Abort = 2,  ///< payload = int32 Status + the sender's sentence (see abort_frame.hpp)
  Probe = 3,  ///< no payload; the fingerprint of the collective the sender is stalled in
};

/// A DATA payload larger than this is refused as garbage before any allocation.
inline constexpr std::uint64_t kMaxDataPayload = std::uint64_t{64} << 30;
/// An ABORT payload larger than this is refused as garbage.
inline constexpr std::uint64_t kMaxAbortPayload = std::uint64_t{64} << 10;

struct FrameHeader {
  std::uint32_t magic = kFrameMagic;
  std::uint8_t kind = static_cast<std::uint8_t>(FrameKind::Data);
  std::uint8_t reserved[3] = {0, 0, 0};
  std::uint64_t payload_bytes = 0;
  Fingerprint fingerprint;
};
static_assert(sizeof(FrameHeader) == 40, "the header layout is part of the wire format");

}  // namespace chorus::transport
