// The GPT model at tp 1-4, with and without sequence parallelism, with and without dropout,
// under each recomputation, against a plain torch implementation of the same model in one
// process (gpt_reference.hpp; threads as ranks, fp64): the loss, every parameter's gradient
// reassembled from the shards, five SGD steps, and the ledger's exact count of collectives per
// forward and backward (PARALLEL.md section 2).
#include <chorus/train/gpt.hpp>

#include "gpt_reference.hpp"

namespace chorus::train {
namespace {

using namespace tp_test;
using namespace gpt_reference;

// A vocabulary of 10 is padded at t 3 and 4.
constexpr std::int64_t kVocab = 10;
constexpr double kLearningRate = 0.5;
using K = CollectiveKind;

constexpr std::uint64_t kSeed = 17;

GptConfig config(bool sp) { return tiny_gpt::config(kVocab, kSeed, sp); }

at::Tensor tokens() { return tiny_gpt::tokens(kVocab); }
at::Tensor targets() { return tiny_gpt::targets(kVocab); }

at::Tensor loss_of(Parameters& p, const Dropout& dropout) {
  return gpt_reference::loss(p, kVocab, tokens(), targets(), dropout);
}

// One forward + backward, per PARALLEL.md section 2, with act = b·s·h and tok = b·s elements:
//   tensor parallelism: forward 1 all-reduce of act per row-parallel layer (2 per block) and
//   1 for the embedding, 3 of tok in the cross-entropy; backward 1 of act per column-parallel
//   layer (2 per block) and 1 for the tied logits' input: 2L + 1 of act and 3 of tok forward,
//   2L + 1 of act backward.
//   sequence parallelism: each all-reduce of act becomes a reduce-scatter forward (the
//   row-parallel layers, the embedding: 2L + 1) or an all-gather (the column-parallel inputs,
//   the logits' input: 2L + 1), and backward runs each adjoint once: 2L + 1 all-gathers and
//   2L + 1 reduce-scatters of act forward and the same backward; the 3 all-reduces of tok stay.
//   Then the partial gradients (LayerNorms, row-parallel biases, position embedding) are
//   summed in one all-reduce of their concatenation.
//   full recomputation: backward first runs each block's forward again, with its forward
//   collectives of act: 2L more all-reduces (TP: 6 per block in all), or under SP 2L more
//   all-gathers and 2L more reduce-scatters; selective recomputation communicates nothing more.
// Dropout draws the masks of step `step` (set_step), as the reference does.
void check_model(bool sp, double dropout = 0, Recompute recompute = Recompute::None) {
  GptConfig c = config(sp);
  c.dropout = dropout;
  c.recompute = recompute;
  run([&c](const Group& g, int, int) {
    const bool sp = c.sequence_parallel;
    GptModel model(c, g);
    expect_totals(g, {}, "construction");
    Parameters reference = gpt_reference::parameters(kVocab, kSeed);
    std::vector<at::Tensor> reference_list;
    for (auto& [name, t] : reference) reference_list.push_back(t);
    const std::size_t act = kBatch * kSeq * kHidden * sizeof(double);
    const std::size_t tok = kBatch * kSeq * sizeof(double);
    const std::size_t blocks = 2 * kLayers + 1;
    const std::size_t again = c.recompute == Recompute::Full ? 2 * kLayers : 0;
    std::size_t partial_bytes = 0;
    for (const at::Tensor& p : model.partial_gradient_parameters())
      partial_bytes += p.numel() * sizeof(double);
    EXPECT_EQ(partial_bytes, sp ? (kSeq * kHidden + kLayers * 6 * kHidden + 2 * kHidden) * 8 : 0);

    for (int step = 0; step < 5; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      model.set_step({.step = static_cast<std::uint64_t>(step)});
      const at::Tensor loss = model.loss(tokens(), targets());
      const LedgerTotal reductions = times(3, tok);
      expect_totals(
          g,
          sp ? LedgerTotals{{{"tp", K::AllGather}, times(blocks, act)},
                            {{"tp", K::ReduceScatter}, times(blocks, act)},
                            {{"tp", K::AllReduce}, reductions}}
             : LedgerTotals{{{"tp", K::AllReduce}, {blocks + 3, blocks * act + reductions.bytes}}},
          "forward");
      loss.backward();
      expect_totals(
          g,
          // Under SP each block's two column-parallel layers gather their input again.
          sp ? LedgerTotals{{{"tp", K::AllGather}, times(blocks + again + 2 * kLayers, act)},
                            {{"tp", K::ReduceScatter}, times(blocks + again, act)}}
             : LedgerTotals{{{"tp", K::AllReduce}, times(blocks + again, act)}},
          "backward");
      all_reduce_partial_gradients(model.partial_gradient_parameters(), g);
      expect_totals(
          g, sp ? LedgerTotals{{{"tp", K::AllReduce}, times(1, partial_bytes)}} : LedgerTotals{},
          "partial gradients");

      const Dropout masks{.p = c.dropout, .seed = kSeed, .step = static_cast<std::uint64_t>(step)};
      const at::Tensor reference_loss = loss_of(reference, masks);
      reference_loss.backward();
      expect_close(loss, reference_loss, "loss");
      expect_matches(g, model, reference, kVocab, true);
      sgd_step(model.parameters(), kLearningRate);
      sgd_step(reference_list, kLearningRate);
    }
    expect_matches(g, model, reference, kVocab, false);
  });
}

TEST(GptModel, MatchesTheOneProcessModel) { check_model(false); }
TEST(GptModel, MatchesTheOneProcessModelUnderSequenceParallelism) { check_model(true); }

constexpr double kDropout = 0.1;

TEST(GptModel, DropoutMatchesTheOneProcessModel) { check_model(false, kDropout); }
TEST(GptModel, DropoutMatchesTheOneProcessModelUnderSequenceParallelism) {
  check_model(true, kDropout);
}
TEST(GptModel, SelectiveRecomputationMatchesTheOneProcessModel) {
  check_model(false, kDropout, Recompute::Selective);
}
TEST(GptModel, SelectiveRecomputationMatchesUnderSequenceParallelism) {
  check_model(true, kDropout, Recompute::Selective);
}
TEST(GptModel, FullRecomputationMatchesTheOneProcessModel) {
  check_model(false, kDropout, Recompute::Full);
}
TEST(GptModel, FullRecomputationMatchesUnderSequenceParallelism) {
  check_model(true, kDropout, Recompute::Full);
}

void expect_construction_error(GptConfig c, const Group& g, const std::string& message) {
  try {
    GptModel model(c, g);
    ADD_FAILURE() << "constructed: expected " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(GptModel, BadShapesAreSentences) {
  run([](const Group& g, int, int n) {
    if (n != 4) return;
    GptConfig c = config(false);
    c.heads = 6;
    expect_construction_error(c, g,
                              "GptModel: heads 6 is not a multiple of the tp group's 4 ranks");
    c.heads = 5;
    expect_construction_error(c, g, "GptModel: hidden 24 is not a multiple of heads 5");
    c = config(true);
    c.sequence = 6;
    expect_construction_error(
        c, g,
        "GptModel (sequence parallel): sequence 6 is not a multiple of the tp group's 4 ranks");
    c.layers = 0;
    expect_construction_error(c, g,
                              "GptModel: layers 0, hidden 24, heads 12, vocab 10, sequence 6 must "
                              "all be positive");
    c = config(false);  // vocabulary 10 over 4 ranks: padded to 12 unless padding is off
    c.pad_vocabulary = false;
    expect_construction_error(
        c, g,
        "GptModel (vocabulary padding off): vocab 10 is not a multiple of the tp group's 4 ranks");
    c.vocab = 12;
    const GptModel unpadded(c, g);
    for (const GptParameter& p : unpadded.named_parameters()) {  // 12 / 4 rows, no padding
      if (p.name == "embedding.weight") {
        EXPECT_EQ(p.tensor.size(0), 3);
      }
    }
    const GptModel model(config(false), g);
    try {
      model.loss(at::zeros({kSeq + 1, kBatch}, at::kLong),
                 at::zeros({kSeq + 1, kBatch}, at::kLong));
      ADD_FAILURE() << "13 tokens through 12 positions";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "GptModel: a sequence of 13 tokens, the model holds 12 positions");
    }
    EXPECT_THROW(all_reduce_partial_gradients({at::zeros({2}, at::kDouble).requires_grad_(),
                                               at::zeros({2}, at::kFloat).requires_grad_()},
                                              g),
                 Error);
    expect_totals(g, {}, "nothing communicated");
  });
}

}  // namespace
}  // namespace chorus::train
