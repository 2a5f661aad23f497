// Reductions through the public C++ API over real transports, threads as ranks:
// every dtype x op (avg included) x count x in-place, every root, checked
// against references computed independently in double (reference.hpp).
#include "reduction_checks.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace chorus::testing {
namespace {

constexpr std::size_t kCounts[] = {0, 1, 7, 1031};

void all_reduce_case(Communicator& c, DataType t, ReduceOp op, std::size_t count, bool in_place) {
  auto send = make_input(c.rank(), count, t, op);
  std::vector<unsigned char> recv(send.size(), 0xAB);
  if (in_place) {
    c.all_reduce(send.data(), send.data(), count, t, op);
    recv = send;
  } else {
    c.all_reduce(send.data(), recv.data(), count, t, op);
    EXPECT_EQ(send, make_input(c.rank(), count, t, op)) << "send buffer modified";
  }
  expect_reduced(recv.data(), count, 0, c.size(), t, op,
                 case_label("allreduce", t, op, count, in_place));
}

void reduce_case(Communicator& c, DataType t, ReduceOp op, std::size_t count, bool in_place,
                 int root) {
  auto send = make_input(c.rank(), count, t, op);
  std::vector<unsigned char> recv(send.size(), 0xAB);
  bool is_root = c.rank() == root;
  void* out = in_place ? send.data() : (is_root ? recv.data() : nullptr);
  c.reduce(send.data(), out, count, t, op, root);
  if (!is_root) return;
  if (in_place) recv = send;
  expect_reduced(recv.data(), count, 0, c.size(), t, op,
                 case_label("reduce root " + std::to_string(root), t, op, count, in_place));
}

void reduce_scatter_case(Communicator& c, DataType t, ReduceOp op, std::size_t count,
                         bool in_place) {
  const std::size_t n = c.size(), size = dtype_size(t);
  auto send = make_input(c.rank(), count * n, t, op);
  std::vector<unsigned char> recv(count * size, 0xAB);
  if (in_place) {
    unsigned char* mine = send.data() + c.rank() * count * size;
    c.reduce_scatter(send.data(), mine, count, t, op);
    recv.assign(mine, mine + count * size);
  } else {
    c.reduce_scatter(send.data(), recv.data(), count, t, op);
  }
  expect_reduced(recv.data(), count, c.rank() * count, c.size(), t, op,
                 case_label("reducescatter", t, op, count, in_place));
}

class Reductions : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(Reductions, AllReduceEveryDtypeOpCountInPlace) {
  auto [transport, n] = GetParam();
  ThreadJob job(n, {.transport = transport});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    for (DataType t : kAllTypes)
      for (ReduceOp op : kAllOps)
        for (std::size_t count : kCounts)
          for (bool in_place : {false, true}) all_reduce_case(c, t, op, count, in_place);
  });
}

TEST_P(Reductions, ReduceEveryRootDtypeOp) {
  auto [transport, n] = GetParam();
  ThreadJob job(n, {.transport = transport});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    for (int root = 0; root < c.size(); ++root)
      for (DataType t : kAllTypes)
        for (ReduceOp op : kAllOps)
          for (std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{1031}})
            reduce_case(c, t, op, count, /*in_place=*/(root + count) % 2 == 1, root);
  });
}

TEST_P(Reductions, ReduceScatterEveryDtypeOp) {
  auto [transport, n] = GetParam();
  ThreadJob job(n, {.transport = transport});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    for (DataType t : kAllTypes)
      for (ReduceOp op : kAllOps)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{257}})
          for (bool in_place : {false, true}) reduce_scatter_case(c, t, op, count, in_place);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Reductions,
                         ::testing::Combine(::testing::Values("auto", "tcp"),
                                            ::testing::Values(1, 2, 3, 5, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace chorus::testing
