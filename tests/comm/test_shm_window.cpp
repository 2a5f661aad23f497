// Shared windows (Communicator::alloc_shared, transport/arena/windows.hpp) and the
// shm_window all-reduce, reduce-scatter and all-gather (src/algorithms/window.hpp) through
// communicators across forked processes, for what the algorithm sweep (tests/algorithms:
// each alone on threads with a window, every dtype, op, rank count and in-place mode, and
// the hand-over outside the windows) does not reach: calls on either side of the window
// size, averages (divided in the window, or widened and run by shm_direct) and calls of
// several MiB, checked against reference.hpp with the algorithm that ran; buffers in a
// window on some ranks only (or freed on one) run shm_direct and still agree; ranks may ask
// for different sizes (or none); freeing checks its pointer; a failed creation reaches every
// rank; over TCP the memory is ordinary and still works; a peer killed in the middle of
// window all-reduces fails the others with RemoteError naming it.
#include "algorithms/passes.hpp"
#include "algorithms/selection.hpp"
#include "core/reduce.hpp"
#include "forked_ranks.hpp"
#include "reduction_checks.hpp"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <string>
#include <tuple>

namespace chorus::testing {
namespace {

constexpr std::size_t kLargeCount = 1'000'003;   // 1 to 8 MiB, odd: uneven slices, many chunks
constexpr std::size_t kWindowAbove = 16 * 1024;  // bytes; at most this runs shm_direct's one round

/// Whether a reduction of `t` with `op` on window buffers can run in the window: every one
/// but an integer average, which the communicator widens into 64-bit heap copies first (half
/// types the window accumulates in fp32 itself).
bool window_reduces(DataType t, ReduceOp op) {
  const DataType wide = accumulation_type(t, op);
  return wide == t || wide == DataType::Float32;
}

/// The algorithm a call on window buffers must report: shm_window past one round, unless
/// the communicator widens the type first (integer averages: the widened copies are on the
/// heap, so those run shm_direct).
std::string window_algorithm(DataType t, ReduceOp op, std::size_t count) {
  if (!window_reduces(t, op)) return "shm_direct";
  return count * dtype_size(t) > kWindowAbove ? "shm_window" : "shm_direct";
}

/// One all-reduce whose buffers are `send` and `recv` (equal: in place), filled with
/// this rank's reference input; checks every element and the algorithm that ran.
void all_reduce_into(Communicator& c, DataType t, ReduceOp op, std::size_t count,
                     unsigned char* send, unsigned char* recv, const std::string& algorithm) {
  const std::size_t bytes = count * dtype_size(t);
  const auto input = make_input(c.rank(), count, t, op);
  if (bytes > 0) std::memcpy(send, input.data(), bytes);
  if (recv != send && bytes > 0) std::memset(recv, 0xAB, bytes);
  const std::string what = case_label("allreduce", t, op, count, send == recv);
  c.all_reduce(send, recv, count, t, op);
  if (c.size() > 1 && count > 0) {
    rank_check(c.last_algorithm() == algorithm,
               what + " ran " + c.last_algorithm() + ", expected " + algorithm);
  }
  const std::string mismatch = first_reduction_mismatch(recv, count, 0, c.size(), t, op);
  rank_check(mismatch.empty(), what + mismatch);
}

/// Reduce-scatter of `count` elements per rank with buffers in the window at `base`
/// (input) and `out` (output; in place: base + rank's block), checked against the
/// reference reduction of the whole input vector.
void reduce_scatter_into(Communicator& c, DataType t, ReduceOp op, std::size_t count,
                         unsigned char* base, unsigned char* out) {
  const std::size_t size = dtype_size(t);
  const std::size_t n = static_cast<std::size_t>(c.size());
  const auto input = make_input(c.rank(), count * n, t, op);
  if (count > 0) std::memcpy(base, input.data(), input.size());
  const bool in_place = out == base + c.rank() * count * size;
  const std::string what = case_label("reducescatter", t, op, count, in_place);
  c.reduce_scatter(base, out, count, t, op);
  const bool window = window_reduces(t, op) && count * size * n > kWindowAbove;
  if (c.size() > 1 && count > 0) {
    const std::string want = window ? "shm_window" : "shm_direct";
    rank_check(c.last_algorithm() == want, what + " ran " + c.last_algorithm());
  }
  const std::string mismatch =
      first_reduction_mismatch(out, count, c.rank() * count, c.size(), t, op);
  rank_check(mismatch.empty(), what + mismatch);
}

/// All-gather of `count` elements per rank: block j of the output must be rank j's block.
void all_gather_into(Communicator& c, DataType t, std::size_t count, unsigned char* send,
                     unsigned char* out) {
  const std::size_t size = dtype_size(t);
  auto block = [&](int r, std::size_t i) {
    return static_cast<double>((static_cast<std::size_t>(r) * 31 + i * 7) % 100);
  };
  for (std::size_t i = 0; i < count; ++i) encode(block(c.rank(), i), t, send + i * size);
  const bool in_place = send == out + c.rank() * count * size;
  const std::string what = case_label("allgather", t, ReduceOp::Sum, count, in_place);
  c.all_gather(send, out, count, t);
  if (c.size() > 1 && count > 0) {
    const std::string want = count * size * c.size() > kWindowAbove ? "shm_window" : "shm_direct";
    rank_check(c.last_algorithm() == want, what + " ran " + c.last_algorithm());
  }
  for (int r = 0; r < c.size(); ++r) {
    for (std::size_t i = 0; i < count; ++i) {
      if (decode(t, out + (r * count + i) * size) != block(r, i)) {
        rank_check(false, what + ": block " + std::to_string(r) + " element " + std::to_string(i));
        return;
      }
    }
  }
}

/// All-reduces on either side of the window size, averages and large calls of many chunks.
void all_reduces(Communicator& c, unsigned char* base, unsigned char* other) {
  constexpr std::size_t kAbove = kWindowAbove / 4 + 1;  // float32 elements past the size
  for (auto [t, op, count, in_place] :
       {std::tuple{DataType::Float32, ReduceOp::Sum, kAbove - 1, false},
        {DataType::Float32, ReduceOp::Sum, kAbove, true},
        {DataType::Float16, ReduceOp::Avg, std::size_t{9001}, false},
        {DataType::Bfloat16, ReduceOp::Avg, std::size_t{9001}, true},
        {DataType::Float64, ReduceOp::Avg, std::size_t{9001}, true},
        {DataType::Int32, ReduceOp::Avg, std::size_t{9001}, false},
        {DataType::Float32, ReduceOp::Sum, kLargeCount, false},
        {DataType::Int64, ReduceOp::Max, kLargeCount, true},
        {DataType::Float16, ReduceOp::Avg, kLargeCount, false},
        {DataType::Float64, ReduceOp::Avg, kLargeCount, true},
        {DataType::Uint8, ReduceOp::Prod, kLargeCount, true}}) {
    all_reduce_into(c, t, op, count, base, in_place ? base : other, window_algorithm(t, op, count));
  }
}

/// In one window of two halves: the all-reduces above, then reduce-scatters and all-gathers
/// (counts per rank) on either side of the window size, averages and large calls.
void window_calls(Communicator& c, SharedPage&) {
  const std::size_t half = kLargeCount * 8;
  auto* base = static_cast<unsigned char*>(c.alloc_shared(2 * half));
  rank_check(base != nullptr && reinterpret_cast<std::uintptr_t>(base) % 64 == 0,
             "alloc_shared returned an unaligned or null pointer");
  all_reduces(c, base, base + half);
  const std::size_t n = static_cast<std::size_t>(c.size());
  const std::size_t r = static_cast<std::size_t>(c.rank());
  reduce_scatter_into(c, DataType::Float32, ReduceOp::Sum, 7, base, base + half);
  reduce_scatter_into(c, DataType::Float16, ReduceOp::Avg, 5001, base, base + half);
  reduce_scatter_into(c, DataType::Uint8, ReduceOp::Avg, 5001, base, base + r * 5001);
  reduce_scatter_into(c, DataType::Float32, ReduceOp::Avg, kLargeCount / n, base, base + half);
  reduce_scatter_into(c, DataType::Int64, ReduceOp::Sum, kLargeCount / n, base,
                      base + r * (kLargeCount / n) * 8);
  all_gather_into(c, DataType::Int8, 3, base, base + half);
  all_gather_into(c, DataType::Float16, 9001, base + half + r * 9001 * 2, base + half);
  all_gather_into(c, DataType::Float64, kLargeCount / n, base, base + half);
  c.free_shared(base);
}

class WindowProcesses : public ::testing::TestWithParam<int> {};

TEST_P(WindowProcesses, SizesAveragesAndLargeCalls) {
  ForkedRanks job{
      .n = GetParam(), .env = {}, .limit = std::chrono::seconds(120), .before_join = {}};
  EXPECT_EQ((forked_ranks_failures(job, window_calls)), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, WindowProcesses, ::testing::Values(1, 3, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Rank 1's buffers are on its heap (then its window is freed and it uses the heap):
// every rank runs shm_direct, with the right sums; afterwards all in windows again.
TEST(WindowFallback, BuffersOutsideAWindowOnOneRankRunShmDirect) {
  ForkedRanks job{.n = 3, .env = {}, .limit = std::chrono::seconds(60), .before_join = {}};
  EXPECT_EQ(
      forked_ranks_failures(
          job,
          [](Communicator& c, SharedPage&) {
            constexpr std::size_t kCount = 100'001;
            std::vector<unsigned char> heap(kCount * 4);
            auto* window = static_cast<unsigned char*>(c.alloc_shared(kCount * 4));
            unsigned char* mine = c.rank() == 1 ? heap.data() : window;
            all_reduce_into(c, DataType::Float32, ReduceOp::Sum, kCount, mine, mine, "shm_direct");
            // An average falling back is divided once, by the communicator.
            all_reduce_into(c, DataType::Float64, ReduceOp::Avg, kCount / 2, mine, mine,
                            "shm_direct");
            all_reduce_into(c, DataType::Int32, ReduceOp::Max, kCount, window, window,
                            "shm_window");
            // Half types falling back are widened (summed in fp32, rounded once), as the
            // communicator widens them: the reference's exact values at 3 ranks.
            all_reduce_into(c, DataType::Bfloat16, ReduceOp::Sum, kCount, mine, mine, "shm_direct");
            all_reduce_into(c, DataType::Float16, ReduceOp::Avg, kCount, mine, mine, "shm_direct");
            all_reduce_into(c, DataType::Bfloat16, ReduceOp::Prod, kCount, window, window,
                            "shm_window");
            if (c.rank() == 1) c.free_shared(window);
            all_reduce_into(c, DataType::Int32, ReduceOp::Min, kCount, mine, mine, "shm_direct");
            // Another window after one was freed: ids stay aligned across ranks.
            auto* second = static_cast<unsigned char*>(c.alloc_shared(kCount * 4));
            all_reduce_into(c, DataType::Float64, ReduceOp::Sum, kCount / 2, second, second,
                            "shm_window");
            // Send in one window, recv in another: a window call where every rank names
            // the same two; not where rank 1 names other ones.
            auto* third = static_cast<unsigned char*>(c.alloc_shared(kCount * 4));
            all_reduce_into(c, DataType::Int32, ReduceOp::Sum, kCount, third, second, "shm_window");
            all_reduce_into(c, DataType::Int32, ReduceOp::Sum, kCount,
                            c.rank() == 1 ? second : third, c.rank() == 1 ? third : second,
                            "shm_direct");
          }),
      "");
}

// A blocking call's shape is planned with the algorithm chosen for what the communicator
// offered then (comm/call_plan.hpp): once a window exists, the same shape chooses again.
TEST(WindowFallback, AShapeRunBeforeTheFirstWindowChoosesAgainOnceOneExists) {
  ForkedRanks job{.n = 3, .env = {}, .limit = std::chrono::seconds(60), .before_join = {}};
  EXPECT_EQ(forked_ranks_failures(
                job,
                [](Communicator& c, SharedPage&) {
                  constexpr std::size_t kCount = 100'001;
                  std::vector<unsigned char> heap(kCount * 4);
                  c.all_reduce(heap.data(), heap.data(), kCount, DataType::Float32, ReduceOp::Sum);
                  const std::string before = c.last_algorithm();
                  rank_check(before != "shm_window", "shm_window ran without a window");
                  all_reduce_into(c, DataType::Float32, ReduceOp::Sum, kCount, heap.data(),
                                  heap.data(), before);
                  auto* window = static_cast<unsigned char*>(c.alloc_shared(kCount * 4));
                  for (int repeat = 0; repeat < 2; ++repeat) {
                    all_reduce_into(c, DataType::Float32, ReduceOp::Sum, kCount, window, window,
                                    "shm_window");
                  }
                }),
            "");
}

// Ranks ask for different sizes (one for none); each gets its own bytes, all usable.
TEST(WindowAllocation, DifferentSizesAndZero) {
  ForkedRanks job{.n = 3, .env = {}, .limit = std::chrono::seconds(60), .before_join = {}};
  EXPECT_EQ(
      forked_ranks_failures(
          job,
          [](Communicator& c, SharedPage&) {
            const std::size_t bytes =
                c.rank() == 2 ? 0 : (static_cast<std::size_t>(c.rank()) + 1) * 100'000;
            auto* p = static_cast<unsigned char*>(c.alloc_shared(bytes));
            rank_check((p == nullptr) == (bytes == 0), "null exactly when asking for 0 bytes");
            if (p) std::memset(p, c.rank() + 1, bytes);  // every byte is ours to write
            // All ranks asking for nothing: nullptr everywhere, nothing allocated.
            rank_check(c.alloc_shared(0) == nullptr, "alloc_shared(0) on every rank");
            std::vector<float> heap(50'000, 1.0f);
            c.all_reduce(heap.data(), heap.data(), heap.size(), DataType::Float32, ReduceOp::Sum);
            rank_check(heap[49'999] == 3.0f, "all-reduce on the heap after a window");
            c.free_shared(p);
            c.free_shared(nullptr);
            try {
              c.free_shared(heap.data());
              rank_check(false, "freeing a heap pointer did not throw");
            } catch (const Error& e) {
              rank_check(e.status() == Status::InvalidArgument, e.what());
              rank_check(c.last_error().find("free_shared") != std::string::npos, c.last_error());
            }
            if (p) {
              try {
                c.free_shared(p);
                rank_check(false, "a second free did not throw");
              } catch (const Error& e) {
                rank_check(e.status() == Status::InvalidArgument, e.what());
              }
            }
          }),
      "");
}

// Rank 0 cannot create the segment (its file-size limit is below it, as with a full
// /dev/shm): every rank fails with a SystemError naming rank 0, nothing is left behind, and
// a request that fits works afterwards.
TEST(WindowAllocation, CreationFailureReachesEveryRank) {
  ForkedRanks job{.n = 3, .env = {}, .limit = std::chrono::seconds(60), .before_join = {}};
  EXPECT_EQ(
      forked_ranks_failures(
          job,
          [](Communicator& c, SharedPage&) {
            if (c.rank() == 0) {
              std::signal(SIGXFSZ, SIG_IGN);  // ftruncate past the limit fails with EFBIG
              rlimit limit{1 << 20, 1 << 20};
              rank_check(::setrlimit(RLIMIT_FSIZE, &limit) == 0, "setrlimit");
            }
            try {
              c.alloc_shared(std::size_t{4} << 20);
              rank_check(false, "alloc_shared beyond rank 0's limit did not throw");
            } catch (const Error& e) {
              rank_check(e.status() == Status::SystemError, e.what());
              rank_check(std::string(e.what()).find("rank 0 could not create") != std::string::npos,
                         e.what());
            }
            auto* p = static_cast<float*>(c.alloc_shared(64 * 1024));
            rank_check(p != nullptr, "a request that fits failed");
            for (int i = 0; i < 16 * 1024; ++i) p[i] = static_cast<float>(c.rank());
            c.all_reduce(p, p, 16 * 1024, DataType::Float32, ReduceOp::Sum);
            rank_check(
                p[16 * 1024 - 1] == 3.0f && c.last_algorithm() == "shm_window",
                "all-reduce in the window after a failed allocation ran " + c.last_algorithm());
            c.free_shared(p);
          }),
      "");
}

// Over TCP there is no arena: the memory is ordinary, all-reduces on it do not run
// shm_window, and it is freed like the rest.
TEST(WindowAllocation, OrdinaryMemoryOverTcp) {
  ForkedRanks job{.n = 2,
                  .env = {"CHORUS_TRANSPORT=tcp"},
                  .limit = std::chrono::seconds(60),
                  .before_join = {}};
  EXPECT_EQ(forked_ranks_failures(
                job,
                [](Communicator& c, SharedPage&) {
                  constexpr std::size_t kCount = 10'001;
                  auto* p = static_cast<unsigned char*>(c.alloc_shared(kCount * 8));
                  rank_check(p != nullptr, "no memory over tcp");
                  const auto input = make_input(c.rank(), kCount, DataType::Float64, ReduceOp::Sum);
                  std::memcpy(p, input.data(), input.size());
                  c.all_reduce(p, p, kCount, DataType::Float64, ReduceOp::Sum);
                  rank_check(c.last_algorithm() != "shm_window", "tcp ran " + c.last_algorithm());
                  for (std::size_t i = 0; i < kCount; i += 997) {
                    rank_check(decode(DataType::Float64, p + 8 * i) ==
                                   expected_reduction(2, i, DataType::Float64, ReduceOp::Sum),
                               "wrong sum over tcp at " + std::to_string(i));
                  }
                  c.free_shared(p);
                }),
            "");
}

// Rank 1 SIGKILLs itself at a random moment while all ranks loop over window
// all-reduces; the others fail with RemoteError naming rank 1 within 2 s.
TEST(WindowFaults, KilledPeerIsNamedWithinTwoSeconds) {
  ForkedRanks job{.n = 3, .env = {}, .limit = std::chrono::seconds(60), .before_join = {}};
  constexpr std::size_t kCount = std::size_t{2} << 20;
  auto statuses = run_with_killed_peer(
      job,
      [](Communicator& c) {
        auto* data = static_cast<float*>(c.alloc_shared(kCount * sizeof(float)));
        for (std::size_t i = 0; i < kCount; ++i) data[i] = 1.0f;
        return [&c, data] { c.all_reduce(data, data, kCount, DataType::Float32, ReduceOp::Max); };
      },
      [](Communicator& c) {
        rank_check(c.last_algorithm() == "shm_window", "ran " + c.last_algorithm());
      });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_TRUE(WIFSIGNALED(statuses[1]) && WTERMSIG(statuses[1]) == SIGKILL) << statuses[1];
  EXPECT_TRUE(exited_cleanly(statuses[0])) << statuses[0];
  EXPECT_TRUE(exited_cleanly(statuses[2])) << statuses[2];
}

// Selection: shm_window only where the communicator has windows and the call is past the
// one-round size; the model prefers it there to shm_direct.
TEST(WindowSelection, AcceptedOnlyWithWindowsAndLargeCalls) {
  algorithms::Call args;
  args.collective = Collective::AllReduce;
  args.dtype = DataType::Float32;
  args.count = 1 << 20;
  using algorithms::kNeedsArena, algorithms::kNeedsSharedWindows;
  EXPECT_NE(algorithms::select_algorithm(args, 4, kNeedsArena).name, "shm_window");
  EXPECT_EQ(algorithms::select_algorithm(args, 4, kNeedsArena | kNeedsSharedWindows).name,
            "shm_window");
  args.count = kWindowAbove / 4;
  EXPECT_FALSE(algorithms::accepts_shared_window(args, 4));
  args.count = kWindowAbove / 4 + 1;
  EXPECT_TRUE(algorithms::accepts_shared_window(args, 4));
  EXPECT_FALSE(algorithms::accepts_shared_window(args, 1));
  EXPECT_FALSE(
      algorithms::algorithm_accepts(algorithms::rows::allreduce_shm_window, args, 4, kNeedsArena));
}

}  // namespace
}  // namespace chorus::testing
