// Placements and the regions they cut; see placement.hpp.
#include "placement.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <utility>

namespace chorus::train {

Placement Placement::replicate(std::string mesh_dim, int index, int count) {
  return {.kind = PlacementKind::Replicate,
          .mesh_dim = std::move(mesh_dim),
          .index = index,
          .count = count};
}

Placement Placement::shard(std::string mesh_dim, int index, int count, std::int64_t dim,
                           std::int64_t offset, std::int64_t length) {
  return {.kind = PlacementKind::Shard,
          .mesh_dim = std::move(mesh_dim),
          .index = index,
          .count = count,
          .dim = dim,
          .offset = offset,
          .length = length};
}

Placement Placement::flat(std::string mesh_dim, int index, int count, std::int64_t offset,
                          std::int64_t length) {
  return {.kind = PlacementKind::Flat,
          .mesh_dim = std::move(mesh_dim),
          .index = index,
          .count = count,
          .offset = offset,
          .length = length};
}

std::string to_string(const Placement& p) {
  // Built by appending: GCC 12 at -O3 warns (-Wrestrict) about "literal" + std::string.
  std::string where = p.mesh_dim;
  where.append(" ").append(std::to_string(p.index)).append("/").append(std::to_string(p.count));
  std::string range = "[";
  range.append(std::to_string(p.offset))
      .append(", ")
      .append(std::to_string(p.offset + p.length))
      .append(")");
  std::string text;
  switch (p.kind) {
    case PlacementKind::Replicate:
      return text.append("Replicate(").append(where).append(")");
    case PlacementKind::Shard:
      return text.append("Shard(")
          .append(where)
          .append(", dim ")
          .append(std::to_string(p.dim))
          .append(", ")
          .append(range)
          .append(")");
    case PlacementKind::Flat:
      return text.append("Flat(").append(where).append(", ").append(range).append(")");
  }
  return "?";
}

std::vector<std::int64_t> piece_shape(const std::string& name,
                                      const std::vector<std::int64_t>& global_shape,
                                      const std::vector<Placement>& placements) {
  return detail::region_of(name, global_shape, placements).data_shape();
}

namespace detail {

std::int64_t Box::numel() const {
  std::int64_t n = 1;
  for (std::int64_t s : size) n *= s;
  return n;
}

Shape Region::data_shape() const { return flat ? Shape{flat_length} : box.size; }

std::string Region::key() const {
  std::string out = to_string(box.offset) + to_string(box.size);
  if (flat) out += "flat" + std::to_string(flat_offset) + "+" + std::to_string(flat_length);
  return out;
}

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {

/// InvalidArgument "<placement> of <name> <why>".
void require_cut(bool ok, const Placement& p, const std::string& name, const std::string& why) {
  require_argument(ok, to_string(p) + " of " + name + " " + why);
}

}  // namespace

Region region_of(const std::string& name, const Shape& global_shape,
                 const std::vector<Placement>& placements) {
  for (std::int64_t s : global_shape) {
    require_argument(s >= 0,
                     name + " has a negative size in its global shape " + to_string(global_shape));
  }
  Region region{.box = {Shape(global_shape.size(), 0), global_shape}};
  for (const Placement& p : placements) {
    require_cut(p.count >= 1 && p.index >= 0 && p.index < p.count, p, name,
                "puts index " + std::to_string(p.index) + " outside " + p.mesh_dim + "'s " +
                    std::to_string(p.count) + " ranks");
    require_cut(!region.flat, p, name, "follows a Flat placement (Flat is the last cut)");
    if (p.kind == PlacementKind::Replicate) continue;
    if (p.kind == PlacementKind::Flat) {
      const std::int64_t n = region.box.numel();
      require_cut(p.offset >= 0 && p.length >= 0 && p.offset + p.length <= n, p, name,
                  "cuts a flattened tensor of " + std::to_string(n) + " elements");
      region.flat = true;
      region.flat_offset = p.offset;
      region.flat_length = p.length;
      continue;
    }
    const auto rank = static_cast<std::int64_t>(global_shape.size());
    require_cut(p.dim >= 0 && p.dim < rank, p, name,
                "cuts a dimension of a " + std::to_string(rank) + "-d tensor");
    const auto d = static_cast<std::size_t>(p.dim);
    const std::int64_t size = region.box.size[d];
    require_cut(p.offset >= 0 && p.length >= 0 && p.offset + p.length <= size, p, name,
                "cuts dimension " + std::to_string(p.dim) + " of size " + std::to_string(size));
    region.box.offset[d] += p.offset;
    region.box.size[d] = p.length;
  }
  return region;
}

std::optional<Box> overlap(const Box& a, const Box& b) {
  Box out{Shape(a.offset.size()), Shape(a.offset.size())};
  for (std::size_t i = 0; i < a.offset.size(); ++i) {
    const std::int64_t begin = std::max(a.offset[i], b.offset[i]);
    const std::int64_t end = std::min(a.offset[i] + a.size[i], b.offset[i] + b.size[i]);
    if (end <= begin) return std::nullopt;
    out.offset[i] = begin;
    out.size[i] = end - begin;
  }
  return out;
}

Shape index_in(const Box& box, std::int64_t flat) {
  Shape index(box.size.size());
  for (std::size_t i = box.size.size(); i-- > 0;) {
    index[i] = box.offset[i] + flat % box.size[i];
    flat /= box.size[i];
  }
  return index;
}

}  // namespace detail
}  // namespace chorus::train
