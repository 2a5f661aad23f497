// Encoding small exact values into any dtype, and decoding them, for tests that
// compute their references in double.
#pragma once

#include "core/half.hpp"

#include <chorus/types.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace chorus::testing {

inline void encode(double v, DataType dtype, void* out) {
  switch (dtype) {
    case DataType::Int8: {
      auto x = static_cast<std::int8_t>(v);
      std::memcpy(out, &x, 1);
      return;
    }
    case DataType::Uint8: {
      auto x = static_cast<std::uint8_t>(v);
      std::memcpy(out, &x, 1);
      return;
    }
    case DataType::Int32: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(out, &x, 4);
      return;
    }
    case DataType::Uint32: {
      auto x = static_cast<std::uint32_t>(v);
      std::memcpy(out, &x, 4);
      return;
    }
    case DataType::Int64: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(out, &x, 8);
      return;
    }
    case DataType::Uint64: {
      auto x = static_cast<std::uint64_t>(v);
      std::memcpy(out, &x, 8);
      return;
    }
    case DataType::Float16: {
      auto x = float_to_half(static_cast<float>(v));
      std::memcpy(out, &x, 2);
      return;
    }
    case DataType::Bfloat16: {
      auto x = float_to_bf16(static_cast<float>(v));
      std::memcpy(out, &x, 2);
      return;
    }
    case DataType::Float32: {
      auto x = static_cast<float>(v);
      std::memcpy(out, &x, 4);
      return;
    }
    case DataType::Float64:
      std::memcpy(out, &v, 8);
      return;
  }
}

inline double decode(DataType dtype, const void* in) {
  switch (dtype) {
    case DataType::Int8: {
      std::int8_t x;
      std::memcpy(&x, in, 1);
      return x;
    }
    case DataType::Uint8: {
      std::uint8_t x;
      std::memcpy(&x, in, 1);
      return x;
    }
    case DataType::Int32: {
      std::int32_t x;
      std::memcpy(&x, in, 4);
      return x;
    }
    case DataType::Uint32: {
      std::uint32_t x;
      std::memcpy(&x, in, 4);
      return x;
    }
    case DataType::Int64: {
      std::int64_t x;
      std::memcpy(&x, in, 8);
      return static_cast<double>(x);
    }
    case DataType::Uint64: {
      std::uint64_t x;
      std::memcpy(&x, in, 8);
      return static_cast<double>(x);
    }
    case DataType::Float16: {
      std::uint16_t x;
      std::memcpy(&x, in, 2);
      return half_to_float(x);
    }
    case DataType::Bfloat16: {
      std::uint16_t x;
      std::memcpy(&x, in, 2);
      return bf16_to_float(x);
    }
    case DataType::Float32: {
      float x;
      std::memcpy(&x, in, 4);
      return x;
    }
    case DataType::Float64: {
      double x;
      std::memcpy(&x, in, 8);
      return x;
    }
  }
  return NAN;
}

/// `v` as the dtype would store it.
inline double round_to(DataType dtype, double v) {
  unsigned char buf[8];
  encode(v, dtype, buf);
  return decode(dtype, buf);
}

inline bool is_integer(DataType t) {
  return t != DataType::Float16 && t != DataType::Bfloat16 && t != DataType::Float32 &&
         t != DataType::Float64;
}

inline bool is_signed(DataType t) {
  return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64 || !is_integer(t);
}

}  // namespace chorus::testing
