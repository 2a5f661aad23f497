// Element arithmetic for splitting a buffer (pure functions, no I/O).
#pragma once

#include <cstddef>

namespace chorus::algorithms::patterns {

/// A range of elements [offset, offset + count).
struct Block {
  std::size_t offset;
  std::size_t count;
};

/// Block `index` of `total` elements cut into `parts` blocks whose sizes differ
/// by at most one: the first total % parts blocks hold one extra element. Works
/// for total < parts (trailing blocks are empty) and total = 0.
constexpr Block block_of(std::size_t total, int parts, int index) {
  std::size_t p = static_cast<std::size_t>(parts);
  std::size_t i = static_cast<std::size_t>(index);
  std::size_t base = total / p;
  std::size_t extra = total % p;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

/// The index of the block (of block_of(total, parts, .)) holding element `element` < total.
constexpr int block_owner(std::size_t total, int parts, std::size_t element) {
  std::size_t p = static_cast<std::size_t>(parts);
  std::size_t base = total / p;
  std::size_t extra = total % p;
  std::size_t big = extra * (base + 1);  // elements in the blocks that hold one extra
  return static_cast<int>(element < big ? element / (base + 1) : extra + (element - big) / base);
}

inline constexpr std::size_t kMinChunkBytes = 1024;
inline constexpr std::size_t kMaxChunkBytes = 512 * 1024;
inline constexpr std::size_t kTargetChunks = 8;

/// Elements per chunk of a pipelined transfer of `count` elements: about an
/// eighth of the message, clamped to [1 KiB, 512 KiB] and rounded down to whole
/// elements (at least one). Small inputs thus already take multi-chunk paths.
constexpr std::size_t pipeline_chunk_elements(std::size_t count, std::size_t element_size) {
  std::size_t bytes = count * element_size;
  std::size_t chunk = (bytes + kTargetChunks - 1) / kTargetChunks;
  if (chunk < kMinChunkBytes) chunk = kMinChunkBytes;
  if (chunk > kMaxChunkBytes) chunk = kMaxChunkBytes;
  std::size_t elements = chunk / element_size;
  return elements == 0 ? 1 : elements;
}

}  // namespace chorus::algorithms::patterns
