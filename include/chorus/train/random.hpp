// Randomness that does not depend on the layout.
//
// Every random number is a pure function of a key and the element's index in the full
// (unsharded, global-batch) tensor, computed with SplitMix64 rather than torch's generator.
// So a rank that holds any slice of a tensor computes exactly the slice of what one process
// computes for the whole tensor: initial weights agree across layouts bit for bit, dropout
// masks agree across layouts (and recomputation replays them for free).
//
//   element value = f(mix(key words...), global flat index)
//
// where the global flat index is the row-major index in the full shape.
#pragma once

#include <chorus/export.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace chorus::train {

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer; the
/// generator's n-th output from seed s is splitmix64(s + n · 0x9e3779b97f4a7c15), n from 1.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A key from words: mix(mix(w0) ^ w1) ... (order matters).
constexpr std::uint64_t mix_words(std::initializer_list<std::uint64_t> words) {
  std::uint64_t h = 0;
  for (std::uint64_t w : words) h = splitmix64(h ^ w);
  return h;
}

/// The top 53 bits of `bits` as a double in [0, 1).
constexpr double unit_double(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// A parameter name as a 64-bit word (FNV-1a, then mixed).
CHORUS_EXPORT std::uint64_t name_word(std::string_view name);

/// One dimension of a slice: elements [offset, offset + length) of dimension `dim`.
struct SliceRange {
  std::int64_t dim = 0;
  std::int64_t offset = 0;
  std::int64_t length = 0;
};
/// A block of a tensor: the ranges of the sliced dimensions (the others are whole).
using SliceSpec = std::vector<SliceRange>;

/// Rank `index` of `parts`' equal slice of dimension `dim` of `full_shape` (InvalidArgument when
/// the dimension is not a multiple of `parts`).
CHORUS_EXPORT SliceRange shard_of(at::IntArrayRef full_shape, std::int64_t dim, int index,
                                  int parts);

enum class InitKind {
  Normal,    ///< mean 0, standard deviation `scale`
  Uniform,   ///< uniform in [-scale, scale)
  Constant,  ///< every element `scale` (zeros, ones)
};

struct InitSpec {
  std::uint64_t seed = 0;
  std::string_view name;  ///< the parameter's logical name ("layers.3.mlp.fc1.weight")
  InitKind kind = InitKind::Normal;
  double scale = 0.02;
  at::ScalarType dtype = at::kFloat;  ///< computed in fp64, then rounded to this type
};

/// The `slice` of the full tensor of shape `full_shape` that (seed, name, kind, scale) defines.
/// Bad slices (a dimension outside the shape or twice, a range outside it) are
/// InvalidArgument.
CHORUS_EXPORT at::Tensor init_slice(const InitSpec& spec, at::IntArrayRef full_shape,
                                    const SliceSpec& slice = {});

/// Where a dropout mask is used: one site of one layer in one micro-batch of one step.
struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t micro_batch = 0;
  std::uint64_t layer = 0;
  std::uint64_t site = 0;  ///< which dropout of the layer (attention probabilities, output, ...)
};

/// The 64-bit word every element of the mask of `k` is drawn from.
constexpr std::uint64_t dropout_word(const DropoutKey& k) {
  return mix_words({k.seed, k.step, k.micro_batch, k.layer, k.site});
}

/// Whether the element at `global_index` of the mask drawn from `word` is kept with drop
/// probability `p`.
constexpr bool dropout_keeps(std::uint64_t word, std::uint64_t global_index, double p) {
  return unit_double(splitmix64(word ^ splitmix64(global_index))) >= p;
}

/// Whether the element at `global_index` is kept with drop probability `p`.
constexpr bool dropout_keeps(const DropoutKey& k, std::uint64_t global_index, double p) {
  return dropout_keeps(dropout_word(k), global_index, p);
}

/// The `slice` of the full dropout mask of `full_shape`, scaled: kept elements are 1/(1-p),
/// dropped ones 0, in `dtype`; `x * mask` is inverted dropout (and its backward). p in [0, 1).
CHORUS_EXPORT at::Tensor dropout_mask(const DropoutKey& key, double p, at::IntArrayRef full_shape,
                                      const SliceSpec& slice = {},
                                      at::ScalarType dtype = at::kFloat);

}  // namespace chorus::train
