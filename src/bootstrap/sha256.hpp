// SHA-256 (FIPS 180-4) with an incremental interface, for HMAC and the handshake.
#pragma once

#include "bootstrap/auth.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace chorus::auth {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Pads, returns the digest; the object must not be used afterwards.
  Digest finish();

 private:
  void compress(const std::uint8_t* block);

  std::uint32_t state_[8];
  std::uint8_t buffer_[64];
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace chorus::auth
