// Start-up that scales: a rank's store requests while connecting a mesh do not grow with
// the number of ranks (the records, ring notices and mapping barriers are store exchanges,
// bootstrap/store_exchange.hpp); only the leaders of the exchanges read every member's key.
// A host's shared memory follows transport/shm_budget.hpp, for sub-communicators too.
#include "bootstrap/counting_store.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_exchange.hpp"
#include "mesh_harness.hpp"
#include "transport/shm_budget.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

/// Store requests of each rank while n thread-ranks connect a mesh of `kind` on hosts
/// given by `host_of(rank)`.
std::vector<int> startup_requests(int n, Kind kind, int hosts) {
  std::shared_ptr<Store> base = make_memory_store();
  std::vector<int> requests(static_cast<std::size_t>(n));
  std::vector<Connection> connections(static_cast<std::size_t>(n));
  run_threads(n, [&](int r) {
    CountingStore store(*base);
    MeshOptions options;
    options.kind = kind;
    options.secret = kSecret;
    options.advertise_host = "127.0.0.1";
    options.deadline = deadline_after(60s);
    LocalIdentity identity{"host-" + std::to_string(r % hosts), ::getpid()};
    connections[static_cast<std::size_t>(r)] = connect_mesh_as(store, r, n, options, identity);
    requests[static_cast<std::size_t>(r)] = store.requests();
  });
  return requests;
}

/// Every rank but the leaders (rank 0, and each host's first rank) makes at most `most`
/// requests, and the first of every kGatherFanIn ranks (which gathers their records) at most
/// kGatherFanIn + 1 more; the leaders at most `leader_most`.
void expect_bounded(const std::vector<int>& requests, int hosts, int most, int leader_most) {
  for (int r = 0; r < static_cast<int>(requests.size()); ++r) {
    const bool leader = r < hosts;  // host h's first rank is h
    const int gathers = r % static_cast<int>(kGatherFanIn) == 0 ? kGatherFanIn + 1 : 0;
    EXPECT_LE(requests[static_cast<std::size_t>(r)], leader ? leader_most : most + gathers)
        << "rank " << r;
  }
}

TEST(MeshStartup, StoreRequestsPerRankDoNotGrowWithRanksOnOneHost) {
  const int n = 24;
  // records: set, get; rings: set, get, barrier (2); arena: get, barrier (2).
  expect_bounded(startup_requests(n, Kind::Shm, 1), 1, 9, 3 * n + 16);
}

TEST(MeshStartup, StoreRequestsPerRankDoNotGrowWithRanksOnSeveralHosts) {
  const int n = 12;
  expect_bounded(startup_requests(n, Kind::Auto, 3), 3, 6, 2 * n + 12);
}

TEST(MeshStartup, StoreRequestsPerRankOverTcp) {
  const int n = 10;
  expect_bounded(startup_requests(n, Kind::Tcp, 1), 1, 2, n + 4);
}

/// Bytes of the shared-memory segments this process maps ("memfd:chorus-..."), each counted
/// once however many thread-ranks map it.
std::uint64_t mapped_segment_bytes() {
  std::ifstream maps("/proc/self/maps");
  std::map<std::string, std::uint64_t> by_inode;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:chorus-") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    fields >> range >> perms >> offset >> device >> inode;
    const std::size_t dash = range.find('-');
    const std::uint64_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    by_inode[inode] = std::max(by_inode[inode], end - begin);
  }
  std::uint64_t total = 0;
  for (const auto& [inode, bytes] : by_inode) total += bytes;
  return total;
}

/// n thread-ranks on one host connect a shared-memory mesh sized for `sized_for` host ranks;
/// returns the bytes of its segments and checks the arena's sizes.
std::uint64_t host_shared_bytes(int n, int sized_for) {
  std::shared_ptr<Store> store = make_memory_store();
  std::vector<Connection> connections(static_cast<std::size_t>(n));
  run_threads(n, [&](int r) {
    MeshOptions options;
    options.kind = Kind::Shm;
    options.deadline = deadline_after(60s);
    options.shm_sized_for = sized_for;
    connections[static_cast<std::size_t>(r)] = connect_mesh_as(*store, r, n, options, same_host(r));
  });
  const int host_ranks = std::max(n, sized_for);
  const HostArena& arena = *connections[0].arena;
  EXPECT_EQ(arena.round_bytes(), shm_budget::arena_slot_bytes(host_ranks) / 2);
  EXPECT_EQ(arena.lane_bytes(), shm_budget::arena_lane_bytes(host_ranks));
  return mapped_segment_bytes();
}

/// The most a host of n ranks sized for `host_ranks` may hold: n slots of a ring and its
/// 192-byte control per inbox (its own slot unused) and a page of rounding, arena slots, lanes,
/// flag lines and doorbells.
std::uint64_t budget_bytes(int n, int host_ranks) {
  const auto ranks = static_cast<std::uint64_t>(n);
  const std::uint64_t inboxes =
      ranks * (ranks * (shm_budget::ring_bytes(host_ranks) + 192) + 2 * 4096);
  const std::uint64_t arena =
      ranks * (shm_budget::arena_slot_bytes(host_ranks) +
               shm_budget::kLanesPerRank * shm_budget::arena_lane_bytes(host_ranks) + 4160 + 8) +
      4096;
  return inboxes + arena;
}

TEST(MeshStartup, AHostsSharedMemoryFollowsItsBudget) {
  ::unsetenv("CHORUS_SHM_RING_BYTES");
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  constexpr std::uint64_t MiB = std::uint64_t{1} << 20;
  const std::uint64_t eight = host_shared_bytes(8, 0);
  EXPECT_LE(eight, budget_bytes(8, 8));
  EXPECT_GE(eight, 8 * 7 * MiB + 8 * 4 * MiB) << "8 ranks keep 1 MiB rings and 4 MiB slots";
  const std::uint64_t many = host_shared_bytes(64, 0);
  EXPECT_LE(many, budget_bytes(64, 64));
  EXPECT_LE(many, 128 * MiB) << "64 ranks held 785 MiB with 8 MiB of rings per rank";
}

TEST(MeshStartup, ASubCommunicatorIsSizedForItsParentsRanksOnTheHost) {
  ::unsetenv("CHORUS_SHM_RING_BYTES");
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  const std::uint64_t group = host_shared_bytes(4, 64);
  EXPECT_LE(group, budget_bytes(4, 64));
  EXPECT_LT(group, budget_bytes(4, 4) / 8) << "4 ranks alone take 1 MiB rings and 4 MiB slots";
}

}  // namespace
}  // namespace chorus::transport::testing
