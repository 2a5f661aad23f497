// The mesh's pure rank arithmetic (mesh_layout.hpp) and the ledger's bookkeeping.
#include <chorus/error.hpp>
#include <chorus/train/ledger.hpp>
#include <chorus/train/mesh_layout.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace chorus::train {
namespace {

std::string error_of(int world, const MeshDegrees& degrees) {
  try {
    make_layout(world, degrees);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    return e.what();
  }
  return "(accepted)";
}

TEST(MeshLayout, BadLayoutsAreSentencesNamingTheNumbers) {
  EXPECT_EQ(error_of(8, {.pp = 2, .dp = 3, .tp = 2}),
            "mesh: world 8 != pp·dp·cp·tp = 12 (pp 2, dp 3, cp 1, tp 2, ep 1)");
  EXPECT_EQ(error_of(6, {.tp = 4}),
            "mesh: world 6 is not a multiple of pp·cp·tp = 4 (pp 1, dp 0, cp 1, tp 4, ep 1)");
  EXPECT_EQ(error_of(8, {.dp = 2, .cp = 2, .tp = 2, .ep = 3}),
            "mesh: ep 3 does not divide dp·cp = 4 (dp 2, cp 2)");
  EXPECT_EQ(error_of(4, {.pp = 0}),
            "mesh: every degree must be at least 1 (dp 0: derived from the world), got pp 0, dp "
            "0, cp 1, tp 1, ep 1");
  EXPECT_NE(error_of(4, {.dp = -1}), "(accepted)");
  EXPECT_NE(error_of(4, {.ep = 0}), "(accepted)");
  EXPECT_EQ(error_of(0, {}), "mesh: the world has 0 ranks");
}

TEST(MeshLayout, DpIsWhatTheWorldLeaves) {
  EXPECT_EQ(make_layout(12, {.pp = 3, .tp = 2}), (MeshLayout{3, 2, 1, 2, 1}));
  EXPECT_EQ(make_layout(8, {.dp = 2, .cp = 2, .tp = 2, .ep = 4}), (MeshLayout{1, 2, 2, 2, 4}));
  EXPECT_EQ(make_layout(1, {}), (MeshLayout{1, 1, 1, 1, 1}));
}

TEST(MeshLayout, PipelineSlowestTensorFastest) {
  const MeshLayout l = make_layout(24, {.pp = 2, .dp = 3, .cp = 2, .tp = 2});
  // 23 = ((1·3 + 2)·2 + 1)·2 + 1.
  EXPECT_EQ(coordinates_of(l, 23), (MeshCoordinates{1, 2, 1, 1}));
  EXPECT_EQ(coordinates_of(l, 1), (MeshCoordinates{0, 0, 0, 1}));
  EXPECT_EQ(coordinates_of(l, 2), (MeshCoordinates{0, 0, 1, 0}));
  EXPECT_EQ(coordinates_of(l, 4), (MeshCoordinates{0, 1, 0, 0}));
  EXPECT_EQ(coordinates_of(l, 12), (MeshCoordinates{1, 0, 0, 0}));
  for (int r = 0; r < l.world(); ++r) EXPECT_EQ(rank_of(l, coordinates_of(l, r)), r);
  EXPECT_THROW(coordinates_of(l, 24), Error);
  EXPECT_THROW(rank_of(l, {0, 3, 0, 0}), Error);
}

// Megatron's groups for tp 2, dp 4, ep 2 on 8 ranks (its tp-ep-dp order for experts).
TEST(MeshLayout, ExpertGroupsFollowMegatron) {
  const MeshLayout l = make_layout(8, {.tp = 2, .ep = 2});
  EXPECT_EQ(group_members(l, MeshGroup::Tp, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_members(l, MeshGroup::Dp, 5), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(group_members(l, MeshGroup::Expert, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(group_members(l, MeshGroup::Expert, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(group_members(l, MeshGroup::ExpertData, 0), (std::vector<int>{0, 4}));
  EXPECT_EQ(group_members(l, MeshGroup::ExpertData, 3), (std::vector<int>{3, 7}));
  // cp is faster than dp inside dp_cp: index j = dp·cp_degree + cp.
  const MeshLayout c = make_layout(8, {.dp = 2, .cp = 2, .tp = 2, .ep = 2});
  EXPECT_EQ(group_members(c, MeshGroup::Cp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(group_members(c, MeshGroup::DataContext, 1), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(group_members(c, MeshGroup::Expert, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(group_members(c, MeshGroup::ExpertData, 2), (std::vector<int>{2, 6}));
}

TEST(MeshLayout, EmbeddingGroupIsFirstAndLastStage) {
  const MeshLayout l = make_layout(8, {.pp = 4, .tp = 2});
  EXPECT_EQ(group_members(l, MeshGroup::Embedding, 1), (std::vector<int>{1, 7}));
  EXPECT_EQ(group_members(l, MeshGroup::Embedding, 6), (std::vector<int>{0, 6}));
  EXPECT_TRUE(group_members(l, MeshGroup::Embedding, 3).empty());
  EXPECT_EQ(group_members(make_layout(2, {}), MeshGroup::Embedding, 1), (std::vector<int>{1}));
}

/// The coordinates a group of `kind` may vary (the others are shared by all members).
bool varies_only_allowed_axes(MeshGroup kind, const MeshCoordinates& a, const MeshCoordinates& b) {
  const bool pp = a.pp != b.pp, dp = a.dp != b.dp, cp = a.cp != b.cp, tp = a.tp != b.tp;
  switch (kind) {
    case MeshGroup::Tp:
      return !pp && !dp && !cp;
    case MeshGroup::Cp:
      return !pp && !dp && !tp;
    case MeshGroup::Dp:
      return !pp && !cp && !tp;
    case MeshGroup::Pp:
    case MeshGroup::Embedding:
      return !dp && !cp && !tp;
    default:
      return !pp && !tp;
  }
}

// Every kind partitions the world (embedding: the first and last stages) into groups of the
// layout's size that every member computes alike, varying only the group's own axes.
TEST(MeshLayout, GroupsPartitionTheWorldConsistently) {
  const std::vector<std::pair<int, MeshDegrees>> layouts = {
      {1, {}},
      {6, {.pp = 3, .tp = 2}},
      {12, {.dp = 3, .cp = 2, .tp = 2, .ep = 3}},
      {24, {.pp = 2, .dp = 2, .cp = 3, .tp = 2, .ep = 6}},
      {16, {.pp = 2, .dp = 2, .cp = 2, .tp = 2, .ep = 2}}};
  for (const auto& [world, degrees] : layouts) {
    const MeshLayout l = make_layout(world, degrees);
    for (MeshGroup kind : kMeshGroups) {
      std::multiset<int> covered;
      for (int r = 0; r < world; ++r) {
        const std::vector<int> members = group_members(l, kind, r);
        if (members.empty()) continue;
        ASSERT_EQ(static_cast<int>(members.size()), l.size(kind)) << to_string(kind);
        EXPECT_EQ(std::count(members.begin(), members.end(), r), 1) << to_string(kind);
        for (int m : members) {
          EXPECT_EQ(group_members(l, kind, m), members) << to_string(kind) << " rank " << r;
          EXPECT_TRUE(varies_only_allowed_axes(kind, coordinates_of(l, r), coordinates_of(l, m)));
        }
        covered.insert(r);
      }
      const int expected = kind == MeshGroup::Embedding ? (l.pp > 1 ? 2 : 1) * world / l.pp : world;
      EXPECT_EQ(static_cast<int>(covered.size()), expected) << to_string(kind);
    }
  }
}

TEST(CollectiveLedger, RecordsOnlyWhileEnabled) {
  CollectiveLedger ledger;
  ledger.record("tp", CollectiveKind::AllReduce, 8);
  EXPECT_TRUE(ledger.entries().empty());
  ledger.enable();
  ledger.record("tp", CollectiveKind::AllReduce, 8);
  ledger.record("dp", CollectiveKind::AllGather, 32);
  ledger.record("tp", CollectiveKind::AllReduce, 16);
  ledger.disable();
  ledger.record("tp", CollectiveKind::AllReduce, 8);
  EXPECT_EQ(describe(ledger.entries()),
            "tp all_reduce 8 B; dp all_gather 32 B; tp all_reduce 16 B");
  const LedgerTotals totals = ledger.totals();
  EXPECT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals.at({"tp", CollectiveKind::AllReduce}), (LedgerTotal{2, 24}));
  EXPECT_EQ(totals.at({"dp", CollectiveKind::AllGather}), (LedgerTotal{1, 32}));
  EXPECT_EQ(ledger.take().size(), 3u);
  EXPECT_EQ(describe(ledger.entries()), "(none)");
}

}  // namespace
}  // namespace chorus::train
