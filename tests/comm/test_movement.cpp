// Data-movement collectives through the public C++ API over real transports,
// threads as ranks: broadcast, all-gather, gather, scatter, all-to-all(-v),
// send/recv and barrier, every root, in place and not, zero and odd counts.
#include "thread_ranks.hpp"
#include "typed_values.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace chorus::testing {
namespace {

using Bytes = std::vector<unsigned char>;
constexpr DataType kTypes[] = {DataType::Int8, DataType::Float16, DataType::Int32,
                               DataType::Float64};
constexpr std::size_t kCounts[] = {0, 1, 7, 1031};

/// Element i of the block rank r contributes: distinct per rank, exact in every dtype.
double value(int r, std::size_t i) { return static_cast<double>((r * 31 + i * 7) % 101); }

Bytes block(int r, std::size_t count, DataType t, std::size_t first = 0) {
  Bytes b(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i)
    encode(value(r, first + i), t, b.data() + i * dtype_size(t));
  return b;
}

/// The blocks of ranks 0..n-1 laid end to end.
Bytes concatenation(int n, std::size_t count, DataType t) {
  Bytes all;
  for (int r = 0; r < n; ++r) {
    Bytes b = block(r, count, t);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

std::string what(const char* name, DataType t, std::size_t count, bool in_place, int root = -1) {
  std::string s =
      std::string(name) + " " + std::string(to_string(t)) + " count " + std::to_string(count);
  if (root >= 0) s += " root " + std::to_string(root);
  return in_place ? s + " in place" : s;
}

void broadcast_case(Communicator& c, DataType t, std::size_t count, bool in_place, int root) {
  Bytes send = block(root, count, t);
  Bytes recv(send.size(), 0xEE);
  bool is_root = c.rank() == root;
  if (in_place) {
    Bytes& buf = is_root ? send : recv;
    c.broadcast(buf.data(), buf.data(), count, t, root);
    EXPECT_EQ(buf, block(root, count, t)) << what("broadcast", t, count, true, root);
  } else {
    c.broadcast(is_root ? send.data() : nullptr, recv.data(), count, t, root);
    EXPECT_EQ(recv, block(root, count, t)) << what("broadcast", t, count, false, root);
  }
}

void all_gather_case(Communicator& c, DataType t, std::size_t count, bool in_place) {
  const std::size_t bytes = count * dtype_size(t);
  Bytes recv(bytes * c.size(), 0xEE);
  Bytes send = block(c.rank(), count, t);
  if (in_place) {
    std::copy(send.begin(), send.end(), recv.begin() + c.rank() * bytes);
    c.all_gather(recv.data() + c.rank() * bytes, recv.data(), count, t);
  } else {
    c.all_gather(send.data(), recv.data(), count, t);
  }
  EXPECT_EQ(recv, concatenation(c.size(), count, t)) << what("allgather", t, count, in_place);
}

void gather_case(Communicator& c, DataType t, std::size_t count, bool in_place, int root) {
  const std::size_t bytes = count * dtype_size(t);
  const bool is_root = c.rank() == root;
  Bytes recv(is_root ? bytes * c.size() : 0, 0xEE);
  Bytes send = block(c.rank(), count, t);
  const void* src = send.data();
  if (in_place && is_root) {
    std::copy(send.begin(), send.end(), recv.begin() + root * bytes);
    src = recv.data() + root * bytes;
  }
  c.gather(src, is_root ? recv.data() : nullptr, count, t, root);
  if (is_root) {
    EXPECT_EQ(recv, concatenation(c.size(), count, t)) << what("gather", t, count, in_place, root);
  }
}

void scatter_case(Communicator& c, DataType t, std::size_t count, bool in_place, int root) {
  const std::size_t bytes = count * dtype_size(t);
  const bool is_root = c.rank() == root;
  Bytes send = is_root ? concatenation(c.size(), count, t) : Bytes();
  Bytes recv(bytes, 0xEE);
  if (in_place && is_root) {
    c.scatter(send.data(), send.data() + root * bytes, count, t, root);
    recv.assign(send.begin() + root * bytes, send.begin() + (root + 1) * bytes);
  } else {
    c.scatter(is_root ? send.data() : nullptr, recv.data(), count, t, root);
  }
  EXPECT_EQ(recv, block(c.rank(), count, t)) << what("scatter", t, count, in_place, root);
}

/// All-to-all: block j of rank r's send buffer is block(r*n + j); rank r receives block(j*n + r)
/// from j.
void all_to_all_case(Communicator& c, DataType t, std::size_t count, bool in_place) {
  const int n = c.size();
  Bytes send, want;
  for (int j = 0; j < n; ++j) {
    Bytes out = block(c.rank() * n + j, count, t), in = block(j * n + c.rank(), count, t);
    send.insert(send.end(), out.begin(), out.end());
    want.insert(want.end(), in.begin(), in.end());
  }
  Bytes recv(send.size(), 0xEE);
  if (in_place) {
    c.all_to_all(send.data(), send.data(), count, t);
    recv = send;
  } else {
    c.all_to_all(send.data(), recv.data(), count, t);
  }
  EXPECT_EQ(recv, want) << what("alltoall", t, count, in_place);
}

/// All-to-all-v: rank s sends (s + 2d) % 4 elements to rank d (some zero), packed
/// in rank order with a gap of one element between blocks on both sides.
void all_to_all_v_case(Communicator& c, DataType t) {
  const int n = c.size(), me = c.rank();
  const std::size_t size = dtype_size(t);
  auto amount = [](int s, int d) { return static_cast<std::size_t>((s + 2 * d) % 4); };
  std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
  std::size_t soff = 0, roff = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = amount(me, p), sd[p] = soff, soff += sc[p] + 1;
    rc[p] = amount(p, me), rd[p] = roff, roff += rc[p] + 1;
  }
  Bytes send(soff * size, 0), recv(roff * size, 0xEE), want(roff * size, 0xEE);
  for (int p = 0; p < n; ++p) {
    Bytes out = block(me * n + p, sc[p], t), in = block(p * n + me, rc[p], t);
    std::copy(out.begin(), out.end(), send.begin() + sd[p] * size);
    std::copy(in.begin(), in.end(), want.begin() + rd[p] * size);
  }
  c.all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, t);
  EXPECT_EQ(recv, want) << "alltoallv " << to_string(t);
}

class Movement : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void run(const std::function<void(Communicator&)>& body) {
    auto [transport, n] = GetParam();
    ThreadJob job(n, {.transport = transport});
    ASSERT_TRUE(job.ok());
    job.run(body);
  }
};

TEST_P(Movement, BroadcastEveryRoot) {
  run([](Communicator& c) {
    for (int root = 0; root < c.size(); ++root)
      for (DataType t : kTypes)
        for (std::size_t count : kCounts)
          for (bool in_place : {false, true}) broadcast_case(c, t, count, in_place, root);
  });
}

TEST_P(Movement, AllGather) {
  run([](Communicator& c) {
    for (DataType t : kTypes)
      for (std::size_t count : kCounts)
        for (bool in_place : {false, true}) all_gather_case(c, t, count, in_place);
  });
}

TEST_P(Movement, GatherAndScatterEveryRoot) {
  run([](Communicator& c) {
    for (int root = 0; root < c.size(); ++root)
      for (DataType t : kTypes)
        for (std::size_t count : kCounts)
          for (bool in_place : {false, true}) {
            gather_case(c, t, count, in_place, root);
            scatter_case(c, t, count, in_place, root);
          }
  });
}

TEST_P(Movement, AllToAllAndAllToAllV) {
  run([](Communicator& c) {
    for (DataType t : kTypes) {
      for (std::size_t count : kCounts)
        for (bool in_place : {false, true}) all_to_all_case(c, t, count, in_place);
      all_to_all_v_case(c, t);
    }
  });
}

/// Around a ring, every rank posts both halves of its exchange before waiting:
/// send first, or receive first (which needs point-to-point posting to overlap).
TEST_P(Movement, SendRecvRingInEitherOrderWithLargeMessages) {
  run([](Communicator& c) {
    const int n = c.size();
    if (n == 1) return;
    for (bool receive_first : {false, true}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{3 << 20}}) {
        Bytes out = block(c.rank(), count, DataType::Int8), in(count, 0xEE);
        Request s, r;
        if (receive_first) r = c.irecv(in.data(), count, DataType::Int8, (c.rank() + n - 1) % n);
        s = c.isend(out.data(), count, DataType::Int8, (c.rank() + 1) % n);
        if (!receive_first) r = c.irecv(in.data(), count, DataType::Int8, (c.rank() + n - 1) % n);
        r.wait();
        s.wait();
        EXPECT_EQ(in, block((c.rank() + n - 1) % n, count, DataType::Int8))
            << "count " << count << (receive_first ? " receive first" : " send first");
      }
    }
    // A collective issued after point-to-point operations waits for them.
    std::int64_t token = c.rank(), got = -1, sum = 1;
    Request r = c.irecv(&got, 1, DataType::Int64, (c.rank() + n - 1) % n);
    Request s = c.isend(&token, 1, DataType::Int64, (c.rank() + 1) % n);
    c.all_reduce(&sum, &sum, 1, DataType::Int64, ReduceOp::Sum);
    EXPECT_TRUE(r.test());
    EXPECT_TRUE(s.test());
    EXPECT_EQ(got, (c.rank() + n - 1) % n);
    EXPECT_EQ(sum, n);
  });
}

TEST_P(Movement, BarrierAndManyQueuedOperationsCompleteInOrder) {
  run([](Communicator& c) {
    std::vector<std::int64_t> values(16);
    std::vector<Request> requests;
    for (std::size_t k = 0; k < values.size(); ++k) {
      values[k] = static_cast<std::int64_t>(k) * (c.rank() + 1);
      requests.push_back(c.iall_reduce(&values[k], &values[k], 1, DataType::Int64, ReduceOp::Sum));
      if (k % 5 == 0) requests.push_back(c.ibarrier());
    }
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait();  // any wait order
    const std::int64_t ranks_sum = static_cast<std::int64_t>(c.size()) * (c.size() + 1) / 2;
    for (std::size_t k = 0; k < values.size(); ++k)
      EXPECT_EQ(values[k], static_cast<std::int64_t>(k) * ranks_sum);
    c.barrier();
  });
}

// A collective of zero elements moves and waits for nothing: it completes at once
// even behind a receive that nobody has sent to yet (every rank posts one from its
// right neighbour, which sends only after its own zero-count calls: were those
// queued behind the receives, no rank would ever send), and with NULL buffers. It
// still takes its place in the sequence: the all-reduce after it is matched.
TEST_P(Movement, ZeroElementCollectivesCompleteAtOnce) {
  run([](Communicator& c) {
    const int n = c.size();
    const int right = (c.rank() + 1) % n;
    const int left = (c.rank() + n - 1) % n;
    std::int32_t got = -1;
    Request pending;
    if (n > 1) pending = c.irecv(&got, 1, DataType::Int32, right, 7);
    c.all_reduce(nullptr, nullptr, 0, DataType::Float32, ReduceOp::Sum);
    c.broadcast(nullptr, nullptr, 0, DataType::Int8, 0);
    c.reduce(nullptr, nullptr, 0, DataType::Float64, ReduceOp::Max, n - 1);
    c.all_gather(nullptr, nullptr, 0, DataType::Int32);
    c.reduce_scatter(nullptr, nullptr, 0, DataType::Float32, ReduceOp::Avg);
    c.gather(nullptr, nullptr, 0, DataType::Int32, 0);
    c.scatter(nullptr, nullptr, 0, DataType::Int32, 0);
    c.all_to_all(nullptr, nullptr, 0, DataType::Int32);
    Request zero = c.iall_reduce(nullptr, nullptr, 0, DataType::Int32, ReduceOp::Sum);
    EXPECT_TRUE(zero.test());
    const std::int32_t mine = c.rank() + 100;
    if (n > 1) {
      c.send(&mine, 1, DataType::Int32, left, 7);
      pending.wait();
      EXPECT_EQ(got, right + 100);
    }
    std::int64_t sum = c.rank() + 1;
    c.all_reduce(&sum, &sum, 1, DataType::Int64, ReduceOp::Sum);
    EXPECT_EQ(sum, static_cast<std::int64_t>(n) * (n + 1) / 2);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Movement,
                         ::testing::Combine(::testing::Values("auto", "tcp"),
                                            ::testing::Values(1, 2, 3, 5, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace chorus::testing
