// Host/port text, name resolution and printable addresses.
#include "bootstrap/address.hpp"

#include <chorus/error.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace chorus::net {
namespace {

[[noreturn]] void bad_address(const std::string& text, const std::string& why) {
  throw Error(Status::InvalidArgument,
              "malformed address '" + text + "': " + why + " (expected host:port or [ipv6]:port)");
}

/// Parses a decimal port 0..65535 consisting only of digits.
std::uint16_t parse_port(const std::string& text, const std::string& digits) {
  if (digits.empty()) bad_address(text, "the port is missing");
  if (digits.size() > 5) bad_address(text, "the port is out of range");
  unsigned value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') bad_address(text, "the port is not a number");
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) bad_address(text, "the port is out of range");
  return static_cast<std::uint16_t>(value);
}

}  // namespace

HostPort parse_host_port(const std::string& text) {
  HostPort result;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) bad_address(text, "'[' without ']'");
    result.host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') bad_address(text, "no ':' after ']'");
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) bad_address(text, "no ':' before the port");
    result.host = text.substr(0, colon);
    if (result.host.find(':') != std::string::npos) {
      bad_address(text, "an IPv6 host must be written in brackets");
    }
    port_text = text.substr(colon + 1);
  }
  if (result.host.empty()) bad_address(text, "the host is empty");
  result.port = parse_port(text, port_text);
  return result;
}

std::string to_string(const HostPort& address) {
  bool v6 = address.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + address.host + "]" : address.host;
  return host + ":" + std::to_string(address.port);
}

std::string local_address_of(const Socket& connected) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (getsockname(connected.fd(), reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    int code = errno;
    throw Error(Status::SystemError, "getsockname failed: " + detail::error_text(code));
  }
  return detail::numeric_host(reinterpret_cast<sockaddr*>(&storage), length);
}

namespace detail {

AddrInfoList resolve(const std::string& host, std::uint16_t port, bool passive, int* gai_error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : AI_ADDRCONFIG);
  const char* node = host.c_str();
  if (passive && (host.empty() || host == "0.0.0.0")) {
    node = nullptr;
    hints.ai_family = AF_INET;
  }
  std::string service = std::to_string(port);
  addrinfo* list = nullptr;
  *gai_error = getaddrinfo(node, service.c_str(), &hints, &list);
  if (*gai_error != 0) return nullptr;
  return AddrInfoList(list);
}

std::string numeric_host(const sockaddr* address, socklen_t length) {
  char buffer[NI_MAXHOST];
  if (getnameinfo(address, length, buffer, sizeof(buffer), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "?";
  }
  return buffer;
}

std::string peer_name(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  auto* address = reinterpret_cast<sockaddr*>(&storage);
  if (getpeername(fd, address, &length) != 0) return "";
  std::uint16_t port = 0;
  if (storage.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  } else if (storage.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  } else {
    return "";
  }
  return to_string(HostPort{numeric_host(address, length), port});
}

std::string error_text(int code) {
  char buffer[256];
  // GNU strerror_r returns the message (possibly not in `buffer`).
  return strerror_r(code, buffer, sizeof(buffer));
}

}  // namespace detail
}  // namespace chorus::net
