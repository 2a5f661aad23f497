// The rank arithmetic of the newer algorithms (k-nomial trees, Bruck, recursive
// halving, block owners, host groups), checked by simulating each pattern's
// bookkeeping for every rank count up to 17.
#include "algorithms/patterns/binomial_tree.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/bruck.hpp"
#include "algorithms/patterns/hierarchy.hpp"
#include "algorithms/patterns/knomial_tree.hpp"
#include "algorithms/patterns/recursive_halving.hpp"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace chorus::algorithms::patterns {
namespace {

constexpr int kMaxRanks = 17;

// Relative ranks reached from v through children, v included.
std::set<int> subtree(int rank, int root, int n, int radix) {
  std::set<int> members = {wrap(rank - root, n)};
  for (int child : knomial_children(rank, root, n, radix)) {
    EXPECT_EQ(knomial_parent(child, root, n, radix), rank);
    for (int v : subtree(child, root, n, radix)) EXPECT_TRUE(members.insert(v).second);
  }
  return members;
}

TEST(KnomialPattern, TreesSpanEveryRankWithContiguousSubtrees) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int radix = 2; radix <= 5; ++radix) {
      for (int root = 0; root < n; ++root) {
        ASSERT_EQ(knomial_parent(root, root, n, radix), -1);
        for (int rank = 0; rank < n; ++rank) {
          std::set<int> members = subtree(rank, root, n, radix);
          int v = wrap(rank - root, n);
          int size = std::min(knomial_span(v, n, radix), n - v);
          ASSERT_EQ(static_cast<int>(members.size()), size) << n << " " << radix << " " << rank;
          EXPECT_EQ(*members.begin(), v);
          EXPECT_EQ(*members.rbegin(), v + size - 1);
          int depth = 0;
          for (int up = rank; up != root; up = knomial_parent(up, root, n, radix)) ++depth;
          EXPECT_LE(depth, knomial_depth(n, radix));
        }
      }
    }
  }
}

TEST(KnomialPattern, RadixTwoIsTheBinomialTree) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_EQ(knomial_parent(rank, 2 % n, n, 2), binomial_parent(rank, 2 % n, n));
      EXPECT_EQ(knomial_children(rank, 2 % n, n, 2), binomial_children(rank, 2 % n, n));
    }
  }
  EXPECT_EQ(knomial_depth(16, 4), 2);
  EXPECT_EQ(knomial_depth(17, 4), 3);
  EXPECT_EQ(knomial_children(0, 0, 8, 4), (std::vector<int>{1, 2, 3, 4}));
}

// Slot i of rank r must end holding rank r + i's block.
TEST(BruckPattern, AllGatherFillsEverySlotWithTheRightBlock) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<std::vector<int>> slots(n);
    for (int r = 0; r < n; ++r) slots[r] = {r};
    for (int round = 0; round < bruck_rounds(n); ++round) {
      auto next = slots;
      for (int r = 0; r < n; ++r) {
        auto step = bruck_allgather_round(r, n, round);
        int from = step.partners.recv_from;
        ASSERT_EQ(bruck_allgather_round(from, n, round).partners.send_to, r);
        ASSERT_EQ(static_cast<int>(slots[r].size()), 1 << round);
        for (int j = 0; j < step.blocks; ++j) next[r].push_back(slots[from][j]);
      }
      slots = std::move(next);
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(static_cast<int>(slots[r].size()), n);
      for (int i = 0; i < n; ++i) EXPECT_EQ(slots[r][i], wrap(r + i, n));
    }
  }
}

// Every (source, destination) block must reach its destination, in slot r - source.
TEST(BruckPattern, AllToAllDeliversEveryBlock) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    using Block = std::pair<int, int>;  // (source, destination)
    std::vector<std::vector<Block>> slots(n, std::vector<Block>(n));
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < n; ++i) slots[r][i] = {r, wrap(r + i, n)};
    }
    for (int round = 0; round < bruck_rounds(n); ++round) {
      auto next = slots;
      for (int r = 0; r < n; ++r) {
        auto peers = bruck_alltoall_partners(r, n, round);
        ASSERT_EQ(bruck_alltoall_partners(peers.send_to, n, round).recv_from, r);
        for (int i : bruck_alltoall_slots(n, round)) next[peers.send_to][i] = slots[r][i];
      }
      slots = std::move(next);
    }
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < n; ++i) EXPECT_EQ(slots[r][i], Block(wrap(r - i, n), r));
    }
  }
}

// After log2 p rounds core rank r holds group r with every rank's contribution.
TEST(RecursiveHalvingPattern, EachRankEndsWithItsGroupFullyReduced) {
  for (int p = 1; p <= 16; p *= 2) {
    std::vector<std::vector<std::set<int>>> held(p, std::vector<std::set<int>>(p));
    for (int r = 0; r < p; ++r) {
      for (int g = 0; g < p; ++g) held[r][g] = {r};
    }
    for (int round = 0; (p >> round) > 1; ++round) {
      auto next = held;
      for (int r = 0; r < p; ++r) {
        auto step = recursive_halving_step(r, p, round);
        auto theirs = recursive_halving_step(step.partner, p, round);
        ASSERT_EQ(theirs.partner, r);
        ASSERT_EQ(theirs.send_first, step.keep_first);
        ASSERT_EQ(theirs.half, step.half);
        for (int g = step.keep_first; g < step.keep_first + step.half; ++g) {
          next[r][g].insert(held[step.partner][g].begin(), held[step.partner][g].end());
        }
      }
      held = std::move(next);
    }
    for (int r = 0; r < p; ++r) EXPECT_EQ(static_cast<int>(held[r][r].size()), p);
  }
}

TEST(BlocksPattern, BlockOwnerFindsTheBlockHoldingAnElement) {
  for (std::size_t total = 1; total <= 40; ++total) {
    for (int parts = 1; parts <= 9; ++parts) {
      for (std::size_t e = 0; e < total; ++e) {
        Block b = block_of(total, parts, block_owner(total, parts, e));
        EXPECT_TRUE(b.offset <= e && e < b.offset + b.count) << total << " " << parts << " " << e;
      }
    }
  }
}

TEST(HierarchyPattern, MembersAndLeadersFollowTheTopology) {
  Topology topology{{0, 1, 0, 2, 1, 0}, 3};
  EXPECT_EQ(host_members(topology, 0), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(host_members(topology, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(host_members(topology, 2), (std::vector<int>{3}));
  EXPECT_EQ(host_leaders(topology), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(max_ranks_per_host(topology), 3);
}

}  // namespace
}  // namespace chorus::algorithms::patterns
