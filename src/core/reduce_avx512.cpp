// The AVX-512 reduction kernel (64-byte vectors; F, BW, DQ, VL and F16C).
// Exactness against the generic kernel, lane by lane:
// - Integers: add, mullo (vpmullq for 64 bits) and max/min keep C's wrapping
//   and ordering. 8-bit products: the low byte of a 16-bit product depends only
//   on the low bytes of its factors (even bytes: mullo_epi16(x, y); odd bytes:
//   mullo_epi16(x >> 8, y >> 8) << 8).
// - Float max(x, y) is C's `x < y ? y : x` = vmaxps(y, x) (the second operand
//   wins on NaN or equal zeros, as in C); min likewise.
// - fp16: vcvtph2ps is exact and vcvtps2ph with round-to-nearest-even rounds as
//   float_to_half does; only a NaN's payload may differ (reduce_kernels.hpp).
// - bf16: the integer rounding of float_to_bf16, (x + 0x7fff + lsb) >> 16 with
//   its NaN rule. Not AVX512-BF16's vcvtneps2bf16: it flushes subnormal inputs
//   and outputs to zero, so its results differ from float_to_bf16's.
#include "core/reduce_kernels.hpp"

#include <chorus/error.hpp>

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
// g++ 12's avx512fintrin.h builds "undefined" vectors as `__m512i __Y = __Y;`,
// which -Wmaybe-uninitialized reports once inlined; the value is never read.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

// GCC and clang spell "compile what follows for these instructions" differently.
#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")
#endif

#include "core/reduce_simd_loop.hpp"

namespace chorus {
namespace {

struct IntLanes {
  using V = __m512i;
  static V load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(void* p, V v) { _mm512_storeu_si512(p, v); }
};

struct Int8Lanes : IntLanes {
  static constexpr std::size_t kLanes = 64;
  static V add(V x, V y) { return _mm512_add_epi8(x, y); }
  static V mul(V x, V y) {
    V even = _mm512_and_si512(_mm512_mullo_epi16(x, y), _mm512_set1_epi16(0x00ff));
    V odd = _mm512_mullo_epi16(_mm512_srli_epi16(x, 8), _mm512_srli_epi16(y, 8));
    return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
  }
};

struct I8 : Int8Lanes {
  using T = std::int8_t;
  static V max(V x, V y) { return _mm512_max_epi8(x, y); }
  static V min(V x, V y) { return _mm512_min_epi8(x, y); }
};

struct U8 : Int8Lanes {
  using T = std::uint8_t;
  static V max(V x, V y) { return _mm512_max_epu8(x, y); }
  static V min(V x, V y) { return _mm512_min_epu8(x, y); }
};

struct Int32Lanes : IntLanes {
  static constexpr std::size_t kLanes = 16;
  static V add(V x, V y) { return _mm512_add_epi32(x, y); }
  static V mul(V x, V y) { return _mm512_mullo_epi32(x, y); }
};

struct I32 : Int32Lanes {
  using T = std::int32_t;
  static V max(V x, V y) { return _mm512_max_epi32(x, y); }
  static V min(V x, V y) { return _mm512_min_epi32(x, y); }
};

struct U32 : Int32Lanes {
  using T = std::uint32_t;
  static V max(V x, V y) { return _mm512_max_epu32(x, y); }
  static V min(V x, V y) { return _mm512_min_epu32(x, y); }
};

struct Int64Lanes : IntLanes {
  static constexpr std::size_t kLanes = 8;
  static V add(V x, V y) { return _mm512_add_epi64(x, y); }
  static V mul(V x, V y) { return _mm512_mullo_epi64(x, y); }
};

struct I64 : Int64Lanes {
  using T = std::int64_t;
  static V max(V x, V y) { return _mm512_max_epi64(x, y); }
  static V min(V x, V y) { return _mm512_min_epi64(x, y); }
};

struct U64 : Int64Lanes {
  using T = std::uint64_t;
  static V max(V x, V y) { return _mm512_max_epu64(x, y); }
  static V min(V x, V y) { return _mm512_min_epu64(x, y); }
};

// Arithmetic on 16 fp32 lanes, shared by F32 and the half types.
struct Fp32Math {
  using V = __m512;
  static V add(V x, V y) { return _mm512_add_ps(x, y); }
  static V mul(V x, V y) { return _mm512_mul_ps(x, y); }
  static V max(V x, V y) { return _mm512_max_ps(y, x); }
  static V min(V x, V y) { return _mm512_min_ps(y, x); }
};

struct F32 : Fp32Math {
  using T = float;
  static constexpr std::size_t kLanes = 16;
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
};

struct F64 {
  using T = double;
  using V = __m512d;
  static constexpr std::size_t kLanes = 8;
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
  static V add(V x, V y) { return _mm512_add_pd(x, y); }
  static V mul(V x, V y) { return _mm512_mul_pd(x, y); }
  static V max(V x, V y) { return _mm512_max_pd(y, x); }
  static V min(V x, V y) { return _mm512_min_pd(y, x); }
};

struct F16 : Fp32Math {
  using T = std::uint16_t;
  static constexpr std::size_t kLanes = 16;
  static V load(const T* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(T* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BF16 : Fp32Math {
  using T = std::uint16_t;
  static constexpr std::size_t kLanes = 16;
  static V load(const T* p) {
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // float_to_bf16, lane by lane: a NaN keeps its top half with the quiet bit
  // set; anything else rounds to nearest even by adding 0x7fff + lsb.
  static void store(T* p, V v) {
    __m512i x = _mm512_castps_si512(v);
    __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    __mmask16 is_nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __m512i quiet = _mm512_or_si512(x, _mm512_set1_epi32(0x00400000));
    __m512i top = _mm512_srli_epi32(_mm512_mask_blend_epi32(is_nan, rounded, quiet), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(top));
  }
};

struct Avx512 {
  using I8 = chorus::I8;
  using U8 = chorus::U8;
  using I32 = chorus::I32;
  using U32 = chorus::U32;
  using I64 = chorus::I64;
  using U64 = chorus::U64;
  using F16 = chorus::F16;
  using BF16 = chorus::BF16;
  using F32 = chorus::F32;
  using F64 = chorus::F64;
};

}  // namespace

void reduce_into_avx512(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                        ReduceOp op) {
  simd::reduce_into_isa<Avx512>(dst, a, b, count, dtype, op);
}

bool convert_half_avx512(const void* src, DataType from, void* dst, DataType to,
                         std::size_t count) {
  return simd::convert_half_isa<Avx512>(src, from, dst, to, count);
}

bool reduce_halves_avx512(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                          DataType dtype, ReduceOp op) {
  return simd::reduce_halves_isa<Avx512>(out, inputs, n, count, dtype, op);
}

}  // namespace chorus

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#pragma GCC diagnostic pop
#endif

#else  // not x86: reduce_isa_supported(Avx512) is false, so this is never called.

namespace chorus {
void reduce_into_avx512(void*, const void*, const void*, std::size_t, DataType, ReduceOp) {
  throw Error(Status::InternalError, "the avx512 reduction kernel exists only on x86");
}
bool convert_half_avx512(const void*, DataType, void*, DataType, std::size_t) {
  throw Error(Status::InternalError, "the avx512 conversion kernel exists only on x86");
}
bool reduce_halves_avx512(void*, const void* const*, std::size_t, std::size_t, DataType, ReduceOp) {
  throw Error(Status::InternalError, "the avx512 half-type kernel exists only on x86");
}
}  // namespace chorus

#endif
