// Copies for the shared-memory paths. glibc's memcpy moves 2 KiB and more with
// `rep movsb`, which on this machine's x86 parts runs at half the speed of a vector
// loop when the source lines sit in another core's cache — the normal case in the
// host arena, where one rank writes what another reads (2-rank broadcast of 4-64 KiB:
// 2x). copy_bytes uses a 32-byte vector loop there when the CPU has AVX2 (chosen at
// run time, never at build time), memcpy otherwise and below 2 KiB.
#pragma once

#include <cstddef>

namespace chorus {

/// memcpy's contract: `bytes` bytes from `src` to `dst`, which do not overlap.
void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept;

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
