// Every store and data connection proves knowledge of the job's secret before
// anything else is read: HMAC-SHA256 challenge-response in both directions.
#pragma once

#include "core/deadline.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::auth {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view data);
Digest hmac_sha256(std::string_view key, std::string_view message);

/// Runs the handshake on a connected socket. `purpose` (e.g. "store", "data")
/// is mixed into the MAC so a reply for one purpose is useless for another.
/// Throws Error(RemoteError/Timeout/SystemError) when the peer fails to prove the secret.
void handshake_as_client(int fd, const std::string& secret, std::string_view purpose, Deadline deadline);
void handshake_as_server(int fd, const std::string& secret, std::string_view purpose, Deadline deadline);

/// A fresh random secret (hex), for launchers.
std::string random_secret();

}  // namespace chorus::auth
