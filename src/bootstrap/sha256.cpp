// The handshake's cryptography, the one place that calls OpenSSL's libcrypto: SHA-256 and
// HMAC-SHA256 (RFC 2104) through its EVP interface, and random bytes from its CSPRNG.
#include "bootstrap/sha256.hpp"

#include <chorus/error.hpp>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <string>

namespace chorus::auth {
namespace {

/// Throws `status` naming the failed OpenSSL call and OpenSSL's own reason.
[[noreturn]] void fail(const char* call, Status status = Status::InternalError) {
  char reason[256] = "no reason given";
  if (unsigned long code = ERR_get_error(); code != 0) {
    ERR_error_string_n(code, reason, sizeof(reason));
  }
  ERR_clear_error();
  throw Error(status, std::string("OpenSSL's ") + call + " failed: " + reason);
}

}  // namespace

void Sha256::FreeContext::operator()(evp_md_ctx_st* context) const noexcept {
  EVP_MD_CTX_free(context);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) fail("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) fail("EVP_DigestInit_ex");
}

void Sha256::update(const void* data, std::size_t bytes) {
  if (bytes > 0 && EVP_DigestUpdate(context_.get(), data, bytes) != 1) fail("EVP_DigestUpdate");
}

Digest Sha256::finish() {
  Digest digest;
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1 || length != digest.size()) {
    fail("EVP_DigestFinal_ex");
  }
  return digest;
}

Digest sha256(std::string_view data) {
  Sha256 hash;
  hash.update(data);
  return hash.finish();
}

Digest hmac_sha256(std::string_view key, std::string_view message) {
  Digest digest;
  std::size_t length = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                digest.data(), digest.size(), &length) == nullptr ||
      length != digest.size()) {
    fail("HMAC-SHA256 (EVP_Q_mac)");
  }
  return digest;
}

void random_bytes(void* out, std::size_t bytes) {
  auto* cursor = static_cast<unsigned char*>(out);
  while (bytes > 0) {  // RAND_bytes takes an int count
    int chunk = static_cast<int>(std::min<std::size_t>(bytes, INT_MAX));
    if (RAND_bytes(cursor, chunk) != 1) fail("RAND_bytes (random bytes)", Status::SystemError);
    cursor += chunk;
    bytes -= static_cast<std::size_t>(chunk);
  }
}

}  // namespace chorus::auth
