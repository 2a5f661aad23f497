// fp16 and bf16 reductions round each element once (core/reduce.hpp): every algorithm that
// runs a half-type all-reduce, reduce-scatter or reduce returns the bits of the one-rounding
// reference (the exact reduction of the inputs, an average divided once in fp32, rounded once
// to the half type), on 1, 2, 3, 5 and 8 ranks, at odd counts (one arena round and many),
// in place and not. The inputs are chosen so that every partial sum or product of up to 8 of
// them is exact in fp32 but not in the half type: an algorithm that rounded a partial result
// to the half type on its way, or divided a rounded sum, would return other bits. The
// INFO log line of a half-type call reports the caller's bytes.
#include "algorithms/algorithm.hpp"
#include "core/half.hpp"
#include "core/log.hpp"
#include "reference.hpp"
#include "thread_ranks.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

using algorithms::Algorithm;

constexpr DataType kHalfTypes[] = {DataType::Float16, DataType::Bfloat16};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Prod};
/// 1, a few, one arena round, several rounds (CHORUS_SHM_ARENA_BYTES below), all odd.
constexpr std::size_t kCounts[] = {1, 7, 1031, 30011};
constexpr const char* kArenaBytes = "65536";

/// Element i of rank r's input. Sums: a full-precision significand of the type scaled by
/// 2^-3..2^3 (up to 8 of them need at most 21 bits); products: 1, 1.25, 1.5 or 1.75 times
/// 1 or 1/2 (8 of them need at most 24 bits, and stay below the type's largest value).
double half_input(int r, std::size_t i, DataType t, ReduceOp op) {
  const std::uint64_t h = (i * 2654435761u + static_cast<std::uint64_t>(r) * 40503u) >> 3;
  const double sign = (h >> 20) % 3 == 0 ? -1.0 : 1.0;
  if (op == ReduceOp::Prod) {
    return sign * (1.0 + static_cast<double>(h % 4) / 4) * ((h >> 2) % 2 ? 0.5 : 1.0);
  }
  const int fraction_bits = t == DataType::Float16 ? 10 : 7;
  const double fraction = static_cast<double>(h % (1u << fraction_bits)) / (1u << fraction_bits);
  return sign * std::ldexp(1.0 + fraction, static_cast<int>((h >> 12) % 7) - 3);
}

/// The one-rounding reference of element i over n ranks, encoded in the half type.
std::uint16_t reference_bits(int n, std::size_t i, DataType t, ReduceOp op) {
  double exact = half_input(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    const double v = half_input(r, i, t, op);
    exact = op == ReduceOp::Prod ? exact * v : exact + v;
  }
  float value = static_cast<float>(exact);  // exact: no rounding here
  if (op == ReduceOp::Avg) value /= static_cast<float>(n);
  return t == DataType::Float16 ? float_to_half(value) : float_to_bf16(value);
}

std::vector<std::uint16_t> inputs_of(int r, std::size_t count, std::size_t first, DataType t,
                                     ReduceOp op) {
  std::vector<std::uint16_t> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto x = static_cast<float>(half_input(r, first + i, t, op));
    v[i] = t == DataType::Float16 ? float_to_half(x) : float_to_bf16(x);
  }
  return v;
}

/// Buffers of `count` half-type elements: the communicator's shared windows for shm_window
/// (which runs only on them), the heap otherwise.
class Buffer {
 public:
  Buffer(Communicator& c, std::size_t count, bool shared) : comm_(c), shared_(shared) {
    if (shared) {
      data_ = static_cast<std::uint16_t*>(c.alloc_shared(count * 2));
    } else {
      heap_.resize(count);
      data_ = heap_.data();
    }
  }
  ~Buffer() {
    if (shared_) comm_.free_shared(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::uint16_t* data() { return data_; }

 private:
  Communicator& comm_;
  bool shared_;
  std::vector<std::uint16_t> heap_;
  std::uint16_t* data_ = nullptr;
};

/// One call of `algorithm`'s collective; returns a description of the first wrong element
/// ("" when every bit matches).
std::string run_case(Communicator& c, const Algorithm& algorithm, DataType t, ReduceOp op,
                     std::size_t count, bool in_place, int root) {
  const int n = c.size();
  const int r = c.rank();
  const bool shared = algorithm.name == "shm_window";
  const bool scatter = algorithm.collective == Collective::ReduceScatter;
  const std::size_t total = scatter ? count * static_cast<std::size_t>(n) : count;
  Buffer send(c, total, shared), out(c, in_place ? 0 : count, shared);
  const auto input = inputs_of(r, total, 0, t, op);
  std::memcpy(send.data(), input.data(), total * 2);
  std::uint16_t* recv = in_place ? send.data() + (scatter ? r * count : 0) : out.data();
  switch (algorithm.collective) {
    case Collective::AllReduce:
      c.all_reduce(send.data(), recv, count, t, op);
      break;
    case Collective::ReduceScatter:
      c.reduce_scatter(send.data(), recv, count, t, op);
      break;
    default:
      c.reduce(send.data(), recv, count, t, op, root);
      if (r != root) return "";
  }
  const std::size_t first = scatter ? static_cast<std::size_t>(r) * count : 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t want = reference_bits(n, first + i, t, op);
    if (recv[i] != want) {
      return std::string(to_string(algorithm.collective)) + "=" + std::string(algorithm.name) +
             " " + std::string(to_string(t)) + " " + std::string(to_string(op)) + " count " +
             std::to_string(count) + (in_place ? " in place" : "") + " root " +
             std::to_string(root) + ", rank " + std::to_string(r) + ": element " +
             std::to_string(i) + " has bits " + std::to_string(recv[i]) + ", reference " +
             std::to_string(want) + " (ran " + c.last_algorithm() + ")";
    }
  }
  return "";
}

/// Runs every case of `algorithm` on n thread ranks forced to it by CHORUS_ALGO; returns
/// the failures and adds the algorithms that ran to `ran`.
std::vector<std::string> run_algorithm(const Algorithm& algorithm, int n,
                                       std::set<std::string>* ran) {
  const std::string force =
      std::string(to_string(algorithm.collective)) + "=" + std::string(algorithm.name);
  ::setenv("CHORUS_ALGO", force.c_str(), 1);
  ::setenv("CHORUS_SHM_ARENA_BYTES", kArenaBytes, 1);
  ThreadJob job(n);
  ::unsetenv("CHORUS_ALGO");
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  std::vector<std::string> failures;
  if (!job.ok()) return {"the job did not start"};
  std::mutex mutex;
  job.run([&](Communicator& c) {
    const bool rooted = algorithm.collective == Collective::Reduce;
    for (DataType t : kHalfTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kCounts)
          for (bool in_place : {false, true})
            for (int root : {0, n - 1}) {
              if (!rooted && root != 0) continue;
              std::string wrong = run_case(c, algorithm, t, op, count, in_place, root);
              std::lock_guard lock(mutex);
              ran->insert(c.last_algorithm());
              if (!wrong.empty() && failures.size() < 8) failures.push_back(wrong);
            }
  });
  return failures;
}

class HalfRounding : public ::testing::TestWithParam<int> {};

TEST_P(HalfRounding, EveryAlgorithmMatchesTheOneRoundingReference) {
  const int n = GetParam();
  for (const Algorithm* row : algorithms::all_algorithms()) {
    const Algorithm& algorithm = *row;
    if (algorithm.collective != Collective::AllReduce &&
        algorithm.collective != Collective::ReduceScatter &&
        algorithm.collective != Collective::Reduce) {
      continue;
    }
    std::set<std::string> ran;
    for (const std::string& failure : run_algorithm(algorithm, n, &ran)) ADD_FAILURE() << failure;
    // The forced algorithm served the calls it accepts (cma may hand them to shm_direct
    // where the kernel forbids its reads; striped hands every call to hierarchical on one
    // host).
    if (n > 1 && algorithm.name != "cma" && algorithm.name != "striped") {
      EXPECT_TRUE(ran.count(std::string(algorithm.name)))
          << to_string(algorithm.collective) << "=" << algorithm.name << " never ran";
    }
  }
}

/// What the INFO log line of a 2-rank float16 all-reduce of `count` elements forced to
/// `algorithm` says (stderr captured while it runs).
std::string logged_choice(const char* algorithm, std::size_t count) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* capture = std::tmpfile();
  ::dup2(::fileno(capture), 2);
  set_log_level(LogLevel::Info);
  ::setenv("CHORUS_ALGO", algorithm, 1);
  {
    ThreadJob job(2);
    ::unsetenv("CHORUS_ALGO");
    if (job.ok()) {
      job.run([count](Communicator& c) {
        std::vector<std::uint16_t> data =
            inputs_of(c.rank(), count, 0, DataType::Float16, ReduceOp::Sum);
        c.all_reduce(data.data(), data.data(), count, DataType::Float16, ReduceOp::Sum);
      });
    }
  }
  set_log_level(LogLevel::Warn);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int ch = std::fgetc(capture); ch != EOF; ch = std::fgetc(capture)) {
    text.push_back(static_cast<char>(ch));
  }
  std::fclose(capture);
  return text;
}

// The log names the caller's bytes: 2 per float16 element, also when the communicator runs
// the call on fp32 copies (hierarchical does not accumulate half types itself).
TEST(HalfRoundingLog, ChoiceReportsTheCallersBytes) {
  for (const char* algorithm : {"allreduce=ring", "allreduce=hierarchical"}) {
    const std::string text = logged_choice(algorithm, 1000);
    EXPECT_NE(text.find("allreduce of 2000 bytes"), std::string::npos) << algorithm << ": " << text;
    EXPECT_EQ(text.find("allreduce of 4000 bytes"), std::string::npos) << algorithm << ": " << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HalfRounding, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace chorus::testing
