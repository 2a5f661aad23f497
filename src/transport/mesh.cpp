// The mesh rendezvous: publish who we are, derive the topology, connect the
// shared-memory links, and hand them to a ProgressEngine with the TCP links to open on
// first use (tcp/tcp_links.hpp).
#include "transport/mesh.hpp"

#include "bootstrap/counting_store.hpp"
#include "bootstrap/interfaces.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/store_exchange.hpp"
#include "core/log.hpp"
#include "transport/arena/host_arena.hpp"
#include "transport/mesh_internal.hpp"
#include "transport/progress_engine.hpp"
#include "transport/rank_info.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_links.hpp"

#include <chorus/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <numeric>

namespace chorus::transport {
namespace {

bool is_ipv6(const std::string& host) { return host.find(':') != std::string::npos; }

/// Every rank's record, through one store all-gather (a few requests per rank).
std::vector<RankInfo> gather_infos(Store& store, int rank, int size, const RankInfo& mine,
                                   Deadline deadline) {
  std::vector<int> members(static_cast<std::size_t>(size));
  std::iota(members.begin(), members.end(), 0);
  const std::vector<std::string> records =
      store_all_gather(store, rank_info_prefix(), members, rank, encode(mine), deadline);
  std::vector<RankInfo> infos;
  for (int r = 0; r < size; ++r) {
    infos.push_back(decode_rank_info(records[static_cast<std::size_t>(r)], r));
  }
  return infos;
}

void require_one_host(const Topology& topology) {
  for (int r = 1; r < static_cast<int>(topology.host_of_rank.size()); ++r) {
    if (!topology.same_host(0, r)) {
      throw Error(Status::InvalidUsage,
                  "the shared-memory transport needs every rank on one host, but ranks 0 and " +
                      std::to_string(r) +
                      " are on different hosts (use CHORUS_TRANSPORT=auto or tcp)");
    }
  }
}

/// Ranks this rank reaches through shared memory: its host, unless TCP is forced.
std::vector<int> shm_ranks(Kind kind, const Topology& topology, int rank) {
  std::vector<int> ranks;
  if (kind == Kind::Tcp) return ranks;
  for (int r = 0; r < static_cast<int>(topology.host_of_rank.size()); ++r) {
    if (topology.same_host(rank, r)) ranks.push_back(r);
  }
  return ranks.size() > 1 ? ranks : std::vector<int>{};
}

/// Where this rank opens its TCP links on first use: every peer not reached through shared
/// memory. Null when there is none.
std::unique_ptr<LinkOpener> tcp_links(int rank, const std::vector<RankInfo>& infos,
                                      const std::vector<std::unique_ptr<Link>>& shm_links,
                                      const Topology& topology, net::Socket listener,
                                      const MeshOptions& options, Clock::duration connect_time) {
  tcp::TcpLinksPlan plan;
  plan.rank = rank;
  plan.size = static_cast<int>(infos.size());
  plan.secret = options.secret;
  plan.mesh_token = infos[0].token;
  plan.connect_time = std::chrono::ceil<std::chrono::milliseconds>(connect_time);
  plan.addresses.resize(infos.size());
  bool any = false;
  for (int p = 0; p < plan.size; ++p) {
    if (p == rank || shm_links[static_cast<std::size_t>(p)]) continue;
    // Same host: loopback reaches the listener (bound to every interface) for sure.
    std::string host = infos[p].address;
    if (topology.same_host(rank, p)) host = is_ipv6(host) ? "::1" : "127.0.0.1";
    plan.addresses[static_cast<std::size_t>(p)] = net::HostPort{host, infos[p].port};
    any = true;
  }
  if (!any) return nullptr;
  return tcp::make_tcp_links(std::move(listener), std::move(plan));
}

/// How long each step of the rendezvous took and the store requests it made, logged at INFO
/// (CHORUS_DEBUG=INFO) by finish(): where a slow start-up spends its time.
class StepTimes {
 public:
  void mark(const char* step) {
    const auto now = Clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_).count();
    text_ += (text_.empty() ? "" : ", ") + std::string(step) + " " + std::to_string(ms) + " ms";
    last_ = now;
  }
  void finish(int rank, int size, int store_requests) const {
    if (!log_enabled(LogLevel::Info)) return;
    log(LogLevel::Info, "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                            " connected: " + text_ + "; " + std::to_string(store_requests) +
                            " store requests");
  }

 private:
  Clock::time_point last_ = Clock::now();
  std::string text_;
};

}  // namespace

Kind parse_kind(const std::string& text) {
  if (text == "auto") return Kind::Auto;
  if (text == "tcp") return Kind::Tcp;
  if (text == "shm") return Kind::Shm;
  throw Error(Status::InvalidArgument,
              "CHORUS_TRANSPORT is \"" + text + "\"; expected auto, tcp or shm");
}

Connection connect_mesh_as(Store& base_store, int rank, int size, const MeshOptions& options,
                           const LocalIdentity& identity) {
  require_argument(size >= 1 && rank >= 0 && rank < size, "rank " + std::to_string(rank) +
                                                              " is not in a communicator of " +
                                                              std::to_string(size) + " ranks");
  if (size == 1) {
    return {std::make_unique<ProgressEngine>(rank, 1, Topology{{0}, 1},
                                             std::vector<std::unique_ptr<Link>>(), Doorbell()),
            nullptr};
  }

  StepTimes steps;
  CountingStore store(base_store);
  // Links opened later get as long as the start-up was given.
  const Clock::duration connect_time =
      std::max<Clock::duration>(options.deadline - Clock::now(), std::chrono::seconds(1));
  RankInfo mine{identity.host, identity.pid, "", 0, random_token()};
  net::Socket listener;
  if (options.kind != Kind::Shm) {
    mine.address = net::advertised_address(options.advertise_host);
    listener = net::listen_tcp(is_ipv6(mine.address) ? "::" : "", 0);
    mine.port = net::local_port(listener);
  }
  std::vector<RankInfo> infos = gather_infos(store, rank, size, mine, options.deadline);
  Topology topology = topology_of(infos);
  if (options.kind == Kind::Shm) require_one_host(topology);
  steps.mark("records");

  shm::ShmMesh shm;
  std::unique_ptr<HostArena> arena;
  std::vector<int> host_ranks = shm_ranks(options.kind, topology, rank);
  if (!host_ranks.empty()) {
    shm = shm::connect_shm_mesh(store, rank, host_ranks, infos,
                                {options.shm_sized_for, options.deadline});
    steps.mark("rings");
  }
  if (static_cast<int>(host_ranks.size()) == size) {  // one host: the shm_direct collectives
    arena = HostArena::connect(store, rank, size, infos[0].token, options.deadline,
                               options.shm_sized_for);
    steps.mark("arena");
  }
  shm.links.resize(size);
  std::unique_ptr<LinkOpener> opener;
  if (options.kind != Kind::Shm) {
    opener =
        tcp_links(rank, infos, shm.links, topology, std::move(listener), options, connect_time);
  }
  auto engine = std::make_unique<ProgressEngine>(
      rank, size, std::move(topology), std::move(shm.links), shm.doorbell, std::move(opener));
  if (arena) arena->set_liveness(engine.get());
  steps.finish(rank, size, store.requests());
  return {std::move(engine), std::move(arena)};
}

Connection connect_mesh(Store& store, int rank, int size, const MeshOptions& options) {
  return connect_mesh_as(store, rank, size, options,
                         LocalIdentity{host_identity(), static_cast<std::int64_t>(::getpid())});
}

}  // namespace chorus::transport
