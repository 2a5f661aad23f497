// Layout-independent randomness; see include/chorus/train/random.hpp.
#include <chorus/error.hpp>
#include <chorus/train/random.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <numbers>
#include <string>

namespace chorus::train {

namespace {

std::string shape_text(at::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void check_range(at::IntArrayRef full, const SliceRange& r, std::vector<bool>& seen) {
  const auto ndim = static_cast<std::int64_t>(full.size());
  require_argument(r.dim >= 0 && r.dim < ndim && !seen[r.dim],
                   "slice: dimension " + std::to_string(r.dim) + " is outside a " +
                       std::to_string(ndim) + "-d shape or sliced twice");
  seen[r.dim] = true;
  require_argument(r.offset >= 0 && r.length >= 0 && r.offset + r.length <= full[r.dim],
                   "slice: [" + std::to_string(r.offset) + ", " +
                       std::to_string(r.offset + r.length) + ") of dimension " +
                       std::to_string(r.dim) + " is outside the shape " + shape_text(full));
}

/// The row-major index in `full` of every element of `slice`, as a contiguous int64 tensor of
/// the slice's shape: a sum of one broadcast arange per dimension.
at::Tensor global_indices(at::IntArrayRef full, const SliceSpec& slice) {
  std::vector<bool> seen(full.size(), false);
  std::vector<std::int64_t> begin(full.size(), 0), shape = full.vec();
  for (const SliceRange& r : slice) {
    check_range(full, r, seen);
    begin[r.dim] = r.offset;
    shape[r.dim] = r.length;
  }
  at::Tensor index = at::zeros(shape, at::kLong);
  std::int64_t stride = 1;
  for (auto d = static_cast<std::int64_t>(full.size()) - 1; d >= 0; --d) {
    std::vector<std::int64_t> along(full.size(), 1);
    along[d] = shape[d];
    index = index + (at::arange(begin[d], begin[d] + shape[d], at::kLong) * stride).view(along);
    stride *= full[d];
  }
  return index.contiguous();
}

/// The 64 random bits of stream `stream` under `key`.
std::uint64_t bits(std::uint64_t key, std::uint64_t stream) {
  return splitmix64(key ^ splitmix64(stream));
}

double init_value(const InitSpec& spec, std::uint64_t key, std::uint64_t i) {
  switch (spec.kind) {
    case InitKind::Normal: {
      // Box-Muller on two uniforms; 1 - u1 is in (0, 1], so the logarithm is finite.
      const double u1 = unit_double(bits(key, 2 * i)), u2 = unit_double(bits(key, 2 * i + 1));
      return spec.scale * std::sqrt(-2.0 * std::log(1.0 - u1)) *
             std::cos(2.0 * std::numbers::pi * u2);
    }
    case InitKind::Uniform:
      return spec.scale * (2.0 * unit_double(bits(key, i)) - 1.0);
    case InitKind::Constant:
      return spec.scale;
  }
  return 0.0;
}

/// A double tensor of `index`'s shape holding value(global index) per element.
template <typename Value>
at::Tensor per_element(const at::Tensor& index, const Value& value) {
  at::Tensor out = at::empty(index.sizes(), at::kDouble);
  const std::int64_t* in = index.data_ptr<std::int64_t>();
  double* o = out.data_ptr<double>();
  for (std::int64_t k = 0, n = index.numel(); k < n; ++k) {
    o[k] = value(static_cast<std::uint64_t>(in[k]));
  }
  return out;
}

}  // namespace

std::uint64_t name_word(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return splitmix64(h);
}

SliceRange shard_of(at::IntArrayRef full_shape, std::int64_t dim, int index, int parts) {
  require_argument(dim >= 0 && dim < static_cast<std::int64_t>(full_shape.size()),
                   "shard_of: dimension " + std::to_string(dim) + " is outside the shape " +
                       shape_text(full_shape));
  require_argument(parts >= 1 && index >= 0 && index < parts && full_shape[dim] % parts == 0,
                   "shard_of: dimension " + std::to_string(dim) + " of " + shape_text(full_shape) +
                       " cannot give slice " + std::to_string(index) + " of " +
                       std::to_string(parts) + " equal slices");
  const std::int64_t length = full_shape[dim] / parts;
  return {dim, index * length, length};
}

at::Tensor init_slice(const InitSpec& spec, at::IntArrayRef full_shape, const SliceSpec& slice) {
  const std::uint64_t key = mix_words({spec.seed, name_word(spec.name)});
  return per_element(global_indices(full_shape, slice),
                     [&](std::uint64_t i) { return init_value(spec, key, i); })
      .to(spec.dtype);
}

at::Tensor dropout_mask(const DropoutKey& key, double p, at::IntArrayRef full_shape,
                        const SliceSpec& slice, at::ScalarType dtype) {
  require_argument(p >= 0.0 && p < 1.0, "dropout_mask: the drop probability " + std::to_string(p) +
                                            " is outside [0, 1)");
  const double kept = 1.0 / (1.0 - p);
  const std::uint64_t word = dropout_word(key);
  return per_element(global_indices(full_shape, slice),
                     [&](std::uint64_t i) { return dropout_keeps(word, i, p) ? kept : 0.0; })
      .to(dtype);
}

}  // namespace chorus::train
