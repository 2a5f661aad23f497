// Names of dtypes, ops, collectives and fingerprints as they appear in messages.
#include "core/collective.hpp"

#include <chorus/types.hpp>

#include <gtest/gtest.h>

namespace chorus {
namespace {

TEST(Names, DtypesRoundTripAndAliasesParse) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    DataType parsed;
    auto dtype = static_cast<DataType>(i);
    ASSERT_TRUE(parse_dtype(to_string(dtype), &parsed));
    EXPECT_EQ(parsed, dtype);
  }
  DataType t;
  EXPECT_TRUE(parse_dtype("bf16", &t));
  EXPECT_EQ(t, DataType::Bfloat16);
  EXPECT_FALSE(parse_dtype("complex64", &t));
  EXPECT_EQ(dtype_size(DataType::Bfloat16), 2u);
  EXPECT_EQ(dtype_size(static_cast<DataType>(99)), 0u);
  EXPECT_FALSE(is_valid(static_cast<DataType>(-1)));
}

TEST(Names, OpsAndCollectivesRoundTrip) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    ReduceOp op;
    ASSERT_TRUE(parse_reduce_op(to_string(static_cast<ReduceOp>(i)), &op));
    EXPECT_EQ(static_cast<int>(op), i);
  }
  for (int i = 0; i < kNumCollectives; ++i) {
    Collective c;
    ASSERT_TRUE(parse_collective(to_string(static_cast<Collective>(i)), &c));
    EXPECT_EQ(static_cast<int>(c), i);
  }
  EXPECT_EQ(to_string(Status::Mismatch), "mismatch");
}

TEST(Fingerprint, MatchRulesAndDescription) {
  Fingerprint a{.seq = 3,
                .count = 4,
                .root = -1,
                .collective = Collective::AllReduce,
                .dtype = static_cast<std::uint8_t>(DataType::Float32),
                .op = 0};
  Fingerprint b = a;
  EXPECT_TRUE(fingerprints_match(a, b));
  b.collective = Collective::Broadcast;
  b.root = 0;
  EXPECT_FALSE(fingerprints_match(a, b));
  EXPECT_EQ(describe(a), "allreduce #3 (count 4, float32, sum)");
  EXPECT_EQ(describe(b), "broadcast #3 (count 4, float32, root 0)");
  Fingerprint send = a, recv = a;
  send.collective = Collective::Send;
  recv.collective = Collective::Recv;
  EXPECT_TRUE(fingerprints_match(recv, send));
  EXPECT_FALSE(fingerprints_match(recv, a));
  Fingerprint barrier{.seq = 9, .collective = Collective::Barrier};
  EXPECT_EQ(describe(barrier), "barrier #9");
}

}  // namespace
}  // namespace chorus
