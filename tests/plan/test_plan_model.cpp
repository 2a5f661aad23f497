// The planner's formulas on a tiny GPT (L 2, h 8, a 2, V 16, s 4, ffn 32), by hand.
#include "plan/model.hpp"

#include <gtest/gtest.h>

namespace chorus::plan {
namespace {

ModelConfig tiny() {
  ModelConfig m;
  m.layers = 2, m.hidden = 8, m.heads = 2, m.vocab = 16, m.seq = 4;
  return m;
}

Layout layout(int tp, bool sp = false, int cp = 1) {
  Layout l;
  l.tp = tp, l.sequence_parallel = sp, l.cp = cp, l.micro_batch = 1;
  return l;
}

TEST(PlanModel, ParameterCounts) {
  // Block 12h^2 + 13h = 872; embedding 128, positions 32, final norm 16.
  EXPECT_EQ(tiny().parameters(), 2 * 872 + 128 + 32 + 16);
  // tp 2: attention (4h^2 + 3h)/2 + h + 4h = 180, MLP (2hf + f)/2 + h = 280.
  EXPECT_EQ(block_parameters(tiny(), layout(2)).dense, 460);
  EXPECT_EQ(block_parameters(tiny(), layout(1)).dense, 872);
  EXPECT_EQ(embedding_parameters(tiny(), layout(2)), 64 + 32);
  ModelConfig moe = tiny();
  moe.experts = 4;
  Layout ep2 = layout(1);
  ep2.ep = 2;
  // Attention 4h^2 + 4h + LayerNorms 4h + router E*h = 352; experts 2 x (2hf + f + h) = 1104.
  EXPECT_EQ(block_parameters(moe, ep2).dense, 352);
  EXPECT_EQ(block_parameters(moe, ep2).experts, 1104);
}

TEST(PlanModel, Flops) {
  // 4 tokens: QKV + proj 2*4*4h^2 = 2048, core 4*b*s^2*h = 512, MLP 2*4*2hf = 4096.
  EXPECT_EQ(block_forward_flops(tiny(), layout(1)), 2048 + 512 + 4096);
  EXPECT_EQ(block_forward_flops(tiny(), layout(2)), (2048 + 512 + 4096) / 2.0);
  EXPECT_EQ(attention_core_flops(tiny(), layout(1, false, 2)), 256);
  EXPECT_EQ(head_forward_flops(tiny(), layout(1)), 2 * 4 * 8 * 16);
}

/// arXiv 2104.04473's FLOP count per step (its equation 3): full recomputation runs each
/// block's forward twice (4 passes with the backward's 2), the logits 3 passes. The planner's
/// per-micro-batch FLOPs under full recomputation sum to the same.
TEST(PlanModel, FlopsAreThePapersUnderFullRecomputation) {
  ModelConfig m;  // the paper's 1.7B GPT
  m.layers = 24, m.hidden = 2304, m.heads = 24, m.vocab = 51200, m.seq = 2048;
  Layout l = layout(1);
  l.micro_batch = 16, l.recompute = Recompute::Full;
  const double b = 16, s = 2048, L = 24, h = 2304, V = 51200;
  const double paper = 96 * b * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  const double planner = L * 4 * block_forward_flops(m, l) + 3 * head_forward_flops(m, l);
  EXPECT_NEAR(planner / paper, 1, 1e-12);
  l.tp = 8;  // tp splits every term
  EXPECT_NEAR(8 * (L * 4 * block_forward_flops(m, l) + 3 * head_forward_flops(m, l)) / paper, 1,
              1e-12);
}

TEST(PlanModel, ElementWiseMemoryTraffic) {
  // Tiny GPT, b 1: 4 rows of h 8 (32 elements), 4 rows of ffn 32 (128), attention 2 x 4 x 4 (32).
  const Precision p = Precision::bf16();  // B 2, M 1
  MemoryTraffic t = block_memory_traffic(tiny(), layout(1), p);
  // Without dropout: rows 10B, inner 2B, attention 4B forward; 6B, 3B, 6B backward.
  EXPECT_DOUBLE_EQ(t.forward, 32 * 20 + 128 * 4 + 32 * 8);
  EXPECT_DOUBLE_EQ(t.backward, 32 * 12 + 128 * 6 + 32 * 12);
  EXPECT_DOUBLE_EQ(t.attention_forward, 32 * 8);
  ModelConfig dropout = tiny();
  dropout.dropout = true;
  t = block_memory_traffic(dropout, layout(2), p);
  // tp 2: inner 64, attention 16; dropout adds 2M to the rows' forward and 2(2B + M) to their
  // backward, 2B + M to the attention's each way.
  EXPECT_DOUBLE_EQ(t.forward, 32 * 22 + 64 * 4 + 16 * 13);
  EXPECT_DOUBLE_EQ(t.backward, 32 * 22 + 64 * 6 + 16 * 17);
  EXPECT_DOUBLE_EQ(t.attention_forward, 16 * 13);
  t = block_memory_traffic(dropout, layout(2, true), p);  // SP splits the rows too
  EXPECT_DOUBLE_EQ(t.forward, 16 * 22 + 64 * 4 + 16 * 13);
}

/// bench/gpt/activation_memory.py's activation_formula, which a test finds exact to the byte.
double python_formula(double s, double b, double h, double a, double t, bool sp, double u) {
  const double r = s / u, rbh = r * b * h, attention = (a / (t * u)) * b * s * s;
  const double elements = sp ? 16 * rbh / t + attention + 4 * r * b / t
                             : 4 * rbh + 12 * rbh / t + attention + 4 * r * b;
  return 4 * elements + s * s;
}

TEST(PlanModel, ActivationsMatchTheMeasuredFormula) {
  ModelConfig m;
  m.hidden = 512, m.heads = 8, m.seq = 256;
  for (int tp : {1, 2, 4}) {
    for (bool sp : {false, true}) {
      for (int cp : {1, 2}) {
        if (sp && tp == 1) continue;
        Layout l = layout(tp, sp, cp);
        l.micro_batch = 8;
        EXPECT_EQ(block_activation_bytes(m, l, Precision::fp32()),
                  python_formula(256, 8, 512, 8, tp, sp, cp))
            << l.describe();
      }
    }
  }
  EXPECT_EQ(block_activation_bytes(tiny(), layout(1), Precision::fp32()), 4 * 560 + 16);
}

TEST(PlanModel, ActivationsUnderRecomputationAndDropout) {
  Layout l = layout(1);
  l.recompute = Recompute::Selective;
  EXPECT_EQ(kept_activation_bytes(tiny(), l, Precision::fp32()), 4 * 560 + 16 - 4 * 32);
  l.recompute = Recompute::Full;
  EXPECT_EQ(kept_activation_bytes(tiny(), l, Precision::fp32()), 4 * 4 * 8);
  // Megatron's sbh(10 + 24/t + 5as/(ht)) with 2-byte activations and 1-byte masks, plus the
  // LayerNorm statistics and the causal mask the count adds.
  ModelConfig m = tiny();
  m.dropout = true;
  const double sbh = 4 * 8, t = 2, stats = 2 * 4 * 4, mask = 16;
  EXPECT_EQ(block_activation_bytes(m, layout(2), Precision::bf16()),
            sbh * (10 + 24 / t + 5.0 * 2 * 4 / (8 * t)) + stats + mask);
}

}  // namespace
}  // namespace chorus::plan
