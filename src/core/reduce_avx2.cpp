// The AVX2 + F16C reduction kernel (32-byte vectors). Exactness against the
// generic kernel, lane by lane:
// - Integers wrap mod 2^bits in both: vector add/mullo keep the low bits.
//   8-bit products: the low byte of a 16-bit product depends only on the low
//   bytes of its factors, so even bytes come from mullo_epi16(x, y) and odd
//   bytes from mullo_epi16(x >> 8, y >> 8) << 8. 64-bit products (AVX2 has no
//   vpmullq): with x = xh*2^32 + xl, x*y mod 2^64 = xl*yl + ((xl*yh + xh*yl) << 32).
// - Float max(x, y) is C's `x < y ? y : x` = vmaxps(y, x), which returns its
//   second operand when the compare is false (NaN or equal zeros), as C does;
//   min likewise with vminps(y, x).
// - fp16: vcvtph2ps is exact, and vcvtps2ph with round-to-nearest-even rounds
//   as float_to_half does, overflow to infinity and subnormals included; a NaN
//   keeps its payload's top bits instead of becoming 0x7e00 (documented in
//   reduce_kernels.hpp).
// - bf16: widening is a 16-bit shift; narrowing is float_to_bf16's integer
//   rounding (x + 0x7fff + lsb) >> 16 with its NaN rule, so it matches exactly.
#include "core/reduce_kernels.hpp"

#include <chorus/error.hpp>

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

// GCC and clang spell "compile what follows for these instructions" differently.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif

#include "core/reduce_simd_loop.hpp"

namespace chorus {
namespace {

struct IntLanes {
  using V = __m256i;
  static V load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(void* p, V v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
};

struct Int8Lanes : IntLanes {
  static constexpr std::size_t kLanes = 32;
  static V add(V x, V y) { return _mm256_add_epi8(x, y); }
  static V mul(V x, V y) {
    const V low_bytes = _mm256_set1_epi16(0x00ff);
    V even = _mm256_and_si256(_mm256_mullo_epi16(x, y), low_bytes);
    V odd = _mm256_mullo_epi16(_mm256_srli_epi16(x, 8), _mm256_srli_epi16(y, 8));
    return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
  }
};

struct I8 : Int8Lanes {
  using T = std::int8_t;
  static V max(V x, V y) { return _mm256_max_epi8(x, y); }
  static V min(V x, V y) { return _mm256_min_epi8(x, y); }
};

struct U8 : Int8Lanes {
  using T = std::uint8_t;
  static V max(V x, V y) { return _mm256_max_epu8(x, y); }
  static V min(V x, V y) { return _mm256_min_epu8(x, y); }
};

struct Int32Lanes : IntLanes {
  static constexpr std::size_t kLanes = 8;
  static V add(V x, V y) { return _mm256_add_epi32(x, y); }
  static V mul(V x, V y) { return _mm256_mullo_epi32(x, y); }
};

struct I32 : Int32Lanes {
  using T = std::int32_t;
  static V max(V x, V y) { return _mm256_max_epi32(x, y); }
  static V min(V x, V y) { return _mm256_min_epi32(x, y); }
};

struct U32 : Int32Lanes {
  using T = std::uint32_t;
  static V max(V x, V y) { return _mm256_max_epu32(x, y); }
  static V min(V x, V y) { return _mm256_min_epu32(x, y); }
};

struct Int64Lanes : IntLanes {
  static constexpr std::size_t kLanes = 4;
  static V add(V x, V y) { return _mm256_add_epi64(x, y); }
  static V mul(V x, V y) {
    V low = _mm256_mul_epu32(x, y);
    V cross = _mm256_add_epi64(_mm256_mul_epu32(x, _mm256_srli_epi64(y, 32)),
                               _mm256_mul_epu32(_mm256_srli_epi64(x, 32), y));
    return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
  }
};

// AVX2 compares 64-bit lanes only as signed; flipping the sign bit of both
// operands maps unsigned order onto signed order.
struct I64 : Int64Lanes {
  using T = std::int64_t;
  static V max(V x, V y) { return _mm256_blendv_epi8(x, y, _mm256_cmpgt_epi64(y, x)); }
  static V min(V x, V y) { return _mm256_blendv_epi8(x, y, _mm256_cmpgt_epi64(x, y)); }
};

struct U64 : Int64Lanes {
  using T = std::uint64_t;
  static V greater(V x, V y) {
    const V sign = _mm256_set1_epi64x(INT64_MIN);
    return _mm256_cmpgt_epi64(_mm256_xor_si256(x, sign), _mm256_xor_si256(y, sign));
  }
  static V max(V x, V y) { return _mm256_blendv_epi8(x, y, greater(y, x)); }
  static V min(V x, V y) { return _mm256_blendv_epi8(x, y, greater(x, y)); }
};

// Arithmetic on 8 fp32 lanes, shared by F32 and the half types.
struct Fp32Math {
  using V = __m256;
  static V add(V x, V y) { return _mm256_add_ps(x, y); }
  static V mul(V x, V y) { return _mm256_mul_ps(x, y); }
  static V max(V x, V y) { return _mm256_max_ps(y, x); }
  static V min(V x, V y) { return _mm256_min_ps(y, x); }
};

struct F32 : Fp32Math {
  using T = float;
  static constexpr std::size_t kLanes = 8;
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
};

struct F64 {
  using T = double;
  using V = __m256d;
  static constexpr std::size_t kLanes = 4;
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static V add(V x, V y) { return _mm256_add_pd(x, y); }
  static V mul(V x, V y) { return _mm256_mul_pd(x, y); }
  static V max(V x, V y) { return _mm256_max_pd(y, x); }
  static V min(V x, V y) { return _mm256_min_pd(y, x); }
};

struct F16 : Fp32Math {
  using T = std::uint16_t;
  static constexpr std::size_t kLanes = 8;
  static V load(const T* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(T* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BF16 : Fp32Math {
  using T = std::uint16_t;
  static constexpr std::size_t kLanes = 8;
  static V load(const T* p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // float_to_bf16, lane by lane: a NaN keeps its top half with the quiet bit
  // set; anything else rounds to nearest even by adding 0x7fff + lsb.
  static void store(T* p, V v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
    __m256i top = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, is_nan), 16);
    // packus interleaves 128-bit lanes: [t0..3 t0..3 | t4..7 t4..7]; qwords 0 and 2
    // hold t0..3 and t4..7.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(top, top), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
};

struct Avx2 {
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

void reduce_into_avx2(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                      ReduceOp op) {
  simd::reduce_into_isa<Avx2>(dst, a, b, count, dtype, op);
}

bool convert_half_avx2(const void* src, DataType from, void* dst, DataType to, std::size_t count) {
  return simd::convert_half_isa<Avx2>(src, from, dst, to, count);
}

bool reduce_halves_avx2(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                        DataType dtype, ReduceOp op) {
  return simd::reduce_halves_isa<Avx2>(out, inputs, n, count, dtype, op);
}

}  // namespace chorus

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86: reduce_isa_supported(Avx2) is false, so this is never called.

namespace chorus {
void reduce_into_avx2(void*, const void*, const void*, std::size_t, DataType, ReduceOp) {
  throw Error(Status::InternalError, "the avx2 reduction kernel exists only on x86");
}
bool convert_half_avx2(const void*, DataType, void*, DataType, std::size_t) {
  throw Error(Status::InternalError, "the avx2 conversion kernel exists only on x86");
}
bool reduce_halves_avx2(void*, const void* const*, std::size_t, std::size_t, DataType, ReduceOp) {
  throw Error(Status::InternalError, "the avx2 half-type kernel exists only on x86");
}
}  // namespace chorus

#endif
