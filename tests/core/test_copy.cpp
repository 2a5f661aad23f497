// copy_bytes and copy_bytes_streaming (core/copy.hpp) against the bytes it was given: every size
// around the vector loop's edges (its 2 KiB start, its 128-byte steps, the 32-byte alignment of the
// destination), every source and destination offset within a line, and that nothing outside the
// destination range is touched.
#include "core/copy.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus {
namespace {

std::vector<std::size_t> sizes() {
  std::vector<std::size_t> out = {0, 1, 31, 32, 33, 127, 128, 129, 2047, 2048, 2049};
  for (std::size_t base : {std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 18}) {
    for (std::size_t delta : {0, 1, 31, 32, 95, 127, 128, 4095}) out.push_back(base + delta);
  }
  return out;
}

using CopyFunction = void (*)(void*, const void*, std::size_t) noexcept;

void expect_exact_copies(CopyFunction copy, const char* name) {
  for (std::size_t n : sizes()) {
    for (std::size_t src_offset : {0, 1, 13, 32, 63}) {
      for (std::size_t dst_offset : {0, 7, 31, 32, 33}) {
        std::vector<std::uint8_t> src(n + 128), dst(n + 256, 0xEE);
        for (std::size_t i = 0; i < src.size(); ++i)
          src[i] = static_cast<std::uint8_t>(i * 131 + 7);
        copy(dst.data() + 64 + dst_offset, src.data() + src_offset, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 64 + dst_offset && i < 64 + dst_offset + n;
          const std::uint8_t expected = inside ? src[i - 64 - dst_offset + src_offset] : 0xEE;
          ASSERT_EQ(dst[i], expected) << name << " size " << n << " src+" << src_offset << " dst+"
                                      << dst_offset << " byte " << i;
        }
      }
    }
  }
}

TEST(CopyBytes, CopiesEveryByteAndNothingElseAtEveryAlignment) {
  expect_exact_copies(copy_bytes, "copy_bytes");
}

// The streaming copy's 16-byte head, 64-byte steps and tail, at every offset.
TEST(CopyBytes, StreamingCopiesEveryByteAndNothingElseAtEveryAlignment) {
  expect_exact_copies(copy_bytes_streaming, "copy_bytes_streaming");
}

TEST(CopyBytes, VectorLoopWhereTheCpuHasAvx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(copy_bytes_vectorized(), __builtin_cpu_supports("avx2") != 0);
#else
  EXPECT_FALSE(copy_bytes_vectorized());
#endif
}

}  // namespace
}  // namespace chorus
