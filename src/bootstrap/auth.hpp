// Every store and data connection proves knowledge of the job's secret before
// anything else is read: HMAC-SHA256 challenge-response in both directions.
#pragma once

#include "core/deadline.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::auth {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view data);
Digest hmac_sha256(std::string_view key, std::string_view message);

/// Runs the handshake on a connected socket. `purpose` (e.g. "store", "data")
/// is mixed into the MAC so a reply for one purpose is useless for another.
/// Throws Error(RemoteError/Timeout/SystemError) when the peer fails to prove the secret
/// (the sentence starts "authentication failed" when it proved the wrong one). On a
/// throw the caller closes the socket. An empty secret is allowed: the handshake then
/// only proves that the peer speaks this protocol.
void handshake_as_client(int fd, const std::string& secret, std::string_view purpose,
                         Deadline deadline);
void handshake_as_server(int fd, const std::string& secret, std::string_view purpose,
                         Deadline deadline);

/// A fresh random secret: 32 random bytes as 64 lower-case hex characters, for launchers.
std::string random_secret();

/// `bytes` random bytes as 2*bytes lower-case hex characters.
std::string random_hex(std::size_t bytes);

/// `bytes` bytes from OpenSSL's CSPRNG (RAND_bytes, seeded by the kernel). Throws SystemError.
void random_bytes(void* out, std::size_t bytes);

/// The server's half of the handshake as a small state machine, for event loops
/// that must not block on one client (the store server). handshake_as_server is
/// this plus blocking reads and writes.
///
/// Wire frames (fixed size, each opening with the 8-byte header "CHOR", version,
/// kind, two zero bytes):
///   server -> client  challenge: header + Ns (32 random bytes)
///   client -> server  response:  header + Nc (32 random bytes) + MAC("client", Ns, Nc)
///   server -> client  verdict:   header + MAC("server", Nc, Ns) (accept),
///                                or header + 32 zero bytes (reject)
/// where MAC(role, a, b) = HMAC-SHA256(secret, "chorus-v1|" + purpose + "|" + role + "|" + a + b).
/// The labels "client"/"server" stop a MAC from being reflected back to its sender.
class ServerHandshake {
 public:
  static constexpr std::size_t kChallengeBytes = 40;
  static constexpr std::size_t kResponseBytes = 72;
  static constexpr std::size_t kVerdictBytes = 40;
  using Challenge = std::array<std::uint8_t, kChallengeBytes>;
  using Verdict = std::array<std::uint8_t, kVerdictBytes>;

  /// Draws the server nonce.
  ServerHandshake(std::string secret, std::string purpose);
  /// The first frame to send.
  const Challenge& challenge() const { return challenge_; }
  /// Checks the client's response frame (kResponseBytes bytes) and returns the
  /// accept frame to send. Throws Error(RemoteError, "authentication failed ...")
  /// when the frame is malformed or the MAC is wrong; send reject_frame() then close.
  Verdict verify(const std::uint8_t* response) const;
  static Verdict reject_frame();

 private:
  std::string secret_;
  std::string purpose_;
  Challenge challenge_{};
};

}  // namespace chorus::auth
