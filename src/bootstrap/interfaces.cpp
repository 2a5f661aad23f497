// Interface selection for the advertised address; see interfaces.hpp.
#include "bootstrap/interfaces.hpp"

#include "bootstrap/address.hpp"

#include <chorus/error.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

namespace chorus::net {
namespace {

/// A parsed interface list: "eth,ib", "=eth0", "^docker,lo", "^=eth0".
struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  bool selects(const std::string& interface) const {
    const bool listed = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return exact ? interface == n : interface.starts_with(n);
    });
    return listed != exclude;
  }
};

InterfaceFilter parse_filter(std::string spec) {
  InterfaceFilter filter;
  if (spec.starts_with("^")) filter.exclude = true, spec.erase(0, 1);
  if (spec.starts_with("=")) filter.exact = true, spec.erase(0, 1);
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t comma = std::min(spec.find(',', start), spec.size());
    if (comma > start) filter.names.push_back(spec.substr(start, comma - start));
    start = comma + 1;
  }
  return filter;
}

/// `text` in the canonical numeric form of its family, or nullopt when it is no address.
std::optional<std::string> canonical_address(const std::string& text) {
  unsigned char bytes[sizeof(in6_addr)];
  char out[INET6_ADDRSTRLEN] = {};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), bytes) == 1 && inet_ntop(family, bytes, out, sizeof(out))) {
      return std::string(out);
    }
  }
  return std::nullopt;
}

bool is_link_local(const sockaddr* address) {
  if (address->sa_family != AF_INET6) return false;
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
  return IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

/// "lo 127.0.0.1 ::1; eth0 10.0.0.2", or "none with an address".
std::string describe(const std::vector<InterfaceAddress>& interfaces) {
  std::string text;
  for (std::size_t i = 0; i < interfaces.size(); ++i) {
    const bool same = i > 0 && interfaces[i - 1].name == interfaces[i].name;
    text += same ? " " : (text.empty() ? "" : "; ") + interfaces[i].name + " ";
    text += interfaces[i].address;
  }
  return text.empty() ? "none with an address" : text;
}

/// Better first: non-loopback, then IPv4; ties keep the listed order (stable sort).
bool preferred(const InterfaceAddress& a, const InterfaceAddress& b) {
  if (a.loopback != b.loopback) return !a.loopback;
  return !a.ipv6 && b.ipv6;
}

}  // namespace

std::vector<InterfaceAddress> local_interfaces() {
  std::vector<InterfaceAddress> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || !(it->ifa_flags & IFF_UP)) continue;
    const int family = it->ifa_addr->sa_family;
    if ((family != AF_INET && family != AF_INET6) || is_link_local(it->ifa_addr)) continue;
    socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    found.push_back({it->ifa_name, detail::numeric_host(it->ifa_addr, length), family == AF_INET6,
                     (it->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return found;
}

std::string select_interface_address(const std::string& spec,
                                     const std::vector<InterfaceAddress>& interfaces) {
  if (auto address = canonical_address(spec)) {
    for (const InterfaceAddress& candidate : interfaces) {
      if (candidate.address == *address) return *address;
    }
  } else {
    const InterfaceFilter filter = parse_filter(spec);
    std::vector<InterfaceAddress> selected;
    for (const InterfaceAddress& candidate : interfaces) {
      if (filter.selects(candidate.name)) selected.push_back(candidate);
    }
    std::stable_sort(selected.begin(), selected.end(), preferred);
    if (!selected.empty() && !filter.names.empty()) return selected.front().address;
  }
  throw Error(Status::InvalidArgument, "CHORUS_SOCKET_IFNAME=\"" + spec +
                                           "\" selects no interface that is up and is no " +
                                           "address of host " + host_name() +
                                           " (its interfaces: " + describe(interfaces) + ")");
}

std::string advertised_address(const std::string& spec) {
  const std::vector<InterfaceAddress> interfaces = local_interfaces();
  if (!spec.empty()) return select_interface_address(spec, interfaces);
  for (const InterfaceAddress& candidate : interfaces) {
    if (!candidate.ipv6 && !candidate.loopback) return candidate.address;
  }
  return "127.0.0.1";
}

}  // namespace chorus::net
