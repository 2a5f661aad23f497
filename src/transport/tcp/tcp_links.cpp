// Opening TCP links on first use; see tcp_links.hpp.
#include "transport/tcp/tcp_links_impl.hpp"

#include "core/log.hpp"
#include "transport/tcp/tcp_link.hpp"

#include <chorus/error.hpp>

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace chorus::transport::tcp {
namespace {

constexpr char kPurpose[] = "data";

/// True when `id` is rank `rank`'s record of this communicator, with `magic`.
bool is_record_of(const Identification& id, std::uint32_t magic, int rank,
                  const TcpLinksPlan& plan) {
  return id.magic == magic && id.rank == rank && id.size == plan.size &&
         plan.mesh_token.size() == sizeof(id.mesh_token) &&
         std::memcmp(id.mesh_token, plan.mesh_token.data(), sizeof(id.mesh_token)) == 0;
}

/// Writes a whole record on a fresh connection (it fits the empty socket buffer at once).
void send_record(int fd, const Identification& record) {
  const ssize_t n = ::send(fd, &record, sizeof(record), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(sizeof(record))) {
    throw Error(Status::RemoteError, "it hung up before its answer was written");
  }
}

}  // namespace

Identification make_identification(int rank, int size, const std::string& mesh_token) {
  Identification id;
  id.rank = rank;
  id.size = size;
  std::memcpy(id.mesh_token, mesh_token.data(), std::min(mesh_token.size(), sizeof(id.mesh_token)));
  return id;
}

std::unique_ptr<LinkOpener> make_tcp_links(net::Socket listener, TcpLinksPlan plan) {
  return std::make_unique<TcpLinks>(std::move(listener), std::move(plan));
}

TcpLinks::TcpLinks(net::Socket listener, TcpLinksPlan plan)
    : plan_(std::move(plan)),
      listener_(std::move(listener)),
      states_(static_cast<std::size_t>(plan_.size), State::Idle),
      links_(static_cast<std::size_t>(plan_.size)) {
  plan_.addresses.resize(static_cast<std::size_t>(plan_.size));
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    throw Error(Status::SystemError, std::string("eventfd failed: ") + std::strerror(errno));
  }
}

TcpLinks::~TcpLinks() {
  const std::uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof(one));
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
  if (log_enabled(LogLevel::Info)) {
    log(LogLevel::Info, "rank " + std::to_string(plan_.rank) + " of " + std::to_string(plan_.size) +
                            " had " + std::to_string(opened_ + admitted_) + " TCP links (opened " +
                            std::to_string(opened_) + ", admitted " + std::to_string(admitted_) +
                            ")");
  }
}

void TcpLinks::start(std::function<void()> wake) {
  wake_ = std::move(wake);
  thread_ = std::thread([this] { serve(); });
}

bool TcpLinks::reaches(int peer) const {
  return peer >= 0 && peer < plan_.size && plan_.addresses[static_cast<std::size_t>(peer)];
}

std::unique_ptr<Link> TcpLinks::open(int peer) {
  const Deadline deadline = Clock::now() + plan_.connect_time;
  const auto p = static_cast<std::size_t>(peer);
  {
    std::lock_guard lock(mutex_);
    if (states_[p] == State::Arrived) return take(peer);
    states_[p] = State::Dialing;
  }
  net::Socket socket;
  std::optional<Error> failure;
  try {
    socket = dial(peer, deadline);
  } catch (const Error& error) {
    failure = error;
  }
  std::unique_lock lock(mutex_);
  if (socket.valid()) {
    states_[p] = State::Taken;
    ++opened_;
    return std::make_unique<TcpLink>(peer, std::move(socket));
  }
  // A crossing record: the peer's own connection is kept; it is here or on its way.
  if (!failure)
    arrived_signal_.wait_until(lock, deadline, [&] { return states_[p] != State::Dialing; });
  if (states_[p] == State::Arrived) return take(peer);
  states_[p] = State::Taken;
  const std::string who =
      "rank " + std::to_string(peer) + " (" + net::to_string(*plan_.addresses[p]) + ")";
  const std::string from = "rank " + std::to_string(plan_.rank) + " cannot open its link to " + who;
  if (!failure) {
    throw Error(Status::Timeout,
                from + ": it answered that its own link was on its way, but none came within " +
                    std::to_string(plan_.connect_time.count()) + " ms");
  }
  if (failure->status() == Status::RemoteError) {
    throw Error(Status::RemoteError, from + ": " + failure->what() + " (rank " +
                                         std::to_string(peer) +
                                         " exited or died before the link was opened)");
  }
  throw Error(failure->status(), from + ": " + failure->what());
}

net::Socket TcpLinks::dial(int peer, Deadline deadline) const {
  const net::HostPort& address = *plan_.addresses[static_cast<std::size_t>(peer)];
  net::Socket socket = net::connect_tcp_now(address, deadline);
  auth::handshake_as_client(socket.fd(), plan_.secret, kPurpose, deadline);
  const Identification mine = make_identification(plan_.rank, plan_.size, plan_.mesh_token);
  net::write_full(socket.fd(), &mine, sizeof(mine), deadline);
  Identification theirs;
  net::read_full(socket.fd(), &theirs, sizeof(theirs), deadline);
  if (is_record_of(theirs, kCrossingMagic, peer, plan_)) return net::Socket();
  if (!is_record_of(theirs, Identification{}.magic, peer, plan_)) {
    throw Error(Status::RemoteError,
                "the listener there is not rank " + std::to_string(peer) + " of this communicator");
  }
  return socket;
}

std::unique_ptr<Link> TcpLinks::take(int peer) {
  const auto p = static_cast<std::size_t>(peer);
  states_[p] = State::Taken;
  ++admitted_;
  return std::make_unique<TcpLink>(peer, std::move(links_[p]));
}

std::vector<std::pair<int, std::unique_ptr<Link>>> TcpLinks::arrivals() {
  std::lock_guard lock(mutex_);
  arrivals_waiting_.store(false, std::memory_order_release);
  std::vector<std::pair<int, std::unique_ptr<Link>>> links;
  for (int p = 0; p < plan_.size; ++p) {
    if (states_[static_cast<std::size_t>(p)] == State::Arrived) links.emplace_back(p, take(p));
  }
  return links;
}

void TcpLinks::abort_arrivals(std::vector<std::byte> frame) {
  std::lock_guard lock(mutex_);
  abort_frame_ = std::move(frame);
}

void TcpLinks::admit(const Identification& id, net::Socket& socket) {
  const int peer = id.rank;
  if (!is_record_of(id, Identification{}.magic, peer, plan_)) {
    throw Error(Status::RemoteError, "it is not a member of this communicator");
  }
  if (!reaches(peer)) {
    throw Error(Status::RemoteError, "it claims rank " + std::to_string(peer) +
                                         ", which does not reach this rank over TCP");
  }
  const auto p = static_cast<std::size_t>(peer);
  Identification answer = make_identification(plan_.rank, plan_.size, plan_.mesh_token);
  {
    std::lock_guard lock(mutex_);
    // The lower rank's connection is the one kept when both open at once (see Crossing).
    const bool keep =
        states_[p] == State::Idle || (states_[p] == State::Dialing && plan_.rank > peer);
    if (!keep) answer.magic = kCrossingMagic;
    send_record(socket.fd(), answer);
    if (!keep) return;
    if (!abort_frame_.empty()) {  // broken: the peer learns why at once (best effort)
      ssize_t ignored = ::send(socket.fd(), abort_frame_.data(), abort_frame_.size(),
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)ignored;
      states_[p] = State::Taken;
      links_[p] = std::move(socket);
      return;
    }
    states_[p] = State::Arrived;
    links_[p] = std::move(socket);
    arrivals_waiting_.store(true, std::memory_order_release);
  }
  arrived_signal_.notify_all();
  if (wake_) wake_();
}

}  // namespace chorus::transport::tcp
