// Half-type conversions against the compiler's own _Float16 and exhaustive round trips.
#include "core/half.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace chorus {
namespace {

TEST(Half, EveryFloat16RoundTripsThroughFloat) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << h;
      continue;
    }
    EXPECT_EQ(float_to_half(f), h) << "half bits " << h;
  }
}

TEST(Half, Float16MatchesCompilerConversion) {
  // Sweep float bit patterns with a stride that hits every exponent and many mantissas.
  for (std::uint64_t bits = 0; bits < 0x100000000ull; bits += 0x1235) {
    float f = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    if (std::isnan(f)) continue;
    _Float16 reference = static_cast<_Float16>(f);
    std::uint16_t expected;
    std::memcpy(&expected, &reference, 2);
    ASSERT_EQ(float_to_half(f), expected) << "float " << f;
    ASSERT_EQ(half_to_float(expected), static_cast<float>(reference));
  }
}

TEST(Half, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    float f = bf16_to_float(static_cast<std::uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bf16(f), b);
    }
  }
}

}  // namespace
}  // namespace chorus
