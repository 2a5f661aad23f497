// The store server's handling of complete units from a client: the handshake
// response, then requests (frames in store_protocol.hpp, meanings in store_table).
#include "bootstrap/store_server_impl.hpp"

#include <chorus/error.hpp>

#include <sys/socket.h>

namespace chorus {

using store_wire::Op;

namespace store_server_detail {

std::size_t bytes_needed(const Connection& c) {
  if (c.handshake) return auth::ServerHandshake::kResponseBytes;
  if (c.in.size() < store_wire::kHeaderBytes) return store_wire::kHeaderBytes;
  auto header = store_wire::decode_header(reinterpret_cast<const std::uint8_t*>(c.in.data()));
  if (!store_wire::is_valid_op(header.code) ||
      header.body_bytes > store_wire::max_body_bytes(static_cast<Op>(header.code))) {
    return store_wire::kHeaderBytes;
  }
  return store_wire::kHeaderBytes + header.body_bytes;
}

}  // namespace store_server_detail

using store_server_detail::bytes_needed;

void StoreServer::Impl::handle_buffered_units() {
  // Only clients touched this round can have a unit to handle. A Set may unpark another
  // client (touching it) whose next request is already buffered (it sends no new bytes, so
  // epoll would not wake us): repeat until a pass makes no progress. Every pass that
  // continues consumed at least one unit.
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t i = 0; i < touched.size(); ++i) {
      while (handle_next_unit(*touched[i])) progress = true;
    }
  }
}

/// Handles one complete unit from `c.in` if there is one and `c` may proceed.
bool StoreServer::Impl::handle_next_unit(Connection& c) {
  if (c.blocked() || c.in.size() < bytes_needed(c)) return false;
  if (c.handshake) {
    authenticate(c);
  } else {
    handle_request(c);
  }
  return true;
}

void StoreServer::Impl::authenticate(Connection& c) {
  try {
    auth::ServerHandshake::Verdict verdict =
        c.handshake->verify(reinterpret_cast<const std::uint8_t*>(c.in.data()));
    c.in.erase(0, auth::ServerHandshake::kResponseBytes);
    c.handshake.reset();
    reply(c, std::string(verdict.begin(), verdict.end()));
    if (log_enabled(LogLevel::Trace))
      log(LogLevel::Trace, "store server: client " + c.peer + " authenticated");
  } catch (const Error& e) {
    auto reject = auth::ServerHandshake::reject_frame();
    ssize_t ignored =
        ::send(c.socket.fd(), reject.data(), reject.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
    drop(c, LogLevel::Warn, e.what());
  }
}

void StoreServer::Impl::handle_request(Connection& c) {
  auto header = store_wire::decode_header(reinterpret_cast<const std::uint8_t*>(c.in.data()));
  if (!store_wire::is_valid_op(header.code)) {
    return drop(c, LogLevel::Warn, "sent an unknown operation code " + std::to_string(header.code));
  }
  auto op = static_cast<Op>(header.code);
  if (header.body_bytes > store_wire::max_body_bytes(op)) {
    return drop(c, LogLevel::Warn,
                "sent a request of " + std::to_string(header.body_bytes) +
                    " bytes, over the limit of " + std::to_string(store_wire::max_body_bytes(op)));
  }
  store_wire::Request request;
  try {
    request = store_wire::parse_request(
        op, std::string_view(c.in).substr(store_wire::kHeaderBytes, header.body_bytes));
  } catch (const Error& e) {
    return drop(c, LogLevel::Warn, e.what());
  }
  c.in.erase(0, store_wire::kHeaderBytes + header.body_bytes);
  std::optional<std::string> answer = table.execute(request);
  if (!answer) {
    c.parked_deadline = deadline_after(std::chrono::milliseconds(request.timeout_ms));
    return park(c, std::move(request));
  }
  reply(c, std::move(*answer));
  if (table.changed()) wake_parked(request.keys.front());
}

/// Parks `c`'s Get/Wait under the first key it lacks (some key is missing).
void StoreServer::Impl::park(Connection& c, store_wire::Request request) {
  const std::string* missing = table.first_missing(request.keys);
  c.parked_on = missing ? *missing : request.keys.front();
  c.parked = std::move(request);
  parked_by_key.emplace(c.parked_on, &c);
}

void StoreServer::Impl::unpark(Connection& c) {
  auto [begin, end] = parked_by_key.equal_range(c.parked_on);
  for (auto it = begin; it != end; ++it) {
    if (it->second == &c) {
      parked_by_key.erase(it);
      break;
    }
  }
  c.parked.reset();
}

/// Answers the clients parked on `key` (which now exists) whose keys all exist, and parks the
/// others again under a key they still lack.
void StoreServer::Impl::wake_parked(const std::string& key) {
  auto [begin, end] = parked_by_key.equal_range(key);
  std::vector<Connection*> waiting;
  for (auto it = begin; it != end; ++it) waiting.push_back(it->second);
  parked_by_key.erase(begin, end);
  for (Connection* c : waiting) {
    touch(*c);
    store_wire::Request request = std::move(*c->parked);
    c->parked.reset();
    if (auto answer = table.answer_if_ready(request)) {
      reply(*c, std::move(*answer));
    } else {
      park(*c, std::move(request));
    }
  }
}

void StoreServer::Impl::expire_timers() {
  const Deadline now = Clock::now();
  std::vector<Connection*> due;
  for (auto it = timers.begin(); it != timers.end() && it->first <= now; ++it) {
    due.push_back(it->second);
  }
  for (Connection* c : due) {
    touch(*c);
    if (c->dead) continue;
    if (c->handshake && now >= c->handshake_deadline) {
      drop(*c, LogLevel::Warn, "did not authenticate within 5 s");
    } else if (c->parked && now >= c->parked_deadline) {
      std::string answer = table.timeout_reply(*c->parked);
      unpark(*c);
      reply(*c, std::move(answer));
    }
  }
}

}  // namespace chorus
