// Element-wise reduction kernels and conversions for every dtype.
//
// Half types (float16, bfloat16) are computed in fp32 and rounded to nearest
// even once per call. Integer arithmetic wraps (two's complement), as in C.
#pragma once

#include "core/reduce_small.hpp"

#include <chorus/types.hpp>

#include <cstddef>

namespace chorus {

/// reduce_into by the kernels: the SIMD kernel of the ISA chosen at run time (the generic
/// kernel below one 256-bit vector). Same bits as reduce_small where both serve.
void reduce_into_kernels(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op);

/// dst[i] = a[i] op b[i]; `dst` may equal `a` or `b`. `op` is Sum, Prod, Max or Min (callers
/// lower Avg to Sum plus finalize_average). Inline for calls of at most kSmallReduceBytes of a
/// native dtype (reduce_small: a small call's reduction costs its loop, not the kernel
/// dispatch), by the kernels otherwise. Always inlined: out of line, its call costs a small
/// arena reduce about 25 instructions (callgrind).
[[gnu::always_inline]] inline void reduce_into(void* dst, const void* a, const void* b,
                                               std::size_t count, DataType dtype, ReduceOp op) {
  if (!reduce_small(dst, a, b, count, dtype, op)) reduce_into_kernels(dst, a, b, count, dtype, op);
}

/// dst[i] = dst[i] op src[i], i < count, as reduce_into. `dst` and `src` may be equal.
inline void reduce_inplace(void* dst, const void* src, std::size_t count, DataType dtype,
                           ReduceOp op) {
  reduce_into(dst, dst, src, count, dtype, op);
}

/// out = inputs[0] op inputs[1] op ... op inputs[n - 1], `count` elements each, for a half
/// type (float16, bfloat16) and Sum or Prod: every input widened to fp32, reduced in fp32 in
/// that order and rounded once, in one pass. `out` may be one of the inputs; n >= 1.
void reduce_halves(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                   DataType dtype, ReduceOp op);

/// Converts `count` elements. Supported pairs: any dtype to the same dtype;
/// float16/bfloat16 <-> float32; every integer dtype <-> int64 (signed) or
/// uint64 (unsigned) and back (narrowing truncates to the low bits).
void convert(const void* src, DataType from, void* dst, DataType to, std::size_t count);

/// The dtype in which reductions of `dtype` with `op` are carried out:
/// float32 for half types; int64/uint64 for 8/32-bit integers when op is Avg;
/// otherwise `dtype` itself.
DataType accumulation_type(DataType dtype, ReduceOp op) noexcept;

/// Divides every element by `divisor` in place: floats by a single division,
/// integers with C's truncation toward zero.
void finalize_average(void* buf, std::size_t count, DataType dtype, int divisor);

}  // namespace chorus
