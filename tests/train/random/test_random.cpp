// Layout-independent randomness: SplitMix64's reference outputs, and slices of initial weights
// and dropout masks that reassemble, bit for bit, into what one process computes in full.
#include <chorus/error.hpp>
#include <chorus/train/random.hpp>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>

namespace chorus::train {
namespace {

// The first outputs of the reference splitmix64.c seeded with 0.
TEST(SplitMix64, MatchesTheReferenceGenerator) {
  constexpr std::uint64_t gamma = 0x9e3779b97f4a7c15ULL;
  static_assert(splitmix64(0) == 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(gamma), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(splitmix64(2 * gamma), 0x06c45d188009454fULL);
  EXPECT_NE(mix_words({1, 2}), mix_words({2, 1}));
  EXPECT_EQ(unit_double(~0ULL), 1.0 - 0x1.0p-53);
  EXPECT_NE(name_word("fc1.weight"), name_word("fc2.weight"));
}

/// The pieces of `full_shape` cut into `parts[d]` equal slices along each dimension d,
/// reassembled by concatenation in row-major piece order.
template <typename Make>
at::Tensor reassembled(at::IntArrayRef full_shape, std::vector<int> parts, const Make& make) {
  std::function<at::Tensor(std::size_t, SliceSpec)> build = [&](std::size_t d, SliceSpec spec) {
    if (d == full_shape.size()) return make(spec);
    std::vector<at::Tensor> pieces;
    for (int i = 0; i < parts[d]; ++i) {
      SliceSpec with = spec;
      with.push_back(shard_of(full_shape, static_cast<std::int64_t>(d), i, parts[d]));
      pieces.push_back(build(d + 1, with));
    }
    return at::cat(pieces, static_cast<std::int64_t>(d));
  };
  return build(0, {});
}

TEST(InitSlice, EveryLayoutsSlicesReassembleTheFullTensor) {
  for (InitKind kind : {InitKind::Normal, InitKind::Uniform, InitKind::Constant}) {
    const InitSpec spec{.seed = 7,
                        .name = "layers.0.attn.qkv.weight",
                        .kind = kind,
                        .scale = 0.5,
                        .dtype = at::kDouble};
    const at::Tensor full = init_slice(spec, {6, 4, 2});
    for (const std::vector<int>& parts :
         {std::vector<int>{2, 1, 1}, {3, 1, 1}, {1, 4, 1}, {3, 2, 2}, {6, 4, 2}}) {
      const at::Tensor again = reassembled(full.sizes(), parts, [&](const SliceSpec& slice) {
        return init_slice(spec, {6, 4, 2}, slice);
      });
      EXPECT_TRUE(at::equal(again, full)) << parts[0] << "x" << parts[1] << "x" << parts[2];
    }
  }
}

TEST(InitSlice, KindsNamesAndSeedsGiveTheirOwnValues) {
  InitSpec normal{
      .seed = 1, .name = "w", .kind = InitKind::Normal, .scale = 2.0, .dtype = at::kDouble};
  const at::Tensor n = init_slice(normal, {200, 100});
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 4 * 2.0 / 100);  // 4 standard errors
  EXPECT_NEAR(n.std().item<double>(), 2.0, 0.05);
  InitSpec uniform = normal;
  uniform.kind = InitKind::Uniform;
  const at::Tensor u = init_slice(uniform, {200, 100});
  EXPECT_GE(u.min().item<double>(), -2.0);
  EXPECT_LT(u.max().item<double>(), 2.0);
  EXPECT_NEAR(u.mean().item<double>(), 0.0, 4 * 2.0 / std::sqrt(3.0) / 100);
  InitSpec ones{.name = "ln.weight", .kind = InitKind::Constant, .scale = 1.0};
  EXPECT_TRUE(at::equal(init_slice(ones, {3, 2}), at::ones({3, 2})));
  InitSpec other = normal;
  other.name = "v";
  EXPECT_FALSE(at::equal(init_slice(other, {4, 4}), init_slice(normal, {4, 4})));
  other = normal;
  other.seed = 2;
  EXPECT_FALSE(at::equal(init_slice(other, {4, 4}), init_slice(normal, {4, 4})));
  // fp32 is the fp64 value rounded: the same for every layout too.
  InitSpec single = normal;
  single.dtype = at::kFloat;
  EXPECT_TRUE(at::equal(init_slice(single, {4, 4}), init_slice(normal, {4, 4}).to(at::kFloat)));
}

TEST(InitSlice, BadSlicesAreSentences) {
  const InitSpec spec{.name = "w"};
  auto error = [&](const SliceSpec& slice) -> std::string {
    try {
      init_slice(spec, {4, 6}, slice);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error({{1, 4, 3}}), "slice: [4, 7) of dimension 1 is outside the shape [4, 6]");
  EXPECT_EQ(error({{2, 0, 1}}), "slice: dimension 2 is outside a 2-d shape or sliced twice");
  EXPECT_EQ(error({{0, 0, 1}, {0, 1, 1}}),
            "slice: dimension 0 is outside a 2-d shape or sliced twice");
  EXPECT_THROW(shard_of({4, 6}, 1, 0, 4), Error);
  EXPECT_THROW(shard_of({4, 6}, 0, 2, 2), Error);
  EXPECT_EQ(init_slice(spec, {4, 6}, {{1, 2, 0}}).sizes(), (std::vector<std::int64_t>{4, 0}));
}

TEST(DropoutMask, SliceOfTheFullMaskForEveryLayout) {
  const DropoutKey key{.seed = 3, .step = 11, .micro_batch = 2, .layer = 5, .site = 1};
  const std::vector<std::int64_t> shape = {4, 6, 8};  // [batch, sequence, hidden]
  const at::Tensor full = dropout_mask(key, 0.25, shape, {}, at::kDouble);
  // dp 2 over the batch, cp 3 over the sequence, tp 2 over the hidden; and other mixes.
  for (const std::vector<int>& parts :
       {std::vector<int>{2, 3, 2}, {4, 1, 1}, {1, 2, 4}, {2, 6, 1}}) {
    const at::Tensor again = reassembled(shape, parts, [&](const SliceSpec& slice) {
      return dropout_mask(key, 0.25, shape, slice, at::kDouble);
    });
    EXPECT_TRUE(at::equal(again, full)) << parts[0] << "x" << parts[1] << "x" << parts[2];
  }
  // A slice is the pure function of the global index.
  const at::Tensor piece = dropout_mask(key, 0.25, shape, {{1, 3, 2}, {2, 4, 4}}, at::kDouble);
  for (std::int64_t s = 0; s < 2; ++s) {
    for (std::int64_t h = 0; h < 4; ++h) {
      const std::uint64_t index = (0 * 6 + (3 + s)) * 8 + (4 + h);
      EXPECT_EQ(piece[0][s][h].item<double>(), dropout_keeps(key, index, 0.25) ? 4.0 / 3 : 0.0);
    }
  }
}

TEST(DropoutMask, KeepsAboutOneMinusPAndDependsOnEveryKeyWord) {
  const DropoutKey key{.seed = 1, .step = 2, .micro_batch = 3, .layer = 4, .site = 5};
  const at::Tensor mask = dropout_mask(key, 0.1, {100, 100}, {}, at::kDouble);
  const double kept = (mask > 0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.9, 4 * std::sqrt(0.09 / 10000));
  EXPECT_TRUE(((mask == 0.0) | (mask == 1.0 / 0.9)).all().item<bool>());
  for (int word = 0; word < 5; ++word) {
    DropoutKey other = key;
    std::uint64_t* words[] = {&other.seed, &other.step, &other.micro_batch, &other.layer,
                              &other.site};
    ++*words[word];
    EXPECT_FALSE(at::equal(dropout_mask(other, 0.1, {100, 100}, {}, at::kDouble), mask)) << word;
  }
  EXPECT_TRUE(at::equal(dropout_mask(key, 0.0, {3}), at::ones({3})));
  EXPECT_THROW(dropout_mask(key, 1.0, {3}), Error);
  // Applied as x * mask, the gradient is masked the same way.
  at::Tensor x = at::ones({4, 5}, at::kDouble).requires_grad_();
  const at::Tensor m = dropout_mask(key, 0.5, {4, 5}, {}, at::kDouble);
  (x * m).sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), m));
}

}  // namespace
}  // namespace chorus::train
