// Start-up that scales: a rank's store requests while connecting a mesh do not grow with
// the number of ranks (the records, ring notices and mapping barriers are store exchanges,
// bootstrap/store_exchange.hpp); only the leaders of the exchanges read every member's key.
#include "bootstrap/store.hpp"
#include "counting_store.hpp"
#include "mesh_harness.hpp"

#include <gtest/gtest.h>

#include <atomic>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

using chorus::testing::CountingStore;

/// Store requests of each rank while n thread-ranks connect a mesh of `kind` on hosts
/// given by `host_of(rank)`.
std::vector<int> startup_requests(int n, Kind kind, int hosts) {
  std::shared_ptr<Store> base = make_memory_store();
  std::vector<int> requests(static_cast<std::size_t>(n));
  std::vector<Connection> connections(static_cast<std::size_t>(n));
  run_threads(n, [&](int r) {
    CountingStore store(base);
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
/// requests; the leaders at most `leader_most`.
void expect_bounded(const std::vector<int>& requests, int hosts, int most, int leader_most) {
  for (int r = 0; r < static_cast<int>(requests.size()); ++r) {
    const bool leader = r < hosts;  // host h's first rank is h
    EXPECT_LE(requests[static_cast<std::size_t>(r)], leader ? leader_most : most) << "rank " << r;
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

}  // namespace
}  // namespace chorus::transport::testing
