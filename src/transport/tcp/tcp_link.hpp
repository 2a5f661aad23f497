// Link to a peer over one TCP connection (non-blocking, TCP_NODELAY).
// EOF, reset or broken pipe: RemoteError "rank R closed the connection".
#pragma once

#include "bootstrap/socket.hpp"
#include "transport/link.hpp"

namespace chorus::transport::tcp {

class TcpLink final : public Link {
 public:
  /// Takes an authenticated, identified connection to `peer`.
  TcpLink(int peer, net::Socket socket);

  std::size_t write_some(const void* data, std::size_t bytes) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  int poll_fd() const override { return socket_.fd(); }
  void check_peer() override {}
  std::string_view kind() const override { return "tcp"; }

 private:
  [[noreturn]] void throw_failure(const char* call, int code) const;

  int peer_;
  net::Socket socket_;
};

}  // namespace chorus::transport::tcp
