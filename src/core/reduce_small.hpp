// The element operations of the reductions, and the small reduction built from them.
//
// The generic kernel (reduce_generic.cpp) applies these operations; the SIMD kernels give
// the same bits (reduce_kernels.hpp). reduce_small applies them inline to messages of at
// most kSmallReduceBytes of a native dtype, as the first step of reduce_into (reduce.hpp): a
// small call's reduction (the one-round arena reduce of a few dozen bytes) then costs its loop,
// not the kernels' dispatch per ISA, dtype and op and their vector loop set-up.
#pragma once

#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace chorus::reduce_ops {

/// Integer sum and product wrap like unsigned arithmetic (no signed overflow UB).
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

/// Max and Min as every kernel computes them (a NaN in `y` is not taken).
template <typename T>
T max_of(T x, T y) {
  return x < y ? y : x;
}
template <typename T>
T min_of(T x, T y) {
  return y < x ? y : x;
}

template <typename T, typename F>
void apply(T* dst, const T* a, const T* b, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

/// dst = a op b for op Sum, Prod, Max or Min; false for any other op (nothing written).
template <typename T>
bool apply_op(T* dst, const T* a, const T* b, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      apply(dst, a, b, n, [](T x, T y) { return wrap_add(x, y); });
      return true;
    case ReduceOp::Prod:
      apply(dst, a, b, n, [](T x, T y) { return wrap_mul(x, y); });
      return true;
    case ReduceOp::Max:
      apply(dst, a, b, n, [](T x, T y) { return max_of(x, y); });
      return true;
    case ReduceOp::Min:
      apply(dst, a, b, n, [](T x, T y) { return min_of(x, y); });
      return true;
    case ReduceOp::Avg:
      break;
  }
  return false;
}

template <typename T>
bool apply_as(void* dst, const void* a, const void* b, std::size_t n, ReduceOp op) {
  return apply_op(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
}

}  // namespace chorus::reduce_ops

namespace chorus {

/// The most bytes reduce_small reduces.
inline constexpr std::size_t kSmallReduceBytes = 256;

/// dst[i] = a[i] op b[i] with the kernels' bits (the generic kernel's), inline, for a native
/// dtype (not float16/bfloat16), op Sum, Prod, Max or Min, and at most kSmallReduceBytes;
/// false (nothing written) for any other call, which reduce_into then hands to the kernels.
/// `dst` may equal `a` or `b`.
inline bool reduce_small(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op) {
  using namespace reduce_ops;
  if (count * dtype_size(dtype) > kSmallReduceBytes) return false;
  switch (dtype) {
    case DataType::Int8:
      return apply_as<std::int8_t>(dst, a, b, count, op);
    case DataType::Uint8:
      return apply_as<std::uint8_t>(dst, a, b, count, op);
    case DataType::Int32:
      return apply_as<std::int32_t>(dst, a, b, count, op);
    case DataType::Uint32:
      return apply_as<std::uint32_t>(dst, a, b, count, op);
    case DataType::Int64:
      return apply_as<std::int64_t>(dst, a, b, count, op);
    case DataType::Uint64:
      return apply_as<std::uint64_t>(dst, a, b, count, op);
    case DataType::Float32:
      return apply_as<float>(dst, a, b, count, op);
    case DataType::Float64:
      return apply_as<double>(dst, a, b, count, op);
    case DataType::Float16:
    case DataType::Bfloat16:
      break;
  }
  return false;
}

}  // namespace chorus
