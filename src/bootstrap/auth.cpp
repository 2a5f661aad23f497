// Mutual HMAC-SHA256 challenge-response; frames are described in auth.hpp.
#include "bootstrap/auth.hpp"

#include "bootstrap/address.hpp"
#include "bootstrap/socket.hpp"

#include <chorus/error.hpp>

#include <cstring>
#include <vector>

namespace chorus::auth {
namespace {

constexpr std::uint8_t kMagic[4] = {'C', 'H', 'O', 'R'};
constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8;
constexpr std::size_t kNonceBytes = 32;
enum Kind : std::uint8_t { kChallenge = 1, kResponse = 2, kAccept = 3, kReject = 4 };

void write_header(std::uint8_t* frame, Kind kind) {
  std::memcpy(frame, kMagic, sizeof(kMagic));
  frame[4] = kVersion;
  frame[5] = kind;
  frame[6] = frame[7] = 0;
}

std::string describe_peer(int fd) {
  std::string peer = net::detail::peer_name(fd);
  return peer.empty() ? "the peer" : "the peer at " + peer;
}

[[noreturn]] void fail(const std::string& why) {
  throw Error(Status::RemoteError, "authentication failed: " + why);
}

/// Checks magic and version, and returns the frame kind.
std::uint8_t read_header(const std::uint8_t* frame, const std::string& peer) {
  if (std::memcmp(frame, kMagic, sizeof(kMagic)) != 0) {
    fail(peer + " does not speak the chorus handshake protocol");
  }
  if (frame[4] != kVersion) {
    fail(peer + " speaks chorus handshake version " + std::to_string(frame[4]) +
         ", this build speaks version " + std::to_string(kVersion));
  }
  return frame[5];
}

/// HMAC(secret, "chorus-v1|" + purpose + "|" + role + "|" + first + second) over two nonces.
Digest role_mac(const std::string& secret, std::string_view purpose, std::string_view role,
                const std::uint8_t* first, const std::uint8_t* second) {
  std::string message = "chorus-v1|";
  message.append(purpose).append("|").append(role).append("|");
  message.append(reinterpret_cast<const char*>(first), kNonceBytes);
  message.append(reinterpret_cast<const char*>(second), kNonceBytes);
  return hmac_sha256(secret, message);
}

/// Compares without an early exit, so timing does not reveal the matching prefix.
bool equal_constant_time(const std::uint8_t* a, const std::uint8_t* b, std::size_t bytes) {
  std::uint8_t difference = 0;
  for (std::size_t i = 0; i < bytes; ++i) difference |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace

std::string random_hex(std::size_t bytes) {
  std::vector<std::uint8_t> raw(bytes);
  random_bytes(raw.data(), raw.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (std::uint8_t byte : raw) {
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

std::string random_secret() { return random_hex(32); }

ServerHandshake::ServerHandshake(std::string secret, std::string purpose)
    : secret_(std::move(secret)), purpose_(std::move(purpose)) {
  write_header(challenge_.data(), kChallenge);
  random_bytes(challenge_.data() + kHeaderBytes, kNonceBytes);
}

ServerHandshake::Verdict ServerHandshake::verify(const std::uint8_t* response) const {
  if (read_header(response, "the client") != kResponse)
    fail("the client sent no handshake response");
  const std::uint8_t* server_nonce = challenge_.data() + kHeaderBytes;
  const std::uint8_t* client_nonce = response + kHeaderBytes;
  Digest expected = role_mac(secret_, purpose_, "client", server_nonce, client_nonce);
  if (!equal_constant_time(expected.data(), client_nonce + kNonceBytes, expected.size())) {
    fail("the client did not prove the job's secret (is CHORUS_AUTH_TOKEN the same everywhere?)");
  }
  Verdict accept{};
  write_header(accept.data(), kAccept);
  Digest proof = role_mac(secret_, purpose_, "server", client_nonce, server_nonce);
  std::memcpy(accept.data() + kHeaderBytes, proof.data(), proof.size());
  return accept;
}

ServerHandshake::Verdict ServerHandshake::reject_frame() {
  Verdict reject{};
  write_header(reject.data(), kReject);
  return reject;
}

void handshake_as_server(int fd, const std::string& secret, std::string_view purpose,
                         Deadline deadline) {
  ServerHandshake handshake(secret, std::string(purpose));
  net::write_full(fd, handshake.challenge().data(), handshake.challenge().size(), deadline);
  std::uint8_t response[ServerHandshake::kResponseBytes];
  net::read_full(fd, response, sizeof(response), deadline);
  ServerHandshake::Verdict verdict;
  try {
    verdict = handshake.verify(response);
  } catch (const Error&) {
    // Best effort: tell the client why before the caller closes the connection.
    auto reject = ServerHandshake::reject_frame();
    try {
      net::write_full(fd, reject.data(), reject.size(),
                      std::min(deadline, deadline_after(std::chrono::milliseconds(100))));
    } catch (const Error&) {
    }
    throw;
  }
  net::write_full(fd, verdict.data(), verdict.size(), deadline);
}

void handshake_as_client(int fd, const std::string& secret, std::string_view purpose,
                         Deadline deadline) {
  std::string peer = describe_peer(fd);
  std::uint8_t challenge[ServerHandshake::kChallengeBytes];
  net::read_full(fd, challenge, sizeof(challenge), deadline);
  if (read_header(challenge, peer) != kChallenge) fail(peer + " sent no handshake challenge");
  const std::uint8_t* server_nonce = challenge + kHeaderBytes;

  std::uint8_t response[ServerHandshake::kResponseBytes];
  write_header(response, kResponse);
  std::uint8_t* client_nonce = response + kHeaderBytes;
  random_bytes(client_nonce, kNonceBytes);
  Digest proof = role_mac(secret, purpose, "client", server_nonce, client_nonce);
  std::memcpy(client_nonce + kNonceBytes, proof.data(), proof.size());
  net::write_full(fd, response, sizeof(response), deadline);

  std::uint8_t verdict[ServerHandshake::kVerdictBytes];
  net::read_full(fd, verdict, sizeof(verdict), deadline);
  std::uint8_t kind = read_header(verdict, peer);
  if (kind == kReject) {
    fail(peer +
         " rejected our proof of the job's secret (is CHORUS_AUTH_TOKEN the same everywhere?)");
  }
  Digest expected = role_mac(secret, purpose, "server", client_nonce, server_nonce);
  if (kind != kAccept ||
      !equal_constant_time(expected.data(), verdict + kHeaderBytes, expected.size())) {
    fail(peer + " did not prove the job's secret");
  }
}

}  // namespace chorus::auth
