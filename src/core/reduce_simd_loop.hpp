// The loop shared by the SIMD reduction kernels, written once over a "lane
// traits" type per (ISA, dtype). Include it only from a kernel file, after its
// `#pragma GCC target`, so that these templates compile for that ISA; they are
// instantiated with traits from the file's anonymous namespace, so every
// instantiation has internal linkage and the ISAs never meet in the linker.
//
// A lane traits type `L` provides:
//   using T;                 element type in memory
//   using V;                 vector type the arithmetic runs in
//   static constexpr std::size_t kLanes;   elements per vector
//   static V load(const T*); static void store(T*, V);   unaligned
//   static V add(V, V); static V mul(V, V);
//   static V max(V x, V y);  must equal, lane by lane, C's `x < y ? y : x`
//   static V min(V x, V y);  must equal, lane by lane, C's `y < x ? y : x`
// which is what the generic kernel computes (including which operand a NaN
// comparison returns, so float max/min match bit for bit).
#pragma once

#include "core/reduce_kernels.hpp"

#include <cstddef>

namespace chorus::simd {

// Whole vectors, two per iteration for memory-level parallelism; the tail
// (fewer than kLanes elements) goes to the generic kernel, which computes the
// same values. Both vectors are loaded before either is stored, and each store
// touches only the indices just loaded, so dst == a or dst == b is safe.
template <typename L, typename F>
void run_lanes(void* dst, const void* a, const void* b, std::size_t n, DataType dtype, ReduceOp op,
               F f) {
  using T = typename L::T;
  constexpr std::size_t kStep = L::kLanes;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  std::size_t i = 0;
  for (; i + 2 * kStep <= n; i += 2 * kStep) {
    auto r0 = f(L::load(x + i), L::load(y + i));
    auto r1 = f(L::load(x + i + kStep), L::load(y + i + kStep));
    L::store(d + i, r0);
    L::store(d + i + kStep, r1);
  }
  for (; i + kStep <= n; i += kStep) L::store(d + i, f(L::load(x + i), L::load(y + i)));
  reduce_into_generic(d + i, x + i, y + i, n - i, dtype, op);
}

// One functor per op. Functors rather than lambdas: g++ does not give a lambda
// the enclosing `#pragma GCC target`, and vector arguments need it.
template <typename L>
struct AddLanes {
  typename L::V operator()(typename L::V x, typename L::V y) const { return L::add(x, y); }
};
template <typename L>
struct MulLanes {
  typename L::V operator()(typename L::V x, typename L::V y) const { return L::mul(x, y); }
};
template <typename L>
struct MaxLanes {
  typename L::V operator()(typename L::V x, typename L::V y) const { return L::max(x, y); }
};
template <typename L>
struct MinLanes {
  typename L::V operator()(typename L::V x, typename L::V y) const { return L::min(x, y); }
};

template <typename L>
void reduce_lanes(void* dst, const void* a, const void* b, std::size_t n, DataType dtype,
                  ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return run_lanes<L>(dst, a, b, n, dtype, op, AddLanes<L>{});
    case ReduceOp::Prod:
      return run_lanes<L>(dst, a, b, n, dtype, op, MulLanes<L>{});
    case ReduceOp::Max:
      return run_lanes<L>(dst, a, b, n, dtype, op, MaxLanes<L>{});
    case ReduceOp::Min:
      return run_lanes<L>(dst, a, b, n, dtype, op, MinLanes<L>{});
    case ReduceOp::Avg:
      break;
  }
  reduce_into_generic(dst, a, b, n, dtype, op);  // throws the generic kernel's error
}

// `Isa` names one lane traits type per dtype: I8 U8 I32 U32 I64 U64 F16 BF16 F32 F64.
template <typename Isa>
void reduce_into_isa(void* dst, const void* a, const void* b, std::size_t n, DataType dtype,
                     ReduceOp op) {
  switch (dtype) {
    case DataType::Int8:
      return reduce_lanes<typename Isa::I8>(dst, a, b, n, dtype, op);
    case DataType::Uint8:
      return reduce_lanes<typename Isa::U8>(dst, a, b, n, dtype, op);
    case DataType::Int32:
      return reduce_lanes<typename Isa::I32>(dst, a, b, n, dtype, op);
    case DataType::Uint32:
      return reduce_lanes<typename Isa::U32>(dst, a, b, n, dtype, op);
    case DataType::Int64:
      return reduce_lanes<typename Isa::I64>(dst, a, b, n, dtype, op);
    case DataType::Uint64:
      return reduce_lanes<typename Isa::U64>(dst, a, b, n, dtype, op);
    case DataType::Float16:
      return reduce_lanes<typename Isa::F16>(dst, a, b, n, dtype, op);
    case DataType::Bfloat16:
      return reduce_lanes<typename Isa::BF16>(dst, a, b, n, dtype, op);
    case DataType::Float32:
      return reduce_lanes<typename Isa::F32>(dst, a, b, n, dtype, op);
    case DataType::Float64:
      return reduce_lanes<typename Isa::F64>(dst, a, b, n, dtype, op);
  }
  reduce_into_generic(dst, a, b, n, dtype, op);  // throws for an unknown dtype
}

// out = inputs[0] op ... op inputs[n - 1] with the lane traits of a half type `H` (its load
// widens exactly, its store rounds as the scalar conversion does): every input's vector is
// loaded and folded in before the result is stored, so `out` may be one of the inputs. The
// tail (fewer than kLanes elements) runs the same lanes on copies padded with zeros.
template <typename H, typename F>
void reduce_halves_lanes(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                         F f) {
  using T = typename H::T;
  const T* const* in = reinterpret_cast<const T* const*>(inputs);
  T* d = static_cast<T*>(out);
  std::size_t i = 0;
  for (; i + H::kLanes <= count; i += H::kLanes) {
    auto acc = H::load(in[0] + i);
    for (std::size_t k = 1; k < n; ++k) acc = f(acc, H::load(in[k] + i));
    H::store(d + i, acc);
  }
  const std::size_t tail = count - i;
  if (tail == 0) return;
  T lanes[H::kLanes] = {};
  for (std::size_t j = 0; j < tail; ++j) lanes[j] = in[0][i + j];
  auto acc = H::load(lanes);
  for (std::size_t k = 1; k < n; ++k) {
    for (std::size_t j = 0; j < tail; ++j) lanes[j] = in[k][i + j];
    acc = f(acc, H::load(lanes));
  }
  H::store(lanes, acc);
  for (std::size_t j = 0; j < tail; ++j) d[i + j] = lanes[j];
}

template <typename Isa>
bool reduce_halves_isa(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                       DataType dtype, ReduceOp op) {
  using F16 = typename Isa::F16;
  using BF16 = typename Isa::BF16;
  const bool sum = op == ReduceOp::Sum;
  if (!sum && op != ReduceOp::Prod) return false;
  if (dtype == DataType::Float16) {
    if (sum)
      reduce_halves_lanes<F16>(out, inputs, n, count, AddLanes<F16>{});
    else
      reduce_halves_lanes<F16>(out, inputs, n, count, MulLanes<F16>{});
  } else if (dtype == DataType::Bfloat16) {
    if (sum)
      reduce_halves_lanes<BF16>(out, inputs, n, count, AddLanes<BF16>{});
    else
      reduce_halves_lanes<BF16>(out, inputs, n, count, MulLanes<BF16>{});
  } else {
    return false;
  }
  return true;
}

// Half <-> fp32 with the lane traits of a half type `H` (whose vectors hold fp32 lanes: its
// load widens exactly, its store rounds as the scalar conversion does) and of fp32 `F`; the
// tail (fewer than kLanes elements) goes to the scalar conversions.
template <typename H, typename F>
bool convert_lanes(const void* src, DataType from, void* dst, DataType to, std::size_t n) {
  static_assert(H::kLanes == F::kLanes);
  std::size_t i = 0;
  if (to == DataType::Float32) {
    const auto* s = static_cast<const typename H::T*>(src);
    auto* d = static_cast<float*>(dst);
    for (; i + H::kLanes <= n; i += H::kLanes) F::store(d + i, H::load(s + i));
    return convert_half_generic(s + i, from, d + i, to, n - i);
  }
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<typename H::T*>(dst);
  for (; i + H::kLanes <= n; i += H::kLanes) H::store(d + i, F::load(s + i));
  return convert_half_generic(s + i, from, d + i, to, n - i);
}

template <typename Isa>
bool convert_half_isa(const void* src, DataType from, void* dst, DataType to, std::size_t n) {
  switch (half_of_conversion(from, to)) {
    case DataType::Float16:
      return convert_lanes<typename Isa::F16, typename Isa::F32>(src, from, dst, to, n);
    case DataType::Bfloat16:
      return convert_lanes<typename Isa::BF16, typename Isa::F32>(src, from, dst, to, n);
    default:
      return false;
  }
}

}  // namespace chorus::simd
