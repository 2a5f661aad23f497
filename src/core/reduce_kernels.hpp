// The per-ISA reduction kernels behind reduce_into(), and the run-time choice
// among them.
//
// Every kernel computes dst[i] = a[i] op b[i] for op in {Sum, Prod, Max, Min}
// and returns results bit-identical to the generic kernel, with one documented
// exception: when the result is a NaN, its payload (and, for sums of two NaNs,
// which input's payload survives) may differ; the result is a NaN either way.
// `dst` may equal `a` or `b`; any other overlap is undefined. Avg or an unknown
// dtype throws Error(InternalError), as in the generic kernel.
//
// Which kernel runs is decided once per process, on first use: the widest ISA
// that both the CPU and the OS support, or the one named by CHORUS_REDUCE_ISA
// (generic | avx2 | avx512). The SIMD files are compiled for their ISA with
// `#pragma GCC target`, never with -march, so the shipped library runs on any
// x86-64 (and on non-x86 builds only the generic kernel exists).
#pragma once

#include <chorus/types.hpp>

#include <cstddef>
#include <string_view>

namespace chorus {

using ReduceKernel = void (*)(void* dst, const void* a, const void* b, std::size_t count,
                              DataType dtype, ReduceOp op);

/// generic: portable loops; avx2: AVX2 + F16C; avx512: AVX-512 F/BW/DQ/VL + F16C.
enum class ReduceIsa : int { Generic = 0, Avx2 = 1, Avx512 = 2 };
inline constexpr ReduceIsa kReduceIsas[] = {ReduceIsa::Generic, ReduceIsa::Avx2, ReduceIsa::Avx512};

/// "generic", "avx2", "avx512".
std::string_view to_string(ReduceIsa isa) noexcept;
/// Parses a name printed by to_string(ReduceIsa); returns false when unknown.
bool parse_reduce_isa(std::string_view name, ReduceIsa* out) noexcept;

/// True when this build contains the kernel and the CPU and OS can run it.
bool reduce_isa_supported(ReduceIsa isa) noexcept;

/// The kernel for `isa`. Throws Error(InvalidArgument) when it is not supported.
ReduceKernel reduce_kernel(ReduceIsa isa);

/// Converts `count` elements from a half type (float16, bfloat16) to float32 or back,
/// bit-identical to core/half.hpp's scalar conversions (a float16 NaN's payload excepted, as
/// for the reduction kernels); false for any other pair of types (nothing converted).
using ConvertKernel = bool (*)(const void* src, DataType from, void* dst, DataType to,
                               std::size_t count);

/// The half type of a conversion between float16/bfloat16 and float32 (either way); Float32
/// when `from` -> `to` is no such pair (the kernels then return false).
inline DataType half_of_conversion(DataType from, DataType to) {
  const DataType half = to == DataType::Float32 ? from : to;
  const bool one_side_fp32 = (from == DataType::Float32) != (to == DataType::Float32);
  return one_side_fp32 && (half == DataType::Float16 || half == DataType::Bfloat16)
             ? half
             : DataType::Float32;
}

/// The half-type conversion kernel for `isa`. Throws Error(InvalidArgument) when it is not
/// supported.
ConvertKernel convert_half_kernel(ReduceIsa isa);

/// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n - 1][i] for a half type (float16,
/// bfloat16) under Sum or Prod: every input widened to fp32 exactly, reduced in fp32 in that
/// order, rounded once (bit-identical to the generic kernel, a NaN's payload excepted); `out`
/// may be one of the inputs. False for any other dtype or op (nothing written).
using ReduceHalvesKernel = bool (*)(void* out, const void* const* inputs, std::size_t n,
                                    std::size_t count, DataType dtype, ReduceOp op);

/// The n-input half-type kernel for `isa`. Throws Error(InvalidArgument) when it is not
/// supported.
ReduceHalvesKernel reduce_halves_kernel(ReduceIsa isa);

/// The ISA reduce_into() uses in this process (resolved once, thread-safe).
/// Throws Error(InvalidArgument) when CHORUS_REDUCE_ISA names an unknown or
/// unsupported ISA.
ReduceIsa active_reduce_isa();

// The kernels themselves (reduce_generic.cpp, reduce_avx2.cpp, reduce_avx512.cpp).
// Call the SIMD ones only when reduce_isa_supported() says so.
void reduce_into_generic(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op);
void reduce_into_avx2(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                      ReduceOp op);
void reduce_into_avx512(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                        ReduceOp op);
bool convert_half_generic(const void* src, DataType from, void* dst, DataType to,
                          std::size_t count);
bool convert_half_avx2(const void* src, DataType from, void* dst, DataType to, std::size_t count);
bool convert_half_avx512(const void* src, DataType from, void* dst, DataType to, std::size_t count);
bool reduce_halves_generic(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                           DataType dtype, ReduceOp op);
bool reduce_halves_avx2(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                        DataType dtype, ReduceOp op);
bool reduce_halves_avx512(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                          DataType dtype, ReduceOp op);

}  // namespace chorus
