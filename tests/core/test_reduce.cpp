// Reduction kernels, conversions and averaging for every dtype and op,
// checked element by element against arithmetic written out in the test.
#include "core/half.hpp"
#include "core/reduce.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace chorus {
namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};

template <typename T>
T expected_value(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return static_cast<T>(a + b);
    case ReduceOp::Prod:
      return static_cast<T>(a * b);
    case ReduceOp::Max:
      return a > b ? a : b;
    default:
      return a < b ? a : b;
  }
}

template <typename T>
void check_native(DataType dtype) {
  const std::size_t n = 1037;  // odd, longer than any vector width
  std::vector<T> a(n), b(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(static_cast<int>(i % 7) - 3);
    b[i] = static_cast<T>(static_cast<int>(i % 5) - 1);
  }
  for (ReduceOp op : kOps) {
    reduce_into(out.data(), a.data(), b.data(), n, dtype, op);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], expected_value(a[i], b[i], op))
          << to_string(dtype) << " " << to_string(op) << " at " << i;
    }
    std::vector<T> inplace = a;
    reduce_inplace(inplace.data(), b.data(), n, dtype, op);
    ASSERT_EQ(inplace, out);
  }
}

TEST(Reduce, NativeTypesEveryOp) {
  check_native<std::int8_t>(DataType::Int8);
  check_native<std::uint8_t>(DataType::Uint8);
  check_native<std::int32_t>(DataType::Int32);
  check_native<std::uint32_t>(DataType::Uint32);
  check_native<std::int64_t>(DataType::Int64);
  check_native<std::uint64_t>(DataType::Uint64);
  check_native<float>(DataType::Float32);
  check_native<double>(DataType::Float64);
}

TEST(Reduce, IntegerSumWrapsLikeTwosComplement) {
  std::int32_t a = INT32_MAX, b = 1, out = 0;
  reduce_into(&out, &a, &b, 1, DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(out, INT32_MIN);
  std::int8_t c = 100, d = 3, p = 0;
  reduce_into(&p, &c, &d, 1, DataType::Int8, ReduceOp::Prod);
  EXPECT_EQ(p, static_cast<std::int8_t>(300 - 256));
}

TEST(Reduce, HalfTypesComputeInFloat) {
  for (DataType dtype : {DataType::Float16, DataType::Bfloat16}) {
    auto to = dtype == DataType::Float16 ? float_to_half : float_to_bf16;
    auto from = dtype == DataType::Float16 ? half_to_float : bf16_to_float;
    const std::size_t n = 601;
    std::vector<std::uint16_t> a(n), b(n), out(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = to(static_cast<float>(i % 9) - 4.0f);
      b[i] = to(0.5f * static_cast<float>(i % 4));
    }
    for (ReduceOp op : kOps) {
      reduce_into(out.data(), a.data(), b.data(), n, dtype, op);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(from(out[i]), expected_value(from(a[i]), from(b[i]), op)) << i;
      }
    }
  }
}

TEST(Reduce, AvgIsRejectedByTheKernel) {
  float a = 1, b = 2, out = 0;
  EXPECT_THROW(reduce_into(&out, &a, &b, 1, DataType::Float32, ReduceOp::Avg), Error);
}

TEST(Convert, IntegersWidenAndNarrow) {
  std::vector<std::int8_t> small = {-128, -1, 0, 1, 127};
  std::vector<std::int64_t> wide(small.size());
  convert(small.data(), DataType::Int8, wide.data(), DataType::Int64, small.size());
  EXPECT_EQ(wide, (std::vector<std::int64_t>{-128, -1, 0, 1, 127}));
  std::vector<std::int8_t> back(small.size());
  convert(wide.data(), DataType::Int64, back.data(), DataType::Int8, small.size());
  EXPECT_EQ(back, small);
  std::vector<std::uint32_t> u = {0, 4000000000u};
  std::vector<std::uint64_t> uw(2);
  convert(u.data(), DataType::Uint32, uw.data(), DataType::Uint64, 2);
  EXPECT_EQ(uw[1], 4000000000ull);
}

TEST(Convert, HalfToFloatAndBack) {
  std::vector<std::uint16_t> h = {float_to_half(1.5f), float_to_half(-2.0f)};
  std::vector<float> f(2);
  convert(h.data(), DataType::Float16, f.data(), DataType::Float32, 2);
  EXPECT_EQ(f, (std::vector<float>{1.5f, -2.0f}));
  std::vector<std::uint16_t> back(2);
  convert(f.data(), DataType::Float32, back.data(), DataType::Float16, 2);
  EXPECT_EQ(back, h);
}

TEST(Convert, UnsupportedPairIsAnInternalError) {
  float f = 1;
  double d = 0;
  EXPECT_THROW(convert(&f, DataType::Float32, &d, DataType::Float64, 1), Error);
}

TEST(Average, AccumulationTypes) {
  EXPECT_EQ(accumulation_type(DataType::Float16, ReduceOp::Sum), DataType::Float32);
  EXPECT_EQ(accumulation_type(DataType::Bfloat16, ReduceOp::Avg), DataType::Float32);
  EXPECT_EQ(accumulation_type(DataType::Float16, ReduceOp::Max), DataType::Float16);
  EXPECT_EQ(accumulation_type(DataType::Int8, ReduceOp::Avg), DataType::Int64);
  EXPECT_EQ(accumulation_type(DataType::Uint32, ReduceOp::Avg), DataType::Uint64);
  EXPECT_EQ(accumulation_type(DataType::Int8, ReduceOp::Sum), DataType::Int8);
  EXPECT_EQ(accumulation_type(DataType::Float64, ReduceOp::Avg), DataType::Float64);
}

TEST(Average, IntegersTruncateTowardZeroFloatsDivideOnce) {
  std::vector<std::int64_t> s = {7, -7, 6, -1};
  finalize_average(s.data(), s.size(), DataType::Int64, 3);
  EXPECT_EQ(s, (std::vector<std::int64_t>{2, -2, 2, 0}));
  std::vector<double> d = {1.0, 2.0};
  finalize_average(d.data(), d.size(), DataType::Float64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  EXPECT_EQ(d[1], 2.0 / 3.0);
}

// The vector loops and their tails give the scalar division's bits for every divisor
// (powers of two by an exact reciprocal), subnormals, infinities and odd lengths included.
TEST(Average, FloatDivisionMatchesScalarDivisionBitForBit) {
  std::vector<float> f;
  std::vector<double> d;
  std::uint32_t state = 12345;
  for (int i = 0; i < 1031; ++i) {
    state = state * 1664525u + 1013904223u;
    const float x = std::ldexp(static_cast<float>(state % 100000) - 50000.0f, (i % 300) - 160);
    f.push_back(x);
    d.push_back(std::ldexp(static_cast<double>(x), (i % 7) * 100 - 300));
  }
  f[5] = std::numeric_limits<float>::infinity();
  f[6] = std::numeric_limits<float>::denorm_min();
  d[7] = -std::numeric_limits<double>::denorm_min();
  for (int divisor : {1, 2, 3, 4, 5, 7, 8, 64, 100}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1031}}) {
      auto fa = f;
      auto da = d;
      finalize_average(fa.data(), n, DataType::Float32, divisor);
      finalize_average(da.data(), n, DataType::Float64, divisor);
      for (std::size_t i = 0; i < n; ++i) {
        const float fw = f[i] / static_cast<float>(divisor);
        const double dw = d[i] / static_cast<double>(divisor);
        ASSERT_EQ(std::memcmp(&fa[i], &fw, sizeof fw), 0) << divisor << " " << i << " " << f[i];
        ASSERT_EQ(std::memcmp(&da[i], &dw, sizeof dw), 0) << divisor << " " << i << " " << d[i];
      }
      for (std::size_t i = n; i < f.size(); ++i) ASSERT_EQ(fa[i], f[i]) << "past the count";
    }
  }
}

}  // namespace
}  // namespace chorus
