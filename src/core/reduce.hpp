// Element-wise reduction kernels and conversions for every dtype.
//
// Half types (float16, bfloat16) are computed in fp32 and rounded to nearest
// even once per call. Integer arithmetic wraps (two's complement), as in C.
#pragma once

#include <chorus/types.hpp>

#include <cstddef>

namespace chorus {

/// dst[i] = dst[i] op src[i], i < count. `op` is Sum, Prod, Max or Min (callers
/// lower Avg to Sum plus finalize_average). `dst` and `src` may be equal.
void reduce_inplace(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op);

/// dst[i] = a[i] op b[i]; `dst` may equal `a` or `b`.
void reduce_into(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                 ReduceOp op);

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
