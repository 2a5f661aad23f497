// The pure rank arithmetic of src/algorithms/patterns/, checked by simulating
// each pattern's bookkeeping for every rank count up to 17.
#include "algorithms/patterns/binomial_tree.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/dissemination.hpp"
#include "algorithms/patterns/pairwise.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "algorithms/patterns/ring.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace chorus::algorithms::patterns {
namespace {

constexpr int kMaxRanks = 17;

TEST(RingPattern, NeighboursWrapAround) {
  EXPECT_EQ(ring_next(3, 4), 0);
  EXPECT_EQ(ring_prev(0, 4), 3);
  EXPECT_EQ(ring_next(0, 1), 0);
  EXPECT_EQ(wrap(-7, 3), 2);
}

// Each step pairs a receive with the predecessor's send; block b visits every
// rank once and ends at rank b with all n contributions.
TEST(RingPattern, ReduceScatterStepsEndWithOwnBlockFullyReduced) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    std::vector<std::set<int>> partial(n);  // contributors of the partial sum each rank sends
    for (int r = 0; r < n; ++r) partial[r] = {r};
    for (int step = 0; step < n - 1; ++step) {
      std::vector<std::set<int>> next(n);
      for (int r = 0; r < n; ++r) {
        int prev = ring_prev(r, n);
        ASSERT_EQ(reduce_scatter_step(r, n, step).recv_block,
                  reduce_scatter_step(prev, n, step).send_block);
        next[r] = partial[prev];
        next[r].insert(r);
        if (step > 0) {
          ASSERT_EQ(reduce_scatter_step(r, n, step).send_block,
                    reduce_scatter_step(r, n, step - 1).recv_block);
        }
      }
      partial = next;
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(reduce_scatter_step(r, n, n - 2).recv_block, r) << n;
      EXPECT_EQ(partial[r].size(), static_cast<std::size_t>(n)) << n;
    }
  }
}

TEST(RingPattern, AllGatherStepsDeliverEveryBlock) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    for (int r = 0; r < n; ++r) {
      std::set<int> have = {r};
      for (int step = 0; step < n - 1; ++step) {
        auto s = allgather_step(r, n, step);
        EXPECT_TRUE(have.count(s.send_block)) << "rank " << r << " forwards a block it lacks";
        EXPECT_EQ(s.recv_block, allgather_step(ring_prev(r, n), n, step).send_block);
        have.insert(s.recv_block);
      }
      EXPECT_EQ(have.size(), static_cast<std::size_t>(n));
    }
  }
}

TEST(RingPattern, ChainVisitsEveryRankFromTheRoot) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int root = 0; root < n; ++root) {
      EXPECT_EQ(chain_links(root, root, n).prev, -1);
      int at = root, visited = 1;
      while (chain_links(at, root, n).next >= 0) {
        int next = chain_links(at, root, n).next;
        EXPECT_EQ(chain_links(next, root, n).prev, at);
        at = next;
        ++visited;
      }
      EXPECT_EQ(visited, n);
    }
  }
}

TEST(BinomialTreePattern, ParentsAndChildrenAgreeAndEveryRankReachesTheRoot) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const int depth_limit = std::bit_width(static_cast<unsigned>(n - 1));  // ceil(log2 n)
    for (int root = 0; root < n; ++root) {
      EXPECT_EQ(binomial_parent(root, root, n), -1);
      for (int r = 0; r < n; ++r) {
        for (int child : binomial_children(r, root, n))
          EXPECT_EQ(binomial_parent(child, root, n), r);
        int depth = 0;
        for (int at = r; at != root; at = binomial_parent(at, root, n))
          ASSERT_LE(++depth, depth_limit);
      }
    }
  }
}

// Subtrees are contiguous relative ranges: own rank first, then each child's
// subtree at offset (child - rank), at offsets 1, 2, 4, ... (subtree spans
// grow; the last subtree may be clipped by n).
TEST(BinomialTreePattern, SubtreesTileContiguousRelativeRanges) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int root = 0; root < n; ++root) {
      EXPECT_EQ(binomial_subtree_size(root, root, n), n);
      for (int r = 0; r < n; ++r) {
        int v = relative_rank(r, root, n), covered = 1, offset = 1;
        for (int child : binomial_children(r, root, n)) {
          EXPECT_EQ(relative_rank(child, root, n), v + covered);
          EXPECT_EQ(relative_rank(child, root, n), v + offset);
          covered += binomial_subtree_size(child, root, n);
          offset *= 2;
        }
        EXPECT_EQ(covered, binomial_subtree_size(r, root, n));
        EXPECT_EQ(absolute_rank(v, root, n), r);
      }
    }
  }
}

TEST(DisseminationPattern, RoundsAreCeilLog2) {
  const int expected[] = {0, 0, 1, 2, 2, 3, 3, 3, 3, 4};
  for (int n = 1; n <= 9; ++n) EXPECT_EQ(dissemination_rounds(n), expected[n]) << n;
}

TEST(DisseminationPattern, EveryRankHearsFromEveryOther) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<std::set<int>> heard(n);
    for (int r = 0; r < n; ++r) heard[r] = {r};
    for (int round = 0; round < dissemination_rounds(n); ++round) {
      auto before = heard;
      for (int r = 0; r < n; ++r) {
        auto p = dissemination_partners(r, n, round);
        EXPECT_EQ(dissemination_partners(p.recv_from, n, round).send_to, r);
        heard[r].insert(before[p.recv_from].begin(), before[p.recv_from].end());
      }
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(heard[r].size(), static_cast<std::size_t>(n)) << n;
  }
}

TEST(PairwisePattern, EveryOrderedPairMeetsOnce) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::set<std::pair<int, int>> pairs;
    for (int step = 1; step < n; ++step) {
      for (int r = 0; r < n; ++r) {
        auto p = pairwise_partners(r, n, step);
        EXPECT_EQ(pairwise_partners(p.recv_from, n, step).send_to, r);
        EXPECT_NE(p.send_to, r);
        EXPECT_TRUE(pairs.insert({r, p.send_to}).second);
      }
    }
    EXPECT_EQ(pairs.size(), static_cast<std::size_t>(n * (n - 1)));
  }
}

TEST(RecursiveDoublingPattern, CoreIsTheLargestPowerOfTwoAndFoldsPair) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const int core = recursive_doubling(0, n).core_size;
    EXPECT_TRUE(std::has_single_bit(static_cast<unsigned>(core)));
    EXPECT_LE(core, n);
    EXPECT_GT(2 * core, n);
    for (int r = 0; r < n; ++r) {
      auto plan = recursive_doubling(r, n);
      EXPECT_EQ(plan.is_extra, r >= core);
      EXPECT_EQ(plan.fold_partner >= 0, plan.is_extra || r + core < n);
      if (plan.fold_partner >= 0) {
        EXPECT_EQ(recursive_doubling(plan.fold_partner, n).fold_partner, r);
      }
    }
  }
}

// Simulates the all-reduce bookkeeping: fold in, exchange rounds, fold out.
TEST(RecursiveDoublingPattern, EveryRankEndsWithEveryContribution) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const auto first = recursive_doubling(0, n);
    std::vector<std::set<int>> has(n);
    for (int r = 0; r < n; ++r) has[r] = {r};
    for (int r = first.core_size; r < n; ++r) has[recursive_doubling(r, n).fold_partner].insert(r);
    for (int round = 0; round < first.rounds; ++round) {
      auto before = has;
      for (int r = 0; r < first.core_size; ++r) {
        int partner = recursive_doubling_partner(r, round);
        ASSERT_LT(partner, first.core_size);
        has[r].insert(before[partner].begin(), before[partner].end());
        EXPECT_EQ(recursive_doubling_group_start(r, round + 1),
                  std::min(recursive_doubling_group_start(r, round),
                           recursive_doubling_group_start(partner, round)));
      }
    }
    for (int r = first.core_size; r < n; ++r) has[r] = has[recursive_doubling(r, n).fold_partner];
    for (int r = 0; r < n; ++r) EXPECT_EQ(has[r].size(), static_cast<std::size_t>(n)) << n;
  }
}

TEST(BlocksPattern, BlocksTileTheBufferAndDifferByAtMostOne) {
  for (std::size_t total : {0, 1, 2, 7, 8, 9, 1025}) {
    for (int parts = 1; parts <= kMaxRanks; ++parts) {
      std::size_t next = 0, smallest = total, largest = 0;
      for (int i = 0; i < parts; ++i) {
        Block b = block_of(total, parts, i);
        EXPECT_EQ(b.offset, next);
        next += b.count;
        smallest = std::min(smallest, b.count);
        largest = std::max(largest, b.count);
      }
      EXPECT_EQ(next, total);
      EXPECT_LE(largest - smallest, 1u);
      EXPECT_EQ(block_of(total, parts, 0).count, largest);
    }
  }
}

TEST(BlocksPattern, PipelineChunksAreClampedWholeElements) {
  EXPECT_EQ(pipeline_chunk_elements(1, 8), kMinChunkBytes / 8);
  EXPECT_EQ(pipeline_chunk_elements(1025, 1), kMinChunkBytes);  // two chunks
  EXPECT_EQ(pipeline_chunk_elements(8 * 4096, 4), 4096u);       // an eighth
  EXPECT_EQ(pipeline_chunk_elements(std::size_t{1} << 30, 1), kMaxChunkBytes);
  for (std::size_t size : {1, 2, 4, 8}) EXPECT_GE(pipeline_chunk_elements(3, size), 1u);
}

}  // namespace
}  // namespace chorus::algorithms::patterns
