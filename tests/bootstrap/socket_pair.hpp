// Test helper: two connected loopback TCP sockets.
#pragma once

#include "bootstrap/socket.hpp"

#include <chrono>
#include <utility>

namespace chorus::testing {

inline std::pair<net::Socket, net::Socket> tcp_pair() {
  net::Socket listener = net::listen_tcp("127.0.0.1", 0);
  auto deadline = deadline_after(std::chrono::seconds(5));
  net::Socket client = net::connect_tcp({"127.0.0.1", net::local_port(listener)}, deadline);
  net::Socket server = net::accept_until(listener, deadline);
  return {std::move(client), std::move(server)};
}

}  // namespace chorus::testing
