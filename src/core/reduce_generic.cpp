// The portable reduction kernel: plain loops that g++ vectorises for the native
// types at -O2/-O3 (without -march, so SSE2 only); half types are widened to fp32
// a block at a time, reduced, and rounded back to nearest even once.
#include "core/half.hpp"
#include "core/reduce_kernels.hpp"
#include "core/reduce_small.hpp"

#include <chorus/error.hpp>

#include <cstdint>

namespace chorus {
namespace {

template <typename T>
void reduce_typed(T* dst, const T* a, const T* b, std::size_t n, ReduceOp op) {
  if (reduce_ops::apply_op(dst, a, b, n, op)) return;
  throw Error(Status::InternalError, "reduce kernel called with avg; callers lower it to sum");
}

// Half types: widen a block to fp32, reduce, narrow once.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void reduce_half(std::uint16_t* dst, const std::uint16_t* a, const std::uint16_t* b, std::size_t n,
                 ReduceOp op) {
  constexpr std::size_t kBlock = 256;
  float fa[kBlock], fb[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    std::size_t m = n - base < kBlock ? n - base : kBlock;
    for (std::size_t i = 0; i < m; ++i) {
      fa[i] = ToFloat(a[base + i]);
      fb[i] = ToFloat(b[base + i]);
    }
    reduce_typed(fa, fa, fb, m, op);
    for (std::size_t i = 0; i < m; ++i) dst[base + i] = FromFloat(fa[i]);
  }
}

template <typename T>
void reduce_as(void* dst, const void* a, const void* b, std::size_t n, ReduceOp op) {
  reduce_typed(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
}

}  // namespace

void reduce_into_generic(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op) {
  using std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t;
  switch (dtype) {
    case DataType::Int8:
      return reduce_as<int8_t>(dst, a, b, count, op);
    case DataType::Uint8:
      return reduce_as<uint8_t>(dst, a, b, count, op);
    case DataType::Int32:
      return reduce_as<int32_t>(dst, a, b, count, op);
    case DataType::Uint32:
      return reduce_as<uint32_t>(dst, a, b, count, op);
    case DataType::Int64:
      return reduce_as<int64_t>(dst, a, b, count, op);
    case DataType::Uint64:
      return reduce_as<uint64_t>(dst, a, b, count, op);
    case DataType::Float32:
      return reduce_as<float>(dst, a, b, count, op);
    case DataType::Float64:
      return reduce_as<double>(dst, a, b, count, op);
    case DataType::Float16:
      return reduce_half<half_to_float, float_to_half>(static_cast<uint16_t*>(dst),
                                                       static_cast<const uint16_t*>(a),
                                                       static_cast<const uint16_t*>(b), count, op);
    case DataType::Bfloat16:
      return reduce_half<bf16_to_float, float_to_bf16>(static_cast<uint16_t*>(dst),
                                                       static_cast<const uint16_t*>(a),
                                                       static_cast<const uint16_t*>(b), count, op);
  }
  throw Error(Status::InternalError, "reduce kernel called with an unknown dtype");
}

bool convert_half_generic(const void* src, DataType from, void* dst, DataType to, std::size_t n) {
  const DataType half = half_of_conversion(from, to);
  if (half == DataType::Float32) return false;
  if (to == DataType::Float32) {
    const auto* s = static_cast<const std::uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    if (half == DataType::Float16)
      for (std::size_t i = 0; i < n; ++i) d[i] = half_to_float(s[i]);
    else
      for (std::size_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
    return true;
  }
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<std::uint16_t*>(dst);
  if (half == DataType::Float16)
    for (std::size_t i = 0; i < n; ++i) d[i] = float_to_half(s[i]);
  else
    for (std::size_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
  return true;
}

namespace {

template <float (*Widen)(std::uint16_t), std::uint16_t (*Round)(float)>
void reduce_halves_as(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                      bool product) {
  auto* d = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    float acc = Widen(static_cast<const std::uint16_t*>(inputs[0])[i]);
    for (std::size_t k = 1; k < n; ++k) {
      const float x = Widen(static_cast<const std::uint16_t*>(inputs[k])[i]);
      acc = product ? acc * x : acc + x;
    }
    d[i] = Round(acc);
  }
}

}  // namespace

bool reduce_halves_generic(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                           DataType dtype, ReduceOp op) {
  if (op != ReduceOp::Sum && op != ReduceOp::Prod) return false;
  const bool product = op == ReduceOp::Prod;
  if (dtype == DataType::Float16) {
    reduce_halves_as<half_to_float, float_to_half>(out, inputs, n, count, product);
  } else if (dtype == DataType::Bfloat16) {
    reduce_halves_as<bf16_to_float, float_to_bf16>(out, inputs, n, count, product);
  } else {
    return false;
  }
  return true;
}

}  // namespace chorus
