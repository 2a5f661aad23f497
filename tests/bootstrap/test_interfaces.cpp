// CHORUS_SOCKET_IFNAME: interface lists as NCCL_SOCKET_IFNAME takes them, local addresses,
// and the sentence for a value that fits nothing here.
#include "bootstrap/interfaces.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus::net {
namespace {

/// lo first, as getifaddrs lists it; eth0 has both families, ib0 only IPv6.
const std::vector<InterfaceAddress> kHost = {
    {"lo", "127.0.0.1", false, true},        {"lo", "::1", true, true},
    {"docker0", "172.17.0.1", false, false}, {"eth0", "fd00::2", true, false},
    {"eth0", "10.0.0.2", false, false},      {"ib0", "fd01::3", true, false},
};

/// The sentence of the InvalidArgument that select_interface_address throws.
std::string rejection(const std::string& spec, const std::vector<InterfaceAddress>& interfaces) {
  try {
    std::string chosen = select_interface_address(spec, interfaces);
    ADD_FAILURE() << spec << " selected " << chosen;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(SocketIfname, NamesArePrefixesUnlessExact) {
  EXPECT_EQ(select_interface_address("eth0", kHost), "10.0.0.2");  // IPv4 before IPv6
  EXPECT_EQ(select_interface_address("eth", kHost), "10.0.0.2");
  EXPECT_EQ(select_interface_address("=eth0", kHost), "10.0.0.2");
  EXPECT_EQ(select_interface_address("ib", kHost), "fd01::3");
  EXPECT_EQ(select_interface_address("lo", kHost), "127.0.0.1");
  EXPECT_NE(rejection("=eth", kHost).find("\"=eth\""), std::string::npos);
}

TEST(SocketIfname, CommaListsAndExclusion) {
  EXPECT_EQ(select_interface_address("ib,eth", kHost), "10.0.0.2");       // IPv4 wins
  EXPECT_EQ(select_interface_address("lo,docker", kHost), "172.17.0.1");  // non-loopback wins
  EXPECT_EQ(select_interface_address("^docker,lo", kHost), "10.0.0.2");
  EXPECT_EQ(select_interface_address("^=eth0,docker0", kHost), "fd01::3");
  EXPECT_EQ(select_interface_address("^d", kHost), "10.0.0.2");  // lo only if nothing else
}

TEST(SocketIfname, LocalAddressesAreTakenAsIs) {
  EXPECT_EQ(select_interface_address("10.0.0.2", kHost), "10.0.0.2");
  EXPECT_EQ(select_interface_address("fd00:0::2", kHost), "fd00::2");
  EXPECT_EQ(select_interface_address("::1", kHost), "::1");
}

TEST(SocketIfname, AValueThatFitsNothingNamesItAndTheInterfaces) {
  const std::string sentence = rejection("eth1", kHost);
  EXPECT_NE(sentence.find("CHORUS_SOCKET_IFNAME=\"eth1\""), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("lo 127.0.0.1 ::1; docker0 172.17.0.1; eth0 fd00::2 10.0.0.2; ib0 "
                          "fd01::3"),
            std::string::npos)
      << sentence;
  EXPECT_NE(rejection("10.1.2.3", kHost).find("\"10.1.2.3\""), std::string::npos);
  EXPECT_NE(rejection("", kHost).find("\"\""), std::string::npos);
  EXPECT_NE(rejection("^", kHost).find("\"^\""), std::string::npos);
  EXPECT_NE(rejection(",", kHost).find("\",\""), std::string::npos);
}

TEST(SocketIfname, ExcludingTheOnlyInterfaceIsAClearError) {
  const std::vector<InterfaceAddress> only_lo = {{"lo", "127.0.0.1", false, true}};
  const std::string sentence = rejection("^lo", only_lo);
  EXPECT_NE(sentence.find("CHORUS_SOCKET_IFNAME=\"^lo\" selects no interface"), std::string::npos)
      << sentence;
  EXPECT_NE(sentence.find("(its interfaces: lo 127.0.0.1)"), std::string::npos) << sentence;
}

// This machine: lo exists everywhere these tests run.
TEST(SocketIfname, ThisHost) {
  EXPECT_EQ(advertised_address("lo"), "127.0.0.1");
  EXPECT_EQ(advertised_address("=lo"), "127.0.0.1");
  EXPECT_EQ(advertised_address("127.0.0.1"), "127.0.0.1");
  EXPECT_NE(advertised_address(""), "");
  try {
    advertised_address("nosuch0");
    ADD_FAILURE() << "nosuch0 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    const std::string sentence = e.what();
    EXPECT_NE(sentence.find("\"nosuch0\""), std::string::npos) << sentence;
    EXPECT_NE(sentence.find("lo 127.0.0.1"), std::string::npos) << sentence;
  }
  EXPECT_THROW(advertised_address("192.0.2.1"), Error);  // TEST-NET-1: nobody's address
}

}  // namespace
}  // namespace chorus::net
