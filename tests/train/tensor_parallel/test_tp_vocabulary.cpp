// The vocabulary-parallel embedding and cross-entropy against one-process references (threads
// as ranks, fp64, tp 1-4, a vocabulary of 10: padded to 12 at tp 3 and 4): outputs, every
// gradient, the padding's zero probability and zero gradient, and the ledger's count.
#include <chorus/train/random.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include "tp_test_util.hpp"

namespace chorus::train {
namespace {

using namespace tp_test;

constexpr std::int64_t kSeq = 12, kBatch = 2, kHidden = 12, kVocab = 10;

/// Token ids covering the whole vocabulary, [s, b].
at::Tensor tokens(std::int64_t vocab = kVocab) {
  return (at::arange(kSeq * kBatch, at::kLong) * 7 % vocab).reshape({kSeq, kBatch});
}

/// Rank r's columns of the padded `full` [..., vocab] logits; the padding holds `pad`.
at::Tensor vocab_shard(const at::Tensor& full, const VocabRange& range, double pad) {
  std::vector<std::int64_t> shape = full.sizes().vec();
  shape.back() = range.length;
  at::Tensor out = at::full(shape, pad, at::kDouble);
  out.narrow(-1, 0, range.real).copy_(full.narrow(-1, range.start, range.real));
  return out;
}

TEST(VocabRange, PadsToAMultipleOfTheGroupAndSplitsContiguously) {
  EXPECT_EQ(padded_vocab(10, 1), 10);
  EXPECT_EQ(padded_vocab(10, 2), 10);
  EXPECT_EQ(padded_vocab(10, 3), 12);
  EXPECT_EQ(padded_vocab(10, 4), 12);
  EXPECT_EQ(vocab_range(10, 0, 3), (VocabRange{0, 4, 4}));
  EXPECT_EQ(vocab_range(10, 2, 3), (VocabRange{8, 4, 2}));
  EXPECT_EQ(vocab_range(10, 3, 4), (VocabRange{9, 3, 1}));
  EXPECT_EQ(vocab_range(9, 3, 4), (VocabRange{9, 3, 0}));  // a rank of padding only
  EXPECT_EQ(vocab_range(5, 2, 4), (VocabRange{4, 2, 1}));
  EXPECT_EQ(vocab_range(5, 3, 4), (VocabRange{6, 2, 0}));
  EXPECT_THROW(vocab_range(10, 4, 4), Error);
  EXPECT_THROW(padded_vocab(0, 2), Error);
}

void check_embedding(bool sp) {
  run([sp](const Group& g, int r, int n) {
    VocabParallelEmbedding embedding(
        kVocab, kHidden, g, {.seed = 3, .name = "embedding", .init_std = 1.0, .dtype = at::kDouble},
        {.sequence_parallel = sp});
    const VocabRange range = vocab_range(kVocab, r, n);
    const std::string name = "embedding.weight";
    const at::Tensor full = init_slice(
        {.seed = 3, .name = name, .scale = 1.0, .dtype = at::kDouble}, {kVocab, kHidden});
    const at::Tensor& shard = embedding.weight();
    ASSERT_EQ(shard.size(0), range.length);
    EXPECT_TRUE(at::equal(shard.narrow(0, 0, range.real), full.narrow(0, range.start, range.real)));
    EXPECT_EQ(shard.narrow(0, range.real, range.length - range.real).count_nonzero().item<int>(),
              0);

    const at::Tensor w = filled({kSeq, kBatch, kHidden}, 9.0);
    at::Tensor y = embedding.forward(tokens());
    const std::size_t bytes = kSeq * kBatch * kHidden * sizeof(double);
    using K = CollectiveKind;
    expect_ledger(g, {tp_entry(sp ? K::ReduceScatter : K::AllReduce, bytes)}, "forward");
    (y * (sp ? slice(w, n, r, 0) : w)).sum().backward();
    expect_ledger(g, sp ? std::vector{tp_entry(K::AllGather, bytes)} : std::vector<LedgerEntry>{},
                  "backward");

    at::Tensor wf = full.clone().requires_grad_();
    at::Tensor yf = at::embedding(wf, tokens());
    (yf * w).sum().backward();
    expect_close(sp ? reassembled(g, y, 0) : y, yf, "output");
    const at::Tensor grad = shard.grad();
    expect_close(reassembled(g, grad, 0).narrow(0, 0, kVocab), wf.grad(), "weight gradient");
    EXPECT_EQ(grad.narrow(0, range.real, range.length - range.real).count_nonzero().item<int>(), 0)
        << "padded rows' gradient";
  });
}

TEST(VocabParallelEmbedding, MatchesTheFullEmbedding) { check_embedding(false); }
TEST(VocabParallelEmbedding, MatchesTheFullEmbeddingUnderSequenceParallelism) {
  check_embedding(true);
}

// Logits [s, b, V] sharded along V (padding filled with a large value the loss must ignore);
// the reference is log_softmax + nll on the unpadded logits. Σ_tokens loss ⊙ w is the loss.
TEST(VocabParallelCrossEntropy, MatchesLogSoftmaxNllWithoutGatheringTheLogits) {
  run([](const Group& g, int r, int n) {
    const VocabRange range = vocab_range(kVocab, r, n);
    const at::Tensor full = filled({kSeq, kBatch, kVocab}, 1.5) * 4.0;
    const at::Tensor targets = tokens(), w = filled({kSeq, kBatch}, 2.5);
    at::Tensor logits = vocab_shard(full, range, 50.0).requires_grad_();
    at::Tensor loss = vocab_parallel_cross_entropy(logits, targets, g, kVocab);
    const std::size_t bytes = kSeq * kBatch * sizeof(double);
    const auto all_reduce = tp_entry(CollectiveKind::AllReduce, bytes);
    expect_ledger(g, {all_reduce, all_reduce, all_reduce}, "forward");
    (loss * w).sum().backward();
    expect_ledger(g, {}, "backward");

    at::Tensor zf = full.clone().requires_grad_();
    at::Tensor lf = at::nll_loss(at::log_softmax(zf.reshape({-1, kVocab}), -1),
                                 targets.reshape({-1}), {}, at::Reduction::None)
                        .reshape({kSeq, kBatch});
    (lf * w).sum().backward();
    expect_close(loss, lf, "loss");
    const at::Tensor grad = logits.grad();
    expect_close(reassembled(g, grad, -1).narrow(-1, 0, kVocab), zf.grad(), "logits gradient");
    EXPECT_EQ(grad.narrow(-1, range.real, range.length - range.real).count_nonzero().item<int>(), 0)
        << "padded logits' gradient";
  });
}

/// A tied language model on the padded vocabulary: embedding, tanh, the embedding's logits,
/// cross-entropy; the loss is replicated. Per step the ledger holds PARALLEL.md section 2's
/// per-micro-batch collectives: the embedding's forward all-reduce, the output layer's input
/// gradient all-reduce, the cross-entropy's 3 all-reduces of b·s (under sequence parallelism
/// the embedding's reduce-scatter and the output layer's all-gather, and their adjoints).
void check_tied_language_model(bool sp, std::int64_t vocab = kVocab) {
  run([sp, vocab](const Group& g, int, int) {
    const ParameterInit init{.seed = 5, .name = "embedding", .init_std = 1.0, .dtype = at::kDouble};
    VocabParallelEmbedding embedding(vocab, kHidden, g, init, {.sequence_parallel = sp});
    const at::Tensor targets = tokens(vocab).roll(1, 0), w = filled({kSeq, kBatch}, 4.5);
    at::Tensor loss = vocab_parallel_cross_entropy(
        embedding.logits(at::tanh(embedding.forward(tokens(vocab)))), targets, g, vocab);
    using K = CollectiveKind;
    const std::size_t activation = kSeq * kBatch * kHidden * sizeof(double);
    const auto per_token = tp_entry(K::AllReduce, kSeq * kBatch * sizeof(double));
    const auto forward =
        sp ? std::vector{tp_entry(K::ReduceScatter, activation), tp_entry(K::AllGather, activation)}
           : std::vector{tp_entry(K::AllReduce, activation)};
    std::vector<LedgerEntry> expected = forward;
    expected.insert(expected.end(), {per_token, per_token, per_token});
    expect_ledger(g, expected, "forward");
    (loss * w).sum().backward();
    expect_ledger(
        g,
        sp ? std::vector{tp_entry(K::ReduceScatter, activation), tp_entry(K::AllGather, activation)}
           : std::vector{tp_entry(K::AllReduce, activation)},
        "backward");

    const std::string name = "embedding.weight";
    at::Tensor wf =
        init_slice({.seed = 5, .name = name, .scale = 1.0, .dtype = at::kDouble}, {vocab, kHidden})
            .requires_grad_();
    at::Tensor zf = at::linear(at::tanh(at::embedding(wf, tokens(vocab))), wf);
    at::Tensor lf = at::nll_loss(at::log_softmax(zf.reshape({-1, vocab}), -1),
                                 targets.reshape({-1}), {}, at::Reduction::None)
                        .reshape({kSeq, kBatch});
    (lf * w).sum().backward();
    expect_close(loss, lf, "loss");
    const at::Tensor grad = reassembled(g, embedding.weight().grad(), 0);
    expect_close(grad.narrow(0, 0, vocab), wf.grad(), "weight gradient");
    EXPECT_EQ(grad.narrow(0, vocab, grad.size(0) - vocab).count_nonzero().item<int>(), 0)
        << "padded rows' gradient";
  });
}

TEST(TiedLanguageModel, MatchesTheFullModel) { check_tied_language_model(false); }
TEST(TiedLanguageModel, MatchesTheFullModelUnderSequenceParallelism) {
  check_tied_language_model(true);
}
// A vocabulary of 5: padded to 6 at tp 3 and to 8 at tp 4, where rank 3 holds padding only.
TEST(TiedLanguageModel, MatchesTheFullModelWhenARankHoldsOnlyPadding) {
  check_tied_language_model(false, 5);
  check_tied_language_model(true, 5);
}

TEST(VocabParallel, BadInputsAreSentences) {
  run([](const Group& g, int, int n) {
    if (n != 3) return;
    VocabParallelEmbedding embedding(kVocab, kHidden, g, {.name = "e", .dtype = at::kDouble});
    try {
      embedding.forward(at::tensor({3, 12}, at::kLong));
      ADD_FAILURE() << "token 12 looked up in a vocabulary of 10";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "VocabParallelEmbedding: token ids span [3, 12], outside the vocabulary of 10");
    }
    try {
      vocab_parallel_cross_entropy(at::zeros({2, 3}, at::kDouble), at::zeros({2}, at::kLong), g,
                                   kVocab);
      ADD_FAILURE() << "3 logit columns per rank for a vocabulary of 10 over 3 ranks";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "vocab_parallel_cross_entropy: the input's last dimension is 3, expected 4");
    }
    EXPECT_THROW(vocab_parallel_cross_entropy(at::zeros({2, 4}, at::kLong),
                                              at::zeros({2}, at::kLong), g, kVocab),
                 Error);
    EXPECT_THROW(vocab_parallel_cross_entropy(at::zeros({2, 4}, at::kDouble),
                                              at::zeros({3}, at::kLong), g, kVocab),
                 Error);
    expect_ledger(g, {}, "nothing communicated");
  });
}

}  // namespace
}  // namespace chorus::train
