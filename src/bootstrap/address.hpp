// Private helpers of the socket layer: name resolution and printable addresses.
#pragma once

#include "bootstrap/socket.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <memory>
#include <string>

namespace chorus::net::detail {

struct AddrInfoFree {
  void operator()(addrinfo* list) const noexcept { freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

/// Resolves host:port for a TCP stream socket. `passive` asks for a bind
/// address (host "" means every IPv4 interface). On failure returns null and
/// stores getaddrinfo's code in `*gai_error`.
AddrInfoList resolve(const std::string& host, std::uint16_t port, bool passive, int* gai_error);

/// "1.2.3.4" or "::1" for a socket address; "?" when it cannot be printed.
std::string numeric_host(const sockaddr* address, socklen_t length);

/// "1.2.3.4:5" or "[::1]:5" of the peer of a connected socket; "" when unknown.
std::string peer_name(int fd);

/// "strerror(code)" as a std::string, thread-safe.
std::string error_text(int code);

}  // namespace chorus::net::detail
