// IEEE binary16 and bfloat16 <-> float conversions, round to nearest even.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace chorus {

inline float half_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exact in float.
    float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  std::uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                                 : (sign | ((exp + 112u) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

inline std::uint16_t float_to_half(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf stays inf, NaN stays a quiet NaN
    return sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u);
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a multiple of 2^-24 after rounding; scaling by 2^24 is exact
    // and nearbyint rounds to nearest even (the default mode).
    float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  std::uint32_t h = (((magnitude >> 23) - 112u) << 10) | ((magnitude & 0x7fffffu) >> 13);
  std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return sign | static_cast<std::uint16_t>(h);
}

inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace chorus
