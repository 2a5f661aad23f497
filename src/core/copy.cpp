// copy_bytes; see copy.hpp.
#include "core/copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>

namespace chorus {
namespace {

constexpr std::size_t kVectorFrom = 2048;  ///< below this memcpy already uses vector moves

#if defined(__x86_64__) || defined(__i386__)
bool detect_avx2() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

/// Aligns the destination to 32 bytes, then moves 128 bytes per iteration with unaligned
/// loads (all four issued before the stores, so remote lines are fetched in parallel).
__attribute__((target("avx2"))) void copy_avx2(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (32 - (reinterpret_cast<std::uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_store_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  std::memcpy(d, s, n);
}
#else
bool detect_avx2() noexcept { return false; }
void copy_avx2(void* dst, const void* src, std::size_t n) noexcept { std::memcpy(dst, src, n); }
#endif

}  // namespace

bool copy_bytes_vectorized() noexcept {
  static const bool avx2 = detect_avx2();
  return avx2;
}

void copy_bytes_large(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes >= kVectorFrom && copy_bytes_vectorized()) {
    copy_avx2(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void copy_bytes_streaming(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__x86_64__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = std::min(bytes, (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, bytes);
  _mm_sfence();
#else
  copy_bytes(dst, src, bytes);
#endif
}

}  // namespace chorus
