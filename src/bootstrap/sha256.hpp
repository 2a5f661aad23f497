// SHA-256 (FIPS 180-4) with an incremental interface, for HMAC and the handshake; computed by
// OpenSSL's libcrypto.
#pragma once

#include "bootstrap/auth.hpp"

#include <cstddef>
#include <memory>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace chorus::auth {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Pads, returns the digest; the object must not be used afterwards.
  Digest finish();

 private:
  struct FreeContext {
    void operator()(evp_md_ctx_st* context) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> context_;
};

}  // namespace chorus::auth
