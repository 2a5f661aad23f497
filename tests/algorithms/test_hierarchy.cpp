// Every two-level ("hierarchical" and "striped") algorithm, and every other algorithm of
// all-reduce, on MemoryFabrics that fake several hosts, against the sweep's references
// (sweep.hpp), and the two-level traffic pattern: only host leaders talk across hosts, and
// only to leaders (a rooted call's root leads its host), but for the stripes (the striped
// rows, large all-reduces), where ranks talk across hosts to the ranks of their own place.
#include "algorithms/algorithm.hpp"
#include "algorithms/patterns/hierarchy.hpp"
#include "algorithms/two_level.hpp"
#include "memory_transport.hpp"
#include "sweep.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

// Forwards to a rank's transport and counts sends that leave the host
// illegally for a hierarchical algorithm.
class CrossHostCounter final : public transport::Transport {
 public:
  /// `root`: a rooted call's root, which leads its host instead of the lowest rank.
  /// `off_place`, when given, also counts sends across hosts between ranks of different
  /// places on their hosts (place: the index among the host's ranks, ascending).
  CrossHostCounter(transport::Transport& inner, std::atomic<int>& violations, int root = -1,
                   std::atomic<int>* off_place = nullptr)
      : inner_(inner), violations_(violations), off_place_(off_place) {
    leaders_ = algorithms::host_groups(inner.topology(), inner.rank(), root).leaders();
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const Topology& topology() const override { return inner_.topology(); }
  transport::RequestId post_send(int peer, const void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override {
    if (!topology().same_host(rank(), peer) && !(is_leader(rank()) && is_leader(peer))) {
      violations_.fetch_add(1);
    }
    if (off_place_ && !topology().same_host(rank(), peer) && place(rank()) != place(peer)) {
      off_place_->fetch_add(1);
    }
    return inner_.post_send(peer, data, bytes, fingerprint);
  }
  transport::RequestId post_recv(int peer, void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override {
    return inner_.post_recv(peer, data, bytes, fingerprint);
  }
  void wait(std::span<const transport::RequestId> ids, Deadline deadline) override {
    inner_.wait(ids, deadline);
  }
  bool test(std::span<const transport::RequestId> ids) override { return inner_.test(ids); }
  bool wait_until(std::span<const transport::RequestId> ids, Deadline until) override {
    return inner_.wait_until(ids, until);
  }
  void interrupt() noexcept override { inner_.interrupt(); }
  void abort(Status status, const std::string& reason) override { inner_.abort(status, reason); }

 private:
  bool is_leader(int r) const {
    return std::find(leaders_.begin(), leaders_.end(), r) != leaders_.end();
  }
  int place(int r) const {
    const Topology& t = topology();
    const auto members =
        algorithms::patterns::host_members(t, t.host_of_rank[static_cast<std::size_t>(r)]);
    return static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
  }
  transport::Transport& inner_;
  std::atomic<int>& violations_;
  std::atomic<int>* off_place_;
  std::vector<int> leaders_;
};

// host_of_rank per rank for each faked layout, uneven hosts and interleaved ranks included.
const std::vector<std::vector<int>> kLayouts = {
    {0, 1},
    {0, 0, 1},
    {0, 0, 1, 1},
    {0, 1, 0, 1, 2},
    {0, 0, 0, 1},
    {0, 0, 0, 1, 1, 2, 2},
    {0, 0, 0, 0, 1, 1, 1, 1},
    {0, 1, 2, 3, 0, 1, 2, 3},
    {0, 0, 1, 1, 2, 2},
    {0, 1, 0, 1, 0, 1},
};

class MultiHostSweep : public ::testing::TestWithParam<std::size_t> {};

bool striped(const algorithms::Algorithm* algorithm) { return algorithm->name == "striped"; }
bool two_level(const algorithms::Algorithm* algorithm) {
  return algorithm->name == "hierarchical" || striped(algorithm);
}

TEST_P(MultiHostSweep, TwoLevelAndAllReduceAlgorithmsMatchTheReference) {
  const std::vector<int>& layout = kLayouts[GetParam()];
  const int n = static_cast<int>(layout.size());
  std::vector<SweepCase> cases;
  for (const SweepCase& c : sweep_cases(n, algorithms::kNeedsNothing)) {
    if (c.algorithm->collective == Collective::AllReduce || two_level(c.algorithm)) {
      cases.push_back(c);
    }
  }
  ASSERT_FALSE(cases.empty());
  MemoryFabric fabric(layout);
  std::mutex mutex;
  std::vector<std::string> wrong;
  std::atomic<int> violations{0}, off_place{0}, stripes_off_leaders{0};
  std::vector<std::string> crossed;
  auto failures = run_ranks(fabric, [&](transport::Transport& transport, int rank) {
    for (const SweepCase& c : cases) {
      const int root = has_root(c.algorithm->collective) ? c.root : -1;
      // Striped rows may cross from every rank, but only to the rank of its place.
      const bool stripes = striped(c.algorithm);
      CrossHostCounter counted(transport, stripes ? stripes_off_leaders : violations, root,
                               stripes ? &off_place : nullptr);
      const int before = violations.load() + off_place.load();
      auto problems =
          run_sweep_case(algorithms::Context{two_level(c.algorithm) ? counted : transport}, c);
      std::lock_guard lock(mutex);
      if (violations.load() + off_place.load() != before) crossed.push_back(describe(c));
      for (const auto& problem : problems) {
        wrong.push_back(describe(c) + " rank " + std::to_string(rank) + ": " + problem);
      }
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " ranks threw, first: " << failures[0];
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong results, first: " << wrong[0];
  EXPECT_EQ(violations.load(), 0) << "a two-level algorithm sent across hosts from a "
                                     "non-leader, first in "
                                  << (crossed.empty() ? "" : crossed[0]);
  EXPECT_EQ(off_place.load(), 0) << "a two-level algorithm sent across hosts to another "
                                    "place, first in "
                                 << (crossed.empty() ? "" : crossed[0]);
}

// Every collective but all-to-all-v has a two-level form.
TEST(TwoLevelRows, EveryCollectiveButAllToAllVHasOne) {
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                       Collective::AllGather, Collective::ReduceScatter, Collective::Gather,
                       Collective::Scatter, Collective::AllToAll, Collective::Barrier}) {
    EXPECT_NE(algorithms::find_algorithm(c, "hierarchical"), nullptr) << to_string(c);
  }
  // The all-reduce's hierarchical row runs large calls in stripes itself.
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_NE(algorithms::find_algorithm(c, "striped"), nullptr) << to_string(c);
  }
}

// Stripes only where every host holds the same number of ranks, more than one.
TEST(TwoLevelRows, StripesFitHostsOfEqualSize) {
  auto topology = [](std::vector<int> host_of_rank) {
    Topology t;
    t.num_hosts = *std::max_element(host_of_rank.begin(), host_of_rank.end()) + 1;
    t.host_of_rank = std::move(host_of_rank);
    return t;
  };
  EXPECT_TRUE(algorithms::stripes_fit(topology({0, 0, 1, 1})));
  EXPECT_TRUE(algorithms::stripes_fit(topology({0, 1, 2, 0, 1, 2})));
  EXPECT_FALSE(algorithms::stripes_fit(topology({0, 0, 1})));
  EXPECT_FALSE(algorithms::stripes_fit(topology({0, 1, 2})));
  EXPECT_FALSE(algorithms::stripes_fit(topology({0, 0, 0})));
  EXPECT_FALSE(algorithms::stripes_fit(Topology{}));
}

// A rank's host by place, its column by host, and every rank column by column.
TEST(TwoLevelRows, StripeGroupsMatchPlacesAcrossHosts) {
  Topology topology;
  topology.host_of_rank = {0, 1, 1, 0, 2, 2};
  topology.num_hosts = 3;
  const algorithms::StripeGroups groups = algorithms::stripe_groups(topology, 2);
  EXPECT_EQ(groups.host, (std::vector<int>{1, 2}));
  EXPECT_EQ(groups.column, (std::vector<int>{3, 2, 5}));
  EXPECT_EQ(groups.order, (std::vector<int>{0, 1, 4, 3, 2, 5}));
}

// Groups: every rank once, the root leading its host, the others ascending.
TEST(TwoLevelRows, HostGroupsPutTheRootFirstOnItsHost) {
  Topology topology;
  topology.host_of_rank = {0, 1, 0, 1, 2};
  topology.num_hosts = 3;
  const algorithms::HostGroups groups = algorithms::host_groups(topology, 2, 3);
  EXPECT_EQ(groups.hosts, (std::vector<std::vector<int>>{{0, 2}, {3, 1}, {4}}));
  EXPECT_EQ(groups.host, 0);
  EXPECT_EQ(groups.index, 1);
  EXPECT_EQ(groups.leaders(), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(groups.blocks_before(2), 4u);
  EXPECT_EQ(groups.num_ranks(), 5);
}

// On hosts of equal size the striped all-gather and reduce-scatter, and the two-level
// all-reduce from 64 KiB, run in stripes: the ranks of one place on every host exchange their
// stripe, so non-leaders cross hosts, but only to the rank of the same place on another host.
// Odd counts leave uneven blocks (all-reduce) or stripes of odd length.
TEST(TwoLevelRows, StripesCrossHostsOnlyBetweenRanksOfOnePlace) {
  struct Row {
    const algorithms::Algorithm* algorithm;
    std::vector<std::size_t> counts;
  };
  const std::vector<Row> rows = {{&algorithms::rows::allreduce_hierarchical, {20000, 20001}},
                                 {&algorithms::rows::allgather_striped, {1, 1025}},
                                 {&algorithms::rows::reduce_scatter_striped, {1, 1025}}};
  for (const std::vector<int>& layout : {std::vector<int>{0, 0, 1, 1},
                                         {0, 0, 0, 1, 1, 1},
                                         {0, 0, 1, 1, 2, 2},
                                         {0, 0, 0, 0, 1, 1, 1, 1},
                                         {0, 1, 2, 3, 0, 1, 2, 3}}) {
    const int n = static_cast<int>(layout.size());
    for (const Row& row : rows) {
      MemoryFabric fabric(layout);
      std::atomic<int> off_leaders{0}, off_place{0};
      std::mutex mutex;
      std::vector<std::string> wrong;
      auto failures = run_ranks(fabric, [&](transport::Transport& transport, int) {
        CrossHostCounter counted(transport, off_leaders, -1, &off_place);
        for (std::size_t count : row.counts) {
          for (bool in_place : {false, true}) {
            SweepCase c{row.algorithm, n, count, DataType::Float32, ReduceOp::Sum, 0, in_place};
            auto problems = run_sweep_case(algorithms::Context{counted}, c);
            std::lock_guard lock(mutex);
            for (const auto& problem : problems) wrong.push_back(describe(c) + ": " + problem);
          }
        }
      });
      const std::string where =
          std::string(to_string(row.algorithm->collective)) + " on " + std::to_string(n);
      EXPECT_TRUE(failures.empty()) << failures.size() << " ranks threw, first: " << failures[0];
      EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong results, first: " << wrong[0];
      EXPECT_GT(off_leaders.load(), 0) << "no stripes ran: " << where;
      EXPECT_EQ(off_place.load(), 0) << "a stripe crossed to another place: " << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MultiHostSweep, ::testing::Range<std::size_t>(0, kLayouts.size()),
                         [](const auto& info) { return "layout" + std::to_string(info.param); });

// The counter itself must catch a flat algorithm crossing hosts from non-leaders.
TEST(MultiHostSweepCounter, FlatRingCrossesHostsFromNonLeaders) {
  std::vector<int> layout = {0, 0, 1, 1};
  MemoryFabric fabric(layout);
  std::atomic<int> violations{0};
  const algorithms::Algorithm* ring = &algorithms::rows::allreduce_ring;
  auto failures = run_ranks(fabric, [&](transport::Transport& transport, int) {
    CrossHostCounter counted(transport, violations);
    SweepCase c{ring, 4, 1025};
    EXPECT_TRUE(run_sweep_case(algorithms::Context{counted}, c).empty());
  });
  EXPECT_TRUE(failures.empty());
  EXPECT_GT(violations.load(), 0);
}

}  // namespace
}  // namespace chorus::testing
