// Copies for the shared-memory paths. glibc's memcpy moves 2 KiB and more with
// `rep movsb`, which on this machine's x86 parts runs at half the speed of a vector
// loop when the source lines sit in another core's cache — the normal case in the
// host arena, where one rank writes what another reads (2-rank broadcast of 4-64 KiB:
// 2x). copy_bytes uses a 32-byte vector loop there when the CPU has AVX2 (chosen at
// run time, never at build time), memcpy otherwise and below 2 KiB.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace chorus {

/// copy_bytes of more than kSmallCopyBytes (out of line).
void copy_bytes_large(void* dst, const void* src, std::size_t bytes) noexcept;

/// Copies up to this many bytes inline, in at most two overlapping moves of a power of two
/// (a small collective's whole message: a call to memcpy would cost more than the copy).
inline constexpr std::size_t kSmallCopyBytes = 64;

/// memcpy's contract: `bytes` bytes from `src` to `dst`, which do not overlap.
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes > kSmallCopyBytes) return copy_bytes_large(dst, src, bytes);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Both moves load before they store; the ranges do not overlap, so the order is free.
  const auto two = [&](auto width) {
    constexpr std::size_t w = decltype(width)::value;
    unsigned char head[w], tail[w];
    std::memcpy(head, s, w);
    std::memcpy(tail, s + bytes - w, w);
    std::memcpy(d, head, w);
    std::memcpy(d + bytes - w, tail, w);
  };
  if (bytes >= 32) return two(std::integral_constant<std::size_t, 32>{});
  if (bytes >= 16) return two(std::integral_constant<std::size_t, 16>{});
  if (bytes >= 8) return two(std::integral_constant<std::size_t, 8>{});
  if (bytes >= 4) return two(std::integral_constant<std::size_t, 4>{});
  for (std::size_t i = 0; i < bytes; ++i) d[i] = s[i];
}

/// copy_bytes or copy_bytes_streaming, chosen once per call.
using CopyFunction = void (*)(void* dst, const void* src, std::size_t bytes) noexcept;

/// Whether copy_bytes uses its vector loop here (for tests and benchmarks).
bool copy_bytes_vectorized() noexcept;

/// copy_bytes with streaming (non-temporal) stores, which skip reading the destination's
/// lines first: a third less memory traffic when neither side is in cache any more, a
/// loss when the reader would have found the data in cache (x86-64: SSE2, always there;
/// elsewhere copy_bytes). The stores are fenced before it returns, so a flag posted
/// afterwards is seen after them.
void copy_bytes_streaming(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace chorus
