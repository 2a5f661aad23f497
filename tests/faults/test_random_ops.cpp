// The checker behind chorus-faults and chorus-soak: every kind of random call comes out
// right on threads-as-ranks, and the checker does report wrong data (ranks that disagree
// on the moved values see errors).
#include "random_ops.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <atomic>

namespace chorus::faults {
namespace {

TEST(RandomOps, EveryKindIsRightOnThreeRanks) {
  testing::ThreadJob job(3);
  ASSERT_TRUE(job.ok());
  std::atomic<std::size_t> wrong{0};
  job.run([&](Communicator& comm) {
    for (int kind = 0; kind < kNumOpKinds; ++kind) {
      for (DataType dtype : {DataType::Int8, DataType::Float16, DataType::Float64}) {
        OpSpec spec;
        spec.kind = static_cast<OpKind>(kind);
        spec.count = 37;
        spec.dtype = dtype;
        spec.op = ReduceOp::Max;
        spec.root_draw = 2;
        spec.in_place = dtype == DataType::Float16;
        wrong += run_checked(comm, spec);
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0u);
}

TEST(RandomOps, TheCheckerSeesWrongData) {
  testing::ThreadJob job(3);
  ASSERT_TRUE(job.ok());
  std::atomic<std::size_t> wrong_broadcast{0}, wrong_allgather{0};
  job.run([&](Communicator& comm) {
    OpSpec spec;
    spec.count = 10;
    spec.salt = static_cast<std::uint32_t>(comm.rank());  // each rank expects other values
    spec.kind = OpKind::Broadcast;
    wrong_broadcast += run_checked(comm, spec);
    spec.kind = OpKind::AllGather;
    wrong_allgather += run_checked(comm, spec);
  });
  EXPECT_EQ(wrong_broadcast.load(), 2u * 10u);       // the two non-roots, every element
  EXPECT_EQ(wrong_allgather.load(), 3u * 2u * 10u);  // every rank, the two other blocks
}

}  // namespace
}  // namespace chorus::faults
