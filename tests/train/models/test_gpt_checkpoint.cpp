// GPT checkpoints across tensor-parallel degrees (threads as ranks, fp64): a model saved at
// tp 2 (and at tp 3 and 4: every t > 1 pads the vocabulary) loads at tp 1-4 into exactly the
// one-process model's tensors, shard by shard, and gives its loss; the checkpoint holds the
// unsharded layout (vocabulary unpadded, QKV part-major); another model's checkpoint is refused.
#include <chorus/error.hpp>
#include <chorus/train/gpt_checkpoint.hpp>

#include "../checkpoint_test_util.hpp"
#include "../tensor_parallel/tp_test_util.hpp"
#include "tiny_gpt.hpp"

#include <map>

namespace chorus::train {
namespace {

using namespace tp_test;

using tiny_gpt::kHeads, tiny_gpt::kHidden;

// A vocabulary of 11 is padded at every t > 1.
constexpr std::int64_t kVocab = 11;

GptConfig config(std::uint64_t seed, bool sp = false) { return tiny_gpt::config(kVocab, seed, sp); }
at::Tensor tokens() { return tiny_gpt::tokens(kVocab); }
at::Tensor targets() { return tiny_gpt::targets(kVocab); }

/// The one-process model: full tensors in the model's own (head-major) layout, and its loss.
struct Reference {
  std::map<std::string, at::Tensor> full;
  double loss = 0;
};

/// A tp 1 model from seed 17 with every parameter moved off its initial value (biases and
/// LayerNorms included), so that a loader that re-initialised would be caught.
Reference make_reference() {
  Reference ref;
  chorus::testing::ThreadJob job(1);
  job.run([&](Communicator& c) {
    const GptModel model(config(17), whole(c));
    at::NoGradGuard no_grad;
    double salt = 0;
    for (const GptParameter& p : model.named_parameters()) {
      p.tensor.add_(filled(p.tensor.sizes(), salt += 1) * 0.1);
      ref.full[p.name] = p.tensor.detach().clone();
    }
    ref.loss = model.loss(tokens(), targets()).item<double>();
  });
  return ref;
}

/// Rank r of t's tensor of `p` cut from the reference by the model's own layout (contiguous
/// slices along shard_dim; the embedding's real rows then zero padding): the oracle, written
/// without the checkpoint code.
at::Tensor expected_local(const Reference& ref, const GptParameter& p, int r, int t) {
  const at::Tensor& full = ref.full.at(p.name);
  if (p.shard_dim < 0) return full;
  if (p.name != "embedding.weight") return slice(full, t, r, p.shard_dim);
  const VocabRange range = vocab_range(kVocab, r, t);
  at::Tensor out = at::zeros({range.length, kHidden}, at::kDouble);
  out.narrow(0, 0, range.real).copy_(full.narrow(0, range.start, range.real));
  return out;
}

/// Sets this rank's parameters to the reference's (the model being saved).
void set_to_reference(const GptModel& model, const Reference& ref) {
  at::NoGradGuard no_grad;
  for (const GptParameter& p : model.named_parameters()) {
    p.tensor.copy_(expected_local(ref, p, model.tp().rank(), model.tp().size()));
  }
}

/// A directory for one test.
class Dir : public chorus::testing::TempDir {
 public:
  Dir() : TempDir("gpt") {}
};

void save_at(int t, const std::string& path, const Reference& ref) {
  chorus::testing::ThreadJob job(t);
  job.run([&](Communicator& c) {
    const GptModel model(config(17), whole(c));
    set_to_reference(model, ref);
    save_gpt_checkpoint(path, model, TrainingState{5, 0, {}, {}}, c);
  });
}

/// Loads `path` at degree t into a model from another seed whose padding rows hold garbage,
/// then compares every local tensor bitwise and the loss within PARALLEL.md's tolerance
/// (bitwise at t = 1, the same operations on the same shapes).
void load_at(int t, bool sp, const std::string& path, const Reference& ref) {
  SCOPED_TRACE("loaded at tp " + std::to_string(t) + (sp ? " with sequence parallelism" : ""));
  chorus::testing::ThreadJob job(t);
  job.run([&](Communicator& c) {
    GptModel model(config(99, sp), whole(c));
    const at::Tensor embedding = model.named_parameters().front().tensor;
    const VocabRange range = vocab_range(kVocab, c.rank(), t);
    embedding.detach().narrow(0, range.real, range.length - range.real).fill_(7.0);
    EXPECT_EQ(load_gpt_checkpoint(path, model).step, 5);
    for (const GptParameter& p : model.named_parameters()) {
      EXPECT_TRUE(at::equal(p.tensor, expected_local(ref, p, c.rank(), t))) << p.name;
    }
    const double loss = model.loss(tokens(), targets()).item<double>();
    if (t == 1) {
      EXPECT_EQ(loss, ref.loss);
    }
    EXPECT_NEAR(loss, ref.loss, 1e-10 * std::abs(ref.loss));
  });
}

/// Reads every logical tensor whole (Replicate) from the checkpoint: the embedding unpadded,
/// QKV part-major ([3, h, h]: q rows, then k, then v, each head by head), the rest as the
/// one-process model's.
void expect_unsharded_layout(const std::string& path, const Reference& ref) {
  std::vector<TensorPiece> targets;
  for (const auto& [name, full] : ref.full) {
    std::vector<std::int64_t> shape = full.sizes().vec();
    if (name.find(".attention.qkv.") != std::string::npos) {
      shape[0] = kHidden;
      shape.insert(shape.begin(), 3);
    }
    targets.push_back({name, shape, at::kDouble, {}, {}});
  }
  load_tensor_checkpoint(path, targets);
  const std::int64_t d = kHidden / kHeads;
  for (const TensorPiece& t : targets) {
    at::Tensor want = ref.full.at(t.name);
    if (t.global_shape.front() == 3) {  // rows (head, part, j) -> (part, head, j)
      std::vector<std::int64_t> heads{kHeads, 3, d};
      if (want.dim() == 2) heads.push_back(kHidden);
      want = want.view(heads).transpose(0, 1).reshape(t.global_shape);
    }
    EXPECT_TRUE(at::equal(t.data, want)) << t.name;
  }
}

TEST(GptCheckpoint, SavedAtTp2LoadsAtEveryDegree) {
  const Reference ref = make_reference();
  Dir dir;
  const std::string path = dir.file("gpt.ckpt");
  save_at(2, path, ref);
  expect_unsharded_layout(path, ref);
  for (int t : {1, 2, 3, 4}) load_at(t, false, path, ref);
  load_at(4, true, path, ref);
}

TEST(GptCheckpoint, PaddedVocabularyRoundTripsUnpadded) {
  const Reference ref = make_reference();
  Dir dir;
  const std::string path = dir.file("gpt4.ckpt");
  save_at(4, path, ref);  // vocabulary 11 padded to 12: rank 3 holds 2 real rows and 1 padding
  expect_unsharded_layout(path, ref);
  for (int t : {1, 3}) load_at(t, false, path, ref);
  const std::string path3 = dir.file("gpt3.ckpt");
  save_at(3, path3, ref);  // padded to 12 as well: rank 2 holds 3 real rows and 1 padding
  expect_unsharded_layout(path3, ref);
  for (int t : {1, 2}) load_at(t, false, path3, ref);
}

/// The InvalidArgument sentence `action` throws.
template <class Action>
std::string refusal(Action&& action) {
  return chorus::testing::error_of(Status::InvalidArgument, action);
}

TEST(GptCheckpoint, AnotherModelsCheckpointIsRefusedAndNothingChanges) {
  const Reference ref = make_reference();
  Dir dir;
  const std::string path = dir.file("gpt.ckpt");
  save_at(2, path, ref);
  chorus::testing::ThreadJob job(1);
  job.run([&](Communicator& c) {
    GptConfig other = config(99);
    other.hidden = 36;
    other.vocab = 10;
    GptModel model(other, whole(c));
    const at::Tensor before = model.named_parameters().back().tensor.clone();
    EXPECT_EQ(refusal([&] { load_gpt_checkpoint(path, model); }),
              "checkpoint " + path +
                  " was saved from a model with hidden 24 and vocab 11, this model has hidden 36 "
                  "and vocab 10");
    EXPECT_TRUE(at::equal(model.named_parameters().back().tensor, before));
  });
}

}  // namespace
}  // namespace chorus::train
