// Sub-communicators and non-blocking requests.
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

class Split : public ::testing::TestWithParam<std::string> {};

TEST_P(Split, EvenOddGroupsOrderedByKeyAndNegativeColorOptsOut) {
  ThreadJob job(5, {.transport = GetParam()});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const int r = world.rank();
    // Rank 4 opts out; keys reverse the order inside each group.
    Communicator sub = world.split(r == 4 ? -1 : r % 2, -r);
    if (r == 4) {
      EXPECT_FALSE(sub);
    } else {
      ASSERT_TRUE(sub);
      const int members = r % 2 == 0 ? 2 : 2;  // {0,2} and {1,3}
      EXPECT_EQ(sub.size(), members);
      EXPECT_EQ(sub.rank(), (r < 2) ? 1 : 0);  // larger parent rank has the smaller key
      int v = r;
      sub.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum);
      EXPECT_EQ(v, r % 2 == 0 ? 0 + 2 : 1 + 3);
    }
    // The parent keeps working alongside its children.
    int w = 1;
    world.all_reduce(&w, &w, 1, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(w, 5);
  });
}

TEST_P(Split, NestedSplitsAndAbortingAChildLeavesTheParentUsable) {
  ThreadJob job(4, {.transport = GetParam()});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    Communicator half = world.split(world.rank() / 2, world.rank());
    Communicator single = half.split(half.rank(), 0);
    EXPECT_EQ(single.size(), 1);
    int v = 7;
    single.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Prod);
    EXPECT_EQ(v, 7);
    world.barrier();  // every rank is done with `half` before one of them aborts it
    half.abort();
    int w = world.rank();
    world.all_reduce(&w, &w, 1, DataType::Int32, ReduceOp::Max);
    EXPECT_EQ(w, 3);
  });
}

TEST_P(Split, NamedSplitsCarryTheirNameAndBadNamesAreRefusedFirst) {
  ThreadJob job(4, {.transport = GetParam()});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    EXPECT_EQ(world.name(), "world");
    Communicator plain = world.split(world.rank() % 2, 0);
    EXPECT_EQ(plain.name(), "world.split1.color" + std::to_string(world.rank() % 2));
    // A bad name fails on every rank before the split's all-gather: nothing is left waiting.
    for (const std::string bad : {"t/p", "a b", "x.y", "abcdefghijklmnopqrstuvwxyz0123456"}) {
      try {
        world.split(0, 0, bad);
        ADD_FAILURE() << "split accepted the name " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      }
    }
    Communicator tp = world.split(world.rank() / 2, world.rank(), "tp");
    EXPECT_EQ(tp.name(), "world.split2.color" + std::to_string(world.rank() / 2) + ".tp");
    Communicator nested = tp.split(0, 0, "tp_all-1");
    EXPECT_EQ(nested.name(), tp.name() + ".split1.color0.tp_all-1");
    int v = 1;
    nested.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(v, 2);
    EXPECT_THROW(Communicator().name(), Error);
  });
}

TEST_P(Split, RequestsTestAndWaitFor) {
  ThreadJob job(3, {.transport = GetParam()});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    std::vector<float> big(1 << 16, 1.0f);
    Request r = c.iall_reduce(big.data(), big.data(), big.size(), DataType::Float32, ReduceOp::Sum);
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!r.test()) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "test() never reported completion";
      std::this_thread::sleep_for(100us);
    }
    EXPECT_EQ(big[12345], 3.0f);
    Request b = c.ibarrier();
    EXPECT_TRUE(b.wait_for(20s));
    Request empty;
    EXPECT_THROW(empty.wait(), Error);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, Split, ::testing::Values("auto", "tcp"));

}  // namespace
}  // namespace chorus::testing
