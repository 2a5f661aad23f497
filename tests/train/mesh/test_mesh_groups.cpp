// The mesh's groups on real communicators (threads as ranks): each group has the members the
// pure layout computes, in its order, carries its name, and a collective on it reaches exactly
// those ranks. Bad layouts fail on every rank before any split.
#include <chorus/train/mesh.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus::train {
namespace {

using chorus::testing::ThreadJob;

struct Case {
  int world;
  MeshDegrees degrees;
  bool embedding;
};

std::string label(const Case& c) {
  const MeshDegrees& d = c.degrees;
  return "world" + std::to_string(c.world) + "_pp" + std::to_string(d.pp) + "_dp" +
         std::to_string(d.dp) + "_cp" + std::to_string(d.cp) + "_tp" + std::to_string(d.tp) +
         "_ep" + std::to_string(d.ep) + (c.embedding ? "_emb" : "");
}

class MeshGroups : public ::testing::TestWithParam<Case> {};

TEST_P(MeshGroups, EachGroupReachesExactlyItsMembers) {
  const Case c = GetParam();
  ThreadJob job(c.world);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    Mesh mesh(world, {.degrees = c.degrees, .embedding_group = c.embedding});
    const int rank = world.rank();
    EXPECT_EQ(mesh.coordinates(), coordinates_of(mesh.layout(), rank));
    for (MeshGroup kind : kMeshGroups) {
      const std::vector<int> members = group_members(mesh.layout(), kind, rank);
      if (kind == MeshGroup::Embedding && (!c.embedding || members.empty())) {
        EXPECT_THROW(mesh.group(kind), Error);
        continue;
      }
      const Group& g = mesh.group(kind);
      const std::string name(to_string(kind));
      EXPECT_EQ(g.name, name);
      EXPECT_TRUE(g.comm.name().ends_with("." + name)) << g.comm.name();
      ASSERT_EQ(g.size(), static_cast<int>(members.size())) << name;
      EXPECT_EQ(members[g.rank()], rank) << name;
      std::vector<int> reached(members.size(), -1);
      Communicator comm = g.comm;
      comm.all_gather(&rank, reached.data(), 1, DataType::Int32);
      EXPECT_EQ(reached, members) << name << " on rank " << rank;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MeshGroups,
    ::testing::Values(Case{1, {}, true}, Case{2, {.tp = 2}, false}, Case{2, {.pp = 2}, true},
                      Case{2, {.cp = 2, .ep = 2}, false}, Case{3, {.tp = 3}, false},
                      Case{3, {.pp = 3}, true}, Case{3, {.ep = 3}, false},
                      Case{4, {.pp = 2, .tp = 2}, true},
                      Case{4, {.dp = 2, .cp = 2, .ep = 2}, false}, Case{4, {.pp = 4}, true},
                      Case{8, {.pp = 2, .dp = 2, .tp = 2, .ep = 2}, true},
                      Case{8, {.dp = 2, .cp = 2, .tp = 2, .ep = 4}, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return label(info.param); });

TEST(MeshGroups, BadLayoutFailsOnEveryRankBeforeAnySplit) {
  ThreadJob job(4);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    try {
      Mesh mesh(world, {.degrees = {.dp = 2, .tp = 3}});
      ADD_FAILURE() << "the mesh accepted 4 ranks as dp 2 × tp 3";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "mesh: world 4 != pp·dp·cp·tp = 6 (pp 1, dp 2, cp 1, tp 3, ep 1)");
    }
    // Nothing was left half-issued: the world still runs collectives in step.
    int v = 1;
    world.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(v, 4);
  });
}

}  // namespace
}  // namespace chorus::train
