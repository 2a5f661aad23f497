// reduce_small (core/reduce_small.hpp): the inline reduction of small calls. It must serve
// every native dtype and op up to kSmallReduceBytes with the kernels' bits (reduce_into
// serves such calls with it alone; a call it refuses goes to the kernels), and refuse
// everything else without writing.
#include "core/reduce.hpp"
#include "core/reduce_kernels.hpp"
#include "core/reduce_small.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace chorus {
namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};

/// a op b written out: integers wrap (two's complement), floats as the hardware computes.
template <typename T>
T expected_value(T a, T b, ReduceOp op) {
  if constexpr (std::is_integral_v<T>) {
    const auto x = static_cast<std::uint64_t>(static_cast<std::int64_t>(a));
    const auto y = static_cast<std::uint64_t>(static_cast<std::int64_t>(b));
    if (op == ReduceOp::Sum) return static_cast<T>(x + y);
    if (op == ReduceOp::Prod) return static_cast<T>(x * y);
  } else {
    if (op == ReduceOp::Sum) return a + b;
    if (op == ReduceOp::Prod) return a * b;
  }
  if (op == ReduceOp::Max) return a > b ? a : b;
  return a < b ? a : b;
}

/// Distinct, non-zero values spread over the type's range (integers overflow when summed
/// or multiplied), so Max and Min never meet equal inputs.
template <typename T>
std::vector<T> values(std::size_t n, int salt) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<long long>(i * 37 + static_cast<std::size_t>(salt) * 11 + 1);
    if constexpr (std::is_integral_v<T>) {
      const auto big = static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull;
      v[i] = static_cast<T>(big >> (64 - 8 * sizeof(T)));
      if (v[i] == 0) v[i] = 1;
    } else {
      v[i] = static_cast<T>((k % 2 ? -1.0 : 1.0) * (0.75 + static_cast<double>(k) * 1.3125));
    }
  }
  return v;
}

template <typename T>
void check_every_count_and_op(DataType dtype) {
  const std::size_t most = kSmallReduceBytes / sizeof(T);
  for (std::size_t n = 1; n <= most; ++n) {
    const std::vector<T> a = values<T>(n, 1), b = values<T>(n, 2);
    for (ReduceOp op : kOps) {
      const std::string what = std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
                               " count " + std::to_string(n);
      std::vector<T> out(n), kernel(n);
      ASSERT_TRUE(reduce_small(out.data(), a.data(), b.data(), n, dtype, op)) << what;
      reduce_into_generic(kernel.data(), a.data(), b.data(), n, dtype, op);
      ASSERT_EQ(std::memcmp(out.data(), kernel.data(), n * sizeof(T)), 0) << what;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], expected_value(a[i], b[i], op)) << what << " at " << i;
      }
      std::vector<T> left = a, right = b;  // in place, either side
      ASSERT_TRUE(reduce_small(left.data(), left.data(), b.data(), n, dtype, op)) << what;
      ASSERT_TRUE(reduce_small(right.data(), a.data(), right.data(), n, dtype, op)) << what;
      EXPECT_EQ(left, out) << what;
      EXPECT_EQ(right, out) << what;
    }
  }
}

TEST(ReduceSmall, ServesEveryNativeDtypeAndOpUpTo256BytesAsTheKernels) {
  check_every_count_and_op<std::int8_t>(DataType::Int8);
  check_every_count_and_op<std::uint8_t>(DataType::Uint8);
  check_every_count_and_op<std::int32_t>(DataType::Int32);
  check_every_count_and_op<std::uint32_t>(DataType::Uint32);
  check_every_count_and_op<std::int64_t>(DataType::Int64);
  check_every_count_and_op<std::uint64_t>(DataType::Uint64);
  check_every_count_and_op<float>(DataType::Float32);
  check_every_count_and_op<double>(DataType::Float64);
}

// Signed zeros, infinities and NaNs: the bits of the kernels (same element operations).
TEST(ReduceSmall, SpecialFloatsGiveTheKernelsBits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {0.0f, -0.0f, inf, -inf, nan, 1.0f, nan, -0.0f};
  const std::vector<float> b = {-0.0f, 0.0f, -inf, 2.0f, 1.0f, nan, nan, -0.0f};
  for (ReduceOp op : kOps) {
    std::vector<float> out(a.size()), kernel(a.size());
    ASSERT_TRUE(reduce_small(out.data(), a.data(), b.data(), a.size(), DataType::Float32, op));
    reduce_into_kernels(kernel.data(), a.data(), b.data(), a.size(), DataType::Float32, op);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(kernel[i])) {
        EXPECT_TRUE(std::isnan(out[i])) << to_string(op) << " at " << i;  // payload aside
      } else {
        EXPECT_EQ(std::memcmp(&out[i], &kernel[i], sizeof(float)), 0) << to_string(op) << i;
      }
    }
  }
}

TEST(ReduceSmall, RefusesLargerCallsHalfTypesAndAvgWithoutWriting) {
  std::vector<std::uint8_t> a(kSmallReduceBytes + 8, 1), b(a.size(), 2);
  std::vector<std::uint8_t> out(a.size(), 7);
  const std::vector<std::uint8_t> untouched = out;
  EXPECT_FALSE(reduce_small(out.data(), a.data(), b.data(), kSmallReduceBytes + 1, DataType::Uint8,
                            ReduceOp::Sum));
  EXPECT_FALSE(reduce_small(out.data(), a.data(), b.data(), kSmallReduceBytes / 4 + 1,
                            DataType::Float32, ReduceOp::Max));
  EXPECT_FALSE(reduce_small(out.data(), a.data(), b.data(), 4, DataType::Float16, ReduceOp::Sum));
  EXPECT_FALSE(reduce_small(out.data(), a.data(), b.data(), 4, DataType::Bfloat16, ReduceOp::Max));
  EXPECT_FALSE(reduce_small(out.data(), a.data(), b.data(), 4, DataType::Float32, ReduceOp::Avg));
  EXPECT_EQ(out, untouched);
}

}  // namespace
}  // namespace chorus
