// The arithmetic of placements (checkpoint_format.hpp): which elements of a global tensor a
// piece holds, and where two pieces overlap. Pure functions, no I/O.
//
// Shards compose into a box: each Shard narrows the current box along one dimension, its
// offset counted from the current box's start, so the box's global offset along a dimension
// is the sum of its Shards' offsets there. A trailing Flat keeps a range of the box's row-major
// elements.
#pragma once

#include <chorus/train/checkpoint_format.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train::detail {

using Shape = std::vector<std::int64_t>;

/// A box of a global tensor: indices [offset[i], offset[i] + size[i]) along each dimension.
struct Box {
  Shape offset;
  Shape size;
  std::int64_t numel() const;
  bool operator==(const Box&) const = default;
};

/// The elements a piece holds: its box, or a flat range of its box.
struct Region {
  Box box;
  bool flat = false;
  std::int64_t flat_offset = 0;
  std::int64_t flat_length = 0;

  std::int64_t numel() const { return flat ? flat_length : box.numel(); }
  /// The shape of the piece's data: the box's, or [flat_length].
  Shape data_shape() const;
  /// Equal for equal regions, different otherwise.
  std::string key() const;
};

/// The region `placements` cut from a tensor of `global_shape`; InvalidArgument as
/// piece_shape() describes.
Region region_of(const std::string& name, const Shape& global_shape,
                 const std::vector<Placement>& placements);

/// Where `a` and `b` overlap; nullopt when they share no element.
std::optional<Box> overlap(const Box& a, const Box& b);

/// The global multi-index of element `flat` (row-major) of `box`.
Shape index_in(const Box& box, std::int64_t flat);

/// "[8, 6]" ("[]" for a scalar).
std::string to_string(const Shape& shape);

}  // namespace chorus::train::detail
