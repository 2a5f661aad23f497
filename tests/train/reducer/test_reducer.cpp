// The gradient reducer against references computed independently (threads as ranks): the mean
// over a mesh sub-group in fp64 and fp32 at group sizes 1, 2 and 3, a caller's divisor, buckets
// per dtype, and the collectives the ledger records.
#include "reducer_test_util.hpp"

#include <chorus/error.hpp>

namespace chorus::train::reducer_test {
namespace {

struct Layout {
  int world;
  MeshDegrees degrees;
};

/// Layouts whose dp group has 1, 2, 3, 2 and 3 ranks (the last two beside a tp group of 2).
const std::vector<Layout> kLayouts{{1, {.dp = 1}},
                                   {2, {.dp = 2}},
                                   {3, {.dp = 3}},
                                   {4, {.dp = 2, .tp = 2}},
                                   {6, {.dp = 3, .tp = 2}}};

/// The ledger's expected entries for one step: one dp all-reduce per bucket.
std::vector<LedgerEntry> bucket_entries(const GradientReducer& reducer,
                                        const std::vector<at::Tensor>& params, std::size_t wire) {
  std::vector<LedgerEntry> out;
  if (reducer.group().size() == 1) return out;  // a group of one issues nothing
  for (const auto& bucket : reducer.bucket_assignment()) {
    std::size_t elements = 0;
    for (std::size_t k : bucket) elements += static_cast<std::size_t>(params[k].numel());
    out.push_back({reducer.group().name, CollectiveKind::AllReduce, elements * wire});
  }
  return out;
}

/// Two steps of the reducer over the mesh's dp group; every gradient must be the sum over the
/// dp group's members of their local gradients divided by `divisor` (0: the group's size).
void reduce_over_dp(Mesh& mesh, at::ScalarType type, std::int64_t divisor) {
  const Group& dp = mesh.dp();
  const int rank = mesh.world().rank();
  const std::vector<int> members = group_members(mesh.layout(), MeshGroup::Dp, rank);
  const double rtol = type == at::kDouble ? 1e-10 : 1e-5;
  std::vector<at::Tensor> params = make_params({type});
  ReducerOptions options = small_buckets();
  options.divisor = divisor;
  GradientReducer reducer(params, dp, options);
  EXPECT_GT(reducer.bucket_assignment().size(), 2u);
  const double by = static_cast<double>(divisor > 0 ? divisor : dp.size());
  for (int step = 0; step < 2; ++step) {
    reducer.begin_step();
    mark_all(reducer, params, rank, step);
    reducer.finish_step();
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].grad().scalar_type(), type);
      expect_close(params[i].grad().to(at::kDouble), mean_of(params[i], members, i, step, by),
                   "step " + std::to_string(step) + ", parameter " + std::to_string(i), rtol);
    }
    const std::vector<LedgerEntry> got = mesh.ledger()->take();
    const std::vector<LedgerEntry> want = bucket_entries(reducer, params, params[0].element_size());
    EXPECT_EQ(got, want) << "got " << describe(got) << "; expected " << describe(want);
  }
}

TEST(GradientReducer, MeanOverTheGroupInFp64AndFp32) {
  for (const Layout& l : kLayouts) {
    on_mesh(l.world, l.degrees, [](Mesh& mesh) {
      reduce_over_dp(mesh, at::kDouble, 0);
      reduce_over_dp(mesh, at::kFloat, 0);
    });
  }
}

// Expert gradients: summed over the expert-data-parallel group, divided by dp·cp (PARALLEL.md).
TEST(GradientReducer, SumDividedByTheCallersDivisor) {
  on_mesh(4, {.dp = 2, .tp = 2}, [](Mesh& mesh) { reduce_over_dp(mesh, at::kDouble, 4); });
  on_mesh(6, {.dp = 3, .tp = 2}, [](Mesh& mesh) { reduce_over_dp(mesh, at::kDouble, 1); });
}

TEST(GradientReducer, BucketsHoldOneDtype) {
  on_ranks(2, [](const Group& group, int rank) {
    std::vector<at::Tensor> params = make_params({at::kFloat, at::kDouble});
    GradientReducer reducer(params, group, small_buckets());
    std::vector<std::size_t> bytes;
    std::vector<int> kinds;
    for (const at::Tensor& p : params) {
      bytes.push_back(static_cast<std::size_t>(p.numel() * p.element_size()));
      kinds.push_back(static_cast<int>(p.scalar_type()));
    }
    EXPECT_EQ(reducer.bucket_assignment(), assign_buckets(bytes, kinds, 16, 64));
    for (const auto& bucket : reducer.bucket_assignment()) {
      for (std::size_t k : bucket)
        EXPECT_EQ(params[k].scalar_type(), params[bucket[0]].scalar_type());
    }
    reducer.begin_step();
    mark_all(reducer, params, rank, 0);
    reducer.finish_step();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const double rtol = params[i].scalar_type() == at::kDouble ? 1e-10 : 1e-5;
      expect_close(params[i].grad().to(at::kDouble), mean_of(params[i], {0, 1}, i, 0, 2),
                   "parameter " + std::to_string(i), rtol);
    }
  });
}

TEST(AssignBucketsByKind, OneOpenBucketPerKindInWalkOrder) {
  // Walk 5(k1) 4(k0) 3(k1: closes [5, 3]) 2(k0: closes [4, 2]) 1(k1) 0(k0).
  EXPECT_EQ(assign_buckets({4, 4, 4, 4, 4, 4}, {0, 1, 0, 1, 0, 1}, 8, 8),
            (std::vector<std::vector<std::size_t>>{{5, 3}, {4, 2}, {1}, {0}}));
  // Each kind's first bucket closes at first_cap, its later ones at cap.
  EXPECT_EQ(assign_buckets({4, 4, 4, 4, 4, 4}, {0, 1, 0, 1, 0, 1}, 4, 8),
            (std::vector<std::vector<std::size_t>>{{5}, {4}, {3, 1}, {2, 0}}));
  const std::vector<std::size_t> sizes{12, 3, 40, 7, 7, 1, 90, 5};
  EXPECT_EQ(assign_buckets(sizes, std::vector<int>(sizes.size(), 3), 10, 30),
            assign_buckets(sizes, 10, 30));
  EXPECT_THROW(assign_buckets({4, 4}, {0}, 8, 8), Error);
}

}  // namespace
}  // namespace chorus::train::reducer_test
