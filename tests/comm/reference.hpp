// Test data with closed-form results, and the reductions computed independently in double.
#pragma once

#include "typed_values.hpp"

#include <chorus/types.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

namespace chorus::testing {

/// Element i of rank r's input: small integers, so every dtype holds them and
/// every reduction of up to 8 ranks is exact (products stay within +-8).
inline double input_value(int r, std::size_t i, DataType t, ReduceOp op) {
  if (op == ReduceOp::Prod) {
    double magnitude = (r + i) % 3 == 0 ? 2.0 : 1.0;
    return is_signed(t) && (r + i) % 5 == 1 ? -magnitude : magnitude;
  }
  double v = static_cast<double>((i * 7 + static_cast<std::size_t>(r) * 3) % 11);
  return is_signed(t) ? v - 5.0 : v;
}

/// What the reduction of element i over ranks 0..n-1 must be, as the dtype stores it.
inline double expected_reduction(int n, std::size_t i, DataType t, ReduceOp op) {
  double acc = input_value(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    double v = input_value(r, i, t, op);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += v;
        break;
      case ReduceOp::Prod:
        acc *= v;
        break;
      case ReduceOp::Max:
        acc = std::fmax(acc, v);
        break;
      case ReduceOp::Min:
        acc = std::fmin(acc, v);
        break;
    }
  }
  if (op != ReduceOp::Avg) return round_to(t, acc);
  if (is_integer(t)) return std::trunc(acc / n);
  if (t == DataType::Float64) return acc / n;
  return round_to(t, static_cast<double>(static_cast<float>(acc) / static_cast<float>(n)));
}

/// A buffer of `count` elements of rank r's input.
inline std::vector<unsigned char> make_input(int r, std::size_t count, DataType t, ReduceOp op,
                                             std::size_t first_index = 0) {
  std::vector<unsigned char> buf(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    encode(input_value(r, first_index + i, t, op), t, buf.data() + i * dtype_size(t));
  }
  return buf;
}

inline double element(const std::vector<unsigned char>& buf, std::size_t i, DataType t) {
  return decode(t, buf.data() + i * dtype_size(t));
}

constexpr DataType kAllTypes[] = {
    DataType::Int8,   DataType::Uint8,   DataType::Int32,    DataType::Uint32,  DataType::Int64,
    DataType::Uint64, DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min,
                                ReduceOp::Avg};

}  // namespace chorus::testing
