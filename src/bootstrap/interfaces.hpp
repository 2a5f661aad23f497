// The address a rank advertises for data connections: CHORUS_SOCKET_IFNAME (interface
// names as NCCL_SOCKET_IFNAME takes them, or an address of this host), else detected.
#pragma once

#include <string>
#include <vector>

namespace chorus::net {

/// One address of a network interface that is up.
struct InterfaceAddress {
  std::string name;     ///< "eth0"
  std::string address;  ///< numeric: "10.0.0.2" or "fd00::2"
  bool ipv6 = false;
  bool loopback = false;
};

/// Every IPv4 and IPv6 address of the interfaces that are up, in getifaddrs order
/// (IPv6 link-local addresses are left out: they only mean something with a scope).
std::vector<InterfaceAddress> local_interfaces();

/// The address to advertise for `spec`, a CHORUS_SOCKET_IFNAME value, on a host with
/// `interfaces`. `spec` is either an address of one of them (returned as is), or a comma
/// list of interface-name prefixes (`eth,ib`), `=` before the list for exact names
/// (`=eth0`), `^` to exclude instead (`^docker,lo`; `^=` excludes exact names), as
/// NCCL_SOCKET_IFNAME. Of the interfaces selected, a non-loopback one wins over loopback,
/// then IPv4 over IPv6, then the first listed. Throws InvalidArgument naming `spec` and the
/// interfaces when nothing matches.
std::string select_interface_address(const std::string& spec,
                                     const std::vector<InterfaceAddress>& interfaces);

/// What this rank advertises: select_interface_address(spec, local_interfaces()) when `spec`
/// is not empty, else the first non-loopback IPv4 address of an interface that is up, else
/// 127.0.0.1.
std::string advertised_address(const std::string& spec);

}  // namespace chorus::net
