// The GPT model's parameters in the checkpoint format; see include/chorus/train/gpt_checkpoint.hpp.
//
// QKV: the model's local rows are head-major, [a/t, 3, d] (then the input features); the saved
// layout is part-major, [3, a·d]. Rank r's heads a/t are a contiguous range of heads, so its
// saved piece is [3, h/t] at offset r·h/t of dimension 1, and the conversion is a transpose of
// the first two axes of the [a/t, 3, d, ...] view.
#include "../checkpoint/settings.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt_checkpoint.hpp>

#include <ATen/ATen.h>

namespace chorus::train {
namespace {

/// How a parameter's saved piece relates to the tensor the model holds.
enum class Layout {
  Same,        ///< the piece is the local tensor
  Vocabulary,  ///< the piece is the local tensor's real (unpadded) rows
  Qkv,         ///< the piece is the local tensor's rows reordered part-major
};

struct Entry {
  at::Tensor local;
  Layout layout = Layout::Same;
  TensorPiece piece;  ///< without data
};

bool is_qkv(const std::string& name) {
  const auto ends = [&name](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".attention.qkv.weight") || ends(".attention.qkv.bias");
}

Entry entry_of(const GptParameter& p, const GptConfig& c, const Group& tp) {
  const int r = tp.rank(), t = tp.size();
  std::vector<std::int64_t> shape = p.tensor.sizes().vec();
  Entry e{p.tensor, Layout::Same, {p.name, shape, p.tensor.scalar_type(), {}, {}}};
  TensorPiece& piece = e.piece;
  if (p.shard_dim < 0) {
    piece.placements = {Placement::replicate(tp.name, r, t)};
  } else if (p.name == "embedding.weight") {
    const VocabRange range = vocab_range(c.vocab, r, t);
    e.layout = Layout::Vocabulary;
    piece.global_shape[0] = c.vocab;
    piece.placements = {Placement::shard(tp.name, r, t, 0, range.start, range.real)};
  } else if (is_qkv(p.name)) {
    const std::int64_t features = shape[0] / 3;  // h/t
    e.layout = Layout::Qkv;
    piece.global_shape[0] = c.hidden;
    piece.global_shape.insert(piece.global_shape.begin(), 3);
    piece.placements = {Placement::shard(tp.name, r, t, 1, r * features, features)};
  } else {
    const auto d = static_cast<std::size_t>(p.shard_dim);
    piece.global_shape[d] *= t;
    piece.placements = {Placement::shard(tp.name, r, t, p.shard_dim, r * shape[d], shape[d])};
  }
  return e;
}

std::vector<Entry> entries(const std::vector<GptParameter>& parameters, const GptConfig& c,
                           const Group& tp) {
  std::vector<Entry> out;
  for (const GptParameter& p : parameters) out.push_back(entry_of(p, c, tp));
  return out;
}

/// The local QKV tensor [3·n, ...] viewed head-major [n/d, 3, d, ...] (n = h/t features).
std::vector<std::int64_t> head_major(const at::Tensor& local, std::int64_t head_dim) {
  std::vector<std::int64_t> shape{local.size(0) / 3 / head_dim, 3, head_dim};
  for (std::int64_t i = 1; i < local.dim(); ++i) shape.push_back(local.size(i));
  return shape;
}

at::Tensor saved_form(const Entry& e, std::int64_t head_dim) {
  const at::Tensor local = e.local.detach();
  switch (e.layout) {
    case Layout::Same:
      return local;
    case Layout::Vocabulary:
      return local.narrow(0, 0, e.piece.placements[0].length);  // the real rows
    case Layout::Qkv:
      return local.view(head_major(local, head_dim))
          .transpose(0, 1)
          .reshape(piece_shape(e.piece.name, e.piece.global_shape, e.piece.placements));
  }
  return local;
}

/// Writes the saved form `piece` back into the model's tensor (padding rows zeroed).
void assign(const Entry& e, const at::Tensor& piece, std::int64_t head_dim) {
  at::Tensor local = e.local.detach();
  switch (e.layout) {
    case Layout::Same:
      local.copy_(piece);
      return;
    case Layout::Vocabulary:
      local.zero_().narrow(0, 0, piece.size(0)).copy_(piece);
      return;
    case Layout::Qkv: {
      std::vector<std::int64_t> part_major = head_major(local, head_dim);
      std::swap(part_major[0], part_major[1]);
      local.copy_(piece.view(part_major).transpose(0, 1).reshape(local.sizes()));
      return;
    }
  }
}

std::int64_t head_dim(const GptConfig& c) { return c.hidden / c.heads; }

}  // namespace

RunConfig gpt_model_description(const GptConfig& c) {
  return {{"model", "gpt"},
          {"layers", std::to_string(c.layers)},
          {"hidden", std::to_string(c.hidden)},
          {"heads", std::to_string(c.heads)},
          {"vocab", std::to_string(c.vocab)},
          {"sequence", std::to_string(c.sequence)}};
}

std::vector<TensorPiece> gpt_checkpoint_pieces(const std::vector<GptParameter>& parameters,
                                               const GptConfig& config, const Group& tp) {
  std::vector<TensorPiece> out;
  for (Entry& e : entries(parameters, config, tp)) {
    e.piece.data = saved_form(e, head_dim(config));
    out.push_back(std::move(e.piece));
  }
  return out;
}

std::vector<TensorPiece> gpt_checkpoint_pieces(const GptModel& model) {
  return gpt_checkpoint_pieces(model.named_parameters(), model.config(), model.tp());
}

void save_gpt_checkpoint(const std::string& path, const std::vector<GptParameter>& parameters,
                         const GptConfig& config, const Group& tp, const TrainingState& state,
                         const chorus::Communicator& comm) {
  save_tensor_checkpoint(path, gpt_checkpoint_pieces(parameters, config, tp),
                         {state, gpt_model_description(config)}, comm);
}

void save_gpt_checkpoint(const std::string& path, const GptModel& model, const TrainingState& state,
                         const chorus::Communicator& comm) {
  save_gpt_checkpoint(path, model.named_parameters(), model.config(), model.tp(), state, comm);
}

TrainingState load_gpt_checkpoint(const std::string& path,
                                  const std::vector<GptParameter>& parameters,
                                  const GptConfig& config, const Group& tp) {
  const CheckpointHeader header = read_tensor_checkpoint(path).header;
  const auto [saved, ours] =
      detail::differing_settings(header.model, gpt_model_description(config));
  require_argument(saved.empty(), "checkpoint " + path + " was saved from a model with " + saved +
                                      ", this model has " + ours);
  const std::vector<Entry> model_entries = entries(parameters, config, tp);
  std::vector<TensorPiece> targets;
  for (const Entry& e : model_entries) targets.push_back(e.piece);
  const CheckpointHeader loaded = load_tensor_checkpoint(path, targets);
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    assign(model_entries[i], targets[i].data, head_dim(config));
  }
  return loaded.state;
}

TrainingState load_gpt_checkpoint(const std::string& path, GptModel& model) {
  return load_gpt_checkpoint(path, model.named_parameters(), model.config(), model.tp());
}

}  // namespace chorus::train
