// The shm_direct collectives (src/algorithms/*/shm_direct.cpp) through communicators over a
// real host arena, threads as ranks, for what the algorithm sweep (tests/algorithms, which
// runs each one alone over every count, dtype, op, root and in-place mode) does not reach:
// that CHORUS_ALGO selects them; that many mixed and queued calls keep their rounds apart
// (CHORUS_SHM_ARENA_BYTES=16384: 8 KiB rounds); that large rooted calls go in pipelined
// rounds and past the cache stream their copies; that a rank running many small rounds ahead
// of slow ones reuses the lanes correctly; that ranks in different calls fail with a
// Mismatch; that forced TCP has no arena.
#include "reduction_checks.hpp"
#include "thread_ranks.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

/// Selects shm_direct with a small arena for the communicators a test creates.
class ShmDirectEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("CHORUS_ALGO", "shm_direct", 1);
    ::setenv("CHORUS_SHM_ARENA_BYTES", "16384", 1);
  }
  void TearDown() override {
    ::unsetenv("CHORUS_ALGO");
    ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  }
};

class ShmDirect : public ShmDirectEnv, public ::testing::WithParamInterface<int> {};

void expect_shm_direct(Communicator& c, std::size_t count) {
  if (c.size() > 1 && count > 0) {
    EXPECT_EQ(c.last_algorithm(), "shm_direct");
  }
}

/// Element i of rank r's block for a data-movement collective (unique per rank, index, block).
double movement_value(int r, std::size_t i, DataType t) {
  return static_cast<double>((static_cast<std::size_t>(r) * 31 + i * 7) %
                             (is_signed(t) ? 100 : 200));
}

std::vector<unsigned char> movement_block(int r, std::size_t first, std::size_t count, DataType t) {
  std::vector<unsigned char> buf(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    encode(movement_value(r, first + i, t), t, buf.data() + i * dtype_size(t));
  }
  return buf;
}

void expect_block(const unsigned char* got, int r, std::size_t first, std::size_t count, DataType t,
                  const std::string& what) {
  for (std::size_t i = 0; i < count; ++i) {
    double have = decode(t, got + i * dtype_size(t));
    if (have != movement_value(r, first + i, t)) {
      ADD_FAILURE() << what << ": element " << i << " of rank " << r << "'s block is " << have;
      return;
    }
  }
}

void reduce_case(Communicator& c, DataType t, ReduceOp op, std::size_t count, int root) {
  const bool in_place = (root + count) % 2 == 1;
  auto send = make_input(c.rank(), count, t, op);
  std::vector<unsigned char> recv(send.size(), 0xAB);
  const bool is_root = c.rank() == root;
  unsigned char* out = in_place ? send.data() : (is_root ? recv.data() : nullptr);
  c.reduce(send.data(), out, count, t, op, root);
  expect_shm_direct(c, count);
  if (is_root) {
    expect_reduced(out, count, 0, c.size(), t, op,
                   case_label("reduce", t, op, count, in_place) + " root " + std::to_string(root));
  }
}

void broadcast_case(Communicator& c, DataType t, std::size_t count, int root, bool in_place) {
  auto mine = movement_block(c.rank(), 0, count, t);
  std::vector<unsigned char> recv(mine.size(), 0xAB);
  const bool is_root = c.rank() == root;
  unsigned char* out = in_place && is_root ? mine.data() : recv.data();
  c.broadcast(is_root ? mine.data() : nullptr, out, count, t, root);
  expect_shm_direct(c, count);
  expect_block(out, root, 0, count, t, "broadcast root " + std::to_string(root));
}

/// Gather then scatter back from `root`; rank r's block holds movement_block(r).
void gather_scatter_case(Communicator& c, DataType t, std::size_t count, int root) {
  const std::size_t size = dtype_size(t), n = c.size();
  const bool is_root = c.rank() == root;
  auto mine = movement_block(c.rank(), 0, count, t);
  std::vector<unsigned char> all(count * size * n, 0xAB);
  c.gather(mine.data(), is_root ? all.data() : nullptr, count, t, root);
  expect_shm_direct(c, count);
  if (is_root) {
    for (int r = 0; r < c.size(); ++r) {
      expect_block(all.data() + r * count * size, r, 0, count, t, "gather");
    }
  }
  std::vector<unsigned char> back(count * size, 0xAB);
  c.scatter(is_root ? all.data() : nullptr, back.data(), count, t, root);
  expect_shm_direct(c, count);
  expect_block(back.data(), c.rank(), 0, count, t, "scatter root " + std::to_string(root));
}

// Back-to-back calls of different collectives and sizes (odd numbers of rounds,
// so buffer parity changes between calls) and queued requests stay correct.
TEST_P(ShmDirect, MixedQueuedCallsAndBarriers) {
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    for (int iteration = 0; iteration < 20; ++iteration) {
      const std::size_t count = 1 + static_cast<std::size_t>(iteration) * 97;
      auto a = make_input(c.rank(), count, DataType::Float32, ReduceOp::Sum);
      auto b = movement_block(c.rank(), 0, count, DataType::Int32);
      std::vector<unsigned char> gathered(b.size() * c.size());
      auto first = c.iall_reduce(a.data(), a.data(), count, DataType::Float32, ReduceOp::Sum);
      auto second = c.iall_gather(b.data(), gathered.data(), count, DataType::Int32);
      auto third = c.ibarrier();
      first.wait();
      second.wait();
      third.wait();
      expect_reduced(a.data(), count, 0, c.size(), DataType::Float32, ReduceOp::Sum, "mixed");
      for (int r = 0; r < c.size(); ++r) {
        expect_block(gathered.data() + r * b.size(), r, 0, count, DataType::Int32, "mixed");
      }
    }
  });
}

// With the default arena (2 MiB rounds) a broadcast or reduce of 1.6-3.2 MB goes
// in 512 KiB rounds when every rank has a core (2 ranks here), in whole rounds
// when ranks share cores: both must deliver every element.
TEST_P(ShmDirect, LargeRootedCallsInPipelinedRounds) {
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    constexpr std::size_t kLarge = 400'001;  // float32: 1.6 MB, 3 rounds of 512 KiB and a rest
    const int last = c.size() - 1;
    broadcast_case(c, DataType::Float32, kLarge, last, false);
    broadcast_case(c, DataType::Int8, kLarge, 0, true);
    reduce_case(c, DataType::Float32, ReduceOp::Sum, kLarge, 0);
    reduce_case(c, DataType::Float64, ReduceOp::Max, kLarge, last);
  });
}

// From kRootedStreamFromBytes in all outputs (16 MiB: 8 MiB a rank at 2 ranks, 2 MiB at
// 8) a broadcast's and a scatter's copies stream (algorithms/stream_copy.hpp): odd counts,
// in place and not, every element checked.
TEST_P(ShmDirect, RootedCallsPastTheCacheStream) {
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const std::size_t n = static_cast<std::size_t>(c.size());
    const int last = c.size() - 1;
    for (DataType t : {DataType::Float32, DataType::Int8}) {
      const std::size_t count = (std::size_t{16} << 20) / (n * dtype_size(t)) + 3;
      broadcast_case(c, t, count, last, false);
      broadcast_case(c, t, count, 0, true);
      gather_scatter_case(c, t, count, last);
    }
  });
}

// Rooted calls let one side run ahead: the root of a broadcast or scatter, the
// non-roots of a gather wait for nobody but the lane reuse rule (host_arena.hpp).
// The slow side sleeps now and then, so the fast one runs up to a full set of
// lanes ahead; a large broadcast every 7 calls takes a half in between. Every
// value of every call must arrive intact.
TEST_P(ShmDirect, FastRanksRunAheadThroughTheLanes) {
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size();
    for (int call = 0; call < 80; ++call) {
      const bool big = call % 7 == 6;
      const std::size_t count = big ? 3000 : 1 + static_cast<std::size_t>(call % 5) * 60;
      const auto value = [&](std::size_t i, int from) {
        return static_cast<std::int32_t>(call * 100003 + from * 1009 + static_cast<int>(i));
      };
      if (c.rank() != 0 && call % 11 == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<std::int32_t> data(count);
      if (c.rank() == 0)
        for (std::size_t i = 0; i < count; ++i) data[i] = value(i, 0);
      c.broadcast(data.data(), data.data(), count, DataType::Int32, 0);
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], value(i, 0)) << "call " << call;
      if (big) continue;
      // Gather to the last rank: the others run ahead of it.
      if (c.rank() == n - 1 && call % 13 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::vector<std::int32_t> mine(count), all(count * static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < count; ++i) mine[i] = value(i, c.rank());
      c.gather(mine.data(), all.data(), count, DataType::Int32, n - 1);
      if (c.rank() != n - 1) continue;
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(all[static_cast<std::size_t>(r) * count + i], value(i, r)) << "call " << call;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmDirect, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

class ShmDirectFaults : public ShmDirectEnv {};

// Rank 0 in an all-reduce, the others in a broadcast from rank 0 with the same
// sequence number: both are arena calls, so the published round records must tell
// them apart on every rank; the communicator stays failed afterwards.
TEST_F(ShmDirectFaults, DifferentCollectivesAreMismatchesNamingBoth) {
  ThreadJob job(3, {.timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& c) {
    std::vector<float> data(64, 1.0f);
    Status status = Status::Success;
    std::string message;
    try {
      if (c.rank() == 0) {
        c.all_reduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum);
      } else {
        c.broadcast(data.data(), data.data(), data.size(), DataType::Float32, 0);
      }
    } catch (const Error& e) {
      status = e.status();
      message = e.what();
    }
    EXPECT_EQ(status, Status::Mismatch) << "rank " << c.rank() << ": " << message;
    EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
    EXPECT_NE(message.find("broadcast"), std::string::npos) << message;
    EXPECT_THROW(c.barrier(), Error);
  });
}

// A broadcast root (int32) writes and leaves at once; the readers (float32) must
// still check the root's record of the round they read and fail instead of
// returning its bytes, and the root fails no later than its next call.
TEST_F(ShmDirectFaults, BroadcastDtypeMismatchFailsEveryRank) {
  ThreadJob job(3, {.timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& c) {
    std::vector<std::int32_t> data(8, 7);
    const DataType dtype = c.rank() == 0 ? DataType::Int32 : DataType::Float32;
    int failed_at = -1;
    std::string message;
    try {
      c.broadcast(data.data(), data.data(), data.size(), dtype, 0);
      EXPECT_EQ(c.rank(), 0) << "a reader returned success";
      EXPECT_EQ(data[5], 7);
      failed_at = 1;
      c.barrier();
      failed_at = 2;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Mismatch) << "rank " << c.rank() << ": " << e.what();
      message = e.what();
    }
    EXPECT_NE(failed_at, 2) << "rank " << c.rank() << " passed the barrier";
    EXPECT_NE(message.find("broadcast #1 (count 8, int32, root 0)"), std::string::npos) << message;
    EXPECT_NE(message.find("broadcast #1 (count 8, float32, root 0)"), std::string::npos)
        << message;
  });
}

// Forced TCP: no arena, so shm_direct declines and another algorithm runs.
TEST_F(ShmDirectFaults, ForcedTcpHasNoArena) {
  ThreadJob job(2, {.transport = "tcp"});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    std::vector<float> data(16, 1.0f);
    c.all_reduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum);
    EXPECT_NE(c.last_algorithm(), "shm_direct");
    EXPECT_EQ(data[3], 2.0f);
  });
}

}  // namespace
}  // namespace chorus::testing
