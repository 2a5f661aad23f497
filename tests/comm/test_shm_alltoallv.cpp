// All-to-all-v in the host arena (src/algorithms/alltoallv/shm_direct.cpp) through
// communicators, threads as ranks over real shared memory with a 4 KiB arena (2 KiB rounds,
// so streams of a few hundred bytes already take several rounds), chosen by the default
// selection, for what the algorithm sweep (tests/algorithms: counts with zeros, every dtype,
// gapped displacements in different orders, in place, untouched gaps) does not reach:
// all-zero calls with NULL buffers, a lone sending rank, single pairs and ranks that send or
// receive nothing, whose rounds the others run with nothing to move; back-to-back queued
// calls with other arena collectives; a count disagreement fails the rank that sees it with a
// Mismatch naming both ranks and counts and hangs nobody; forced TCP runs pairwise. Expected
// bytes are a closed form of (sender, receiver, byte index), independent of the library.
#include "reference.hpp"
#include "thread_ranks.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::testing {
namespace {

using Counts = std::function<std::size_t(int from, int to)>;
constexpr unsigned char kUntouched = 0xEE;

/// Byte k of what rank `from` sends rank `to`: every input bit reaches the result (the
/// final multiply and shifts), so a byte from the wrong sender or receiver shows.
unsigned char stream_byte(int from, int to, std::size_t k) {
  std::uint64_t x = (k + 1) * 0x9E3779B97F4A7C15ull;
  x ^= static_cast<std::uint64_t>(from) * 0x100000001B3ull + static_cast<std::uint64_t>(to) * 977;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<unsigned char>((x >> 56) ^ (x >> 24));
}

/// Elements per pair: a hash of (seed, from, to) in [0, max]; about a quarter are 0.
Counts random_counts(std::uint64_t seed, std::size_t max) {
  return [seed, max](int from, int to) -> std::size_t {
    std::uint64_t h =
        (seed * 1000003 + static_cast<std::uint64_t>(from) * 7919 + to) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h % 4 == 0 ? 0 : (h >> 8) % (max + 1);
  };
}

/// Where each block of one side lives: blocks placed in `order`, each after a gap.
struct Layout {
  std::vector<std::size_t> counts, displs;
  std::size_t extent = 0;  ///< elements
};

Layout lay_out(std::vector<std::size_t> counts, const std::vector<int>& order, std::size_t gap0) {
  Layout layout{std::move(counts), std::vector<std::size_t>(order.size()), 0};
  for (int p : order) {
    layout.extent += (gap0 + static_cast<std::size_t>(p)) % 3;
    layout.displs[p] = layout.extent;
    layout.extent += layout.counts[p];
  }
  return layout;
}

/// Send blocks in reverse rank order, receive blocks starting at this rank; gaps between.
std::pair<Layout, Layout> layouts_of(int me, int n, const Counts& counts) {
  std::vector<std::size_t> sc(n), rc(n);
  std::vector<int> reverse(n), rotated(n);
  for (int p = 0; p < n; ++p) {
    sc[p] = counts(me, p);
    rc[p] = counts(p, me);
    reverse[p] = n - 1 - p;
    rotated[p] = (me + p) % n;
  }
  return {lay_out(sc, reverse, 1), lay_out(rc, rotated, 2)};
}

unsigned char* or_null(std::vector<unsigned char>& bytes) {
  return bytes.empty() ? nullptr : bytes.data();
}

void write_blocks(unsigned char* base, const Layout& send, int me, std::size_t size) {
  for (std::size_t p = 0; p < send.counts.size(); ++p) {
    for (std::size_t k = 0; k < send.counts[p] * size; ++k) {
      base[send.displs[p] * size + k] = stream_byte(me, static_cast<int>(p), k);
    }
  }
}

/// Every block of `recv` holds its sender's stream; out of place, every other byte is untouched.
void check_received(const std::vector<unsigned char>& got, const Layout& recv, int me,
                    std::size_t size, bool check_gaps, const std::string& what) {
  std::vector<bool> covered(got.size(), false);
  for (std::size_t p = 0; p < recv.counts.size(); ++p) {
    for (std::size_t k = 0; k < recv.counts[p] * size; ++k) {
      const std::size_t at = recv.displs[p] * size + k;
      covered[at] = true;
      if (got[at] != stream_byte(static_cast<int>(p), me, k)) {
        ADD_FAILURE() << what << ": rank " << me << ", byte " << k << " from rank " << p;
        return;
      }
    }
  }
  for (std::size_t at = 0; check_gaps && at < got.size(); ++at) {
    if (!covered[at] && got[at] != kUntouched) {
      ADD_FAILURE() << what << ": rank " << me << " byte " << at << " outside the blocks changed";
      return;
    }
  }
}

/// One call with `counts`; `algorithm` must be the one that ran (on more than one rank).
void alltoallv_case(Communicator& c, DataType t, const Counts& counts, bool in_place,
                    const std::string& what, std::string_view algorithm = "shm_direct") {
  const int me = c.rank();
  const std::size_t size = dtype_size(t);
  auto [send, recv] = layouts_of(me, c.size(), counts);
  const std::string label = what + " " + std::string(to_string(t)) + (in_place ? " in place" : "");
  std::vector<unsigned char> in(send.extent * size, 0x5A);
  std::vector<unsigned char> out(recv.extent * size, kUntouched);
  if (in_place) in.resize(std::max(send.extent, recv.extent) * size, kUntouched);
  write_blocks(in.data(), send, me, size);
  const std::vector<unsigned char> original = in;
  unsigned char* target = in_place ? or_null(in) : or_null(out);
  c.all_to_all_v(or_null(in), send.counts, send.displs, target, recv.counts, recv.displs, t);
  if (c.size() > 1) {
    EXPECT_EQ(c.last_algorithm(), algorithm) << label;
  }
  if (in_place) in.resize(recv.extent * size);
  check_received(in_place ? in : out, recv, me, size, !in_place, label);
  if (!in_place) {
    EXPECT_EQ(in, original) << label << ": the input changed";
  }
}

/// A 4 KiB arena for the communicators a test creates; selection left to the cost model.
class ShmAllToAllVEnv : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("CHORUS_SHM_ARENA_BYTES", "4096", 1); }
  void TearDown() override { ::unsetenv("CHORUS_SHM_ARENA_BYTES"); }
};

class ShmAllToAllV : public ShmAllToAllVEnv, public ::testing::WithParamInterface<int> {};

TEST_P(ShmAllToAllV, ZeroCountsAndSinglePairs) {
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int last = c.size() - 1;
    for (DataType t : {DataType::Int8, DataType::Float64}) {
      alltoallv_case(
          c, t, [](int, int) { return std::size_t{0}; }, false, "all zero");
      alltoallv_case(
          c, t, [](int from, int to) { return from == to ? std::size_t{5} : 0; }, false,
          "self only");
      // One long stream: every other rank runs its rounds with nothing to move.
      alltoallv_case(
          c, t,
          [last](int from, int to) { return from == 0 && to == last ? std::size_t{1501} : 0; },
          false, "one pair");
      alltoallv_case(
          c, t, [](int from, int) { return from == 0 ? std::size_t{0} : 2049; }, true,
          "rank 0 sends nothing");
      alltoallv_case(
          c, t, [](int, int to) { return to == 1 ? std::size_t{0} : 333; }, false,
          "rank 1 receives nothing");
    }
  });
}

// Queued calls whose round counts differ (so the arena's buffer parity changes
// between calls), interleaved with all-reduce and barrier in the arena.
TEST_P(ShmAllToAllV, QueuedCallsMixedWithOtherArenaCollectives) {
  ThreadJob job(GetParam());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const DataType t = DataType::Int32;
    for (std::uint64_t iteration = 0; iteration < 12; ++iteration) {
      auto [send, recv] = layouts_of(c.rank(), c.size(), random_counts(iteration, iteration * 61));
      std::vector<unsigned char> in(send.extent * 4), out(recv.extent * 4, kUntouched);
      write_blocks(in.data(), send, c.rank(), 4);
      std::vector<float> sum(3 + iteration, 1.0f);
      auto first = c.iall_to_all_v(or_null(in), send.counts, send.displs, or_null(out), recv.counts,
                                   recv.displs, t);
      auto second =
          c.iall_reduce(sum.data(), sum.data(), sum.size(), DataType::Float32, ReduceOp::Sum);
      auto third = c.ibarrier();
      first.wait();
      second.wait();
      third.wait();
      check_received(out, recv, c.rank(), 4, true, "queued " + std::to_string(iteration));
      EXPECT_EQ(sum.back(), static_cast<float>(c.size()));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmAllToAllV, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

class ShmAllToAllVFaults : public ShmAllToAllVEnv {};

/// Rank 1 expects `delta` more elements from rank 0 than rank 0 sends it (int32).
/// Rank 1 must fail with a Mismatch naming both ranks and both byte counts; every
/// other rank returns correct data or fails, and nobody passes the next barrier
/// or waits for the timeout.
void count_mismatch(int n, std::size_t sent, long delta) {
  ThreadJob job(n, {.timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(job.ok());
  const auto start = std::chrono::steady_clock::now();
  job.run([&](Communicator& c) {
    const std::size_t expected = sent + static_cast<std::size_t>(delta);
    const Counts counts = [&](int from, int to) {
      if (from == 0 && to == 1) return c.rank() == 1 ? expected : sent;
      return std::size_t{3};
    };
    auto [send, recv] = layouts_of(c.rank(), n, counts);
    std::vector<unsigned char> in(send.extent * 4), out(recv.extent * 4, kUntouched);
    write_blocks(in.data(), send, c.rank(), 4);
    std::string message;
    try {
      c.all_to_all_v(in.data(), send.counts, send.displs, out.data(), recv.counts, recv.displs,
                     DataType::Int32);
      EXPECT_NE(c.rank(), 1) << "the rank that sees the disagreement returned success";
      check_received(out, recv, c.rank(), 4, true, "a rank that saw no disagreement");
    } catch (const Error& e) {
      message = e.what();
      const Status s = e.status();
      EXPECT_TRUE(s == Status::Mismatch || s == Status::RemoteError) << message;
      if (c.rank() == 1) {
        EXPECT_EQ(s, Status::Mismatch) << message;
      }
    }
    if (c.rank() == 1) {
      const std::string want = "rank 1 expected " + std::to_string(expected * 4) +
                               " bytes from rank 0 for alltoallv #1 (count 0, int32) but rank 0 "
                               "sent " +
                               std::to_string(sent * 4) + " bytes";
      EXPECT_NE(message.find(want), std::string::npos) << message;
    }
    EXPECT_THROW(c.barrier(), Error) << "rank " << c.rank() << " passed the barrier";
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(ShmAllToAllVFaults, ReceiverExpectingMoreFailsInOneRound) { count_mismatch(3, 4, 1); }

TEST_F(ShmAllToAllVFaults, ReceiverExpectingLessFailsInAMultiRoundCall) {
  count_mismatch(5, 900, -300);
}

// Forced TCP: no arena, so the message-based pairwise algorithm runs instead.
TEST_F(ShmAllToAllVFaults, ForcedTcpRunsPairwise) {
  ThreadJob job(3, {.transport = "tcp"});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    alltoallv_case(c, DataType::Float32, random_counts(3, 40), false, "tcp", "pairwise");
  });
}

}  // namespace
}  // namespace chorus::testing
