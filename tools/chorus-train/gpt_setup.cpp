// The GPT run's pieces built from the command line; see gpt_setup.hpp.
#include "gpt_setup.hpp"

#include "gpt_moe.hpp"
#include "run_state.hpp"
#include "tasks.hpp"

#include <chorus/error.hpp>

#include <optional>
#include <string>

namespace chorus::train_tool {

train::Mesh make_mesh(const Options& options, const Communicator& comm) {
  const int model = options.tp * options.pp, world = comm.size(), cp = options.cp;
  require_argument(world % model == 0,
                   "--tp " + std::to_string(options.tp) + " x --pp " + std::to_string(options.pp) +
                       " does not divide the world of " + std::to_string(world) +
                       " ranks (the data-parallel degree is world / (tp x cp x pp))");
  require_argument((world / model) % cp == 0,
                   "--cp " + std::to_string(cp) +
                       " does not divide world / (tp x pp) = " + std::to_string(world / model) +
                       " ranks (the data-parallel degree is world / (tp x cp x pp))");
  const std::string cp_text = cp > 1 ? " x --cp " + std::to_string(cp) : "";
  require_argument(options.dp == 0 || options.dp * model * cp == world,
                   "--dp " + std::to_string(options.dp) + " x --tp " + std::to_string(options.tp) +
                       cp_text + " x --pp " + std::to_string(options.pp) + " is not the world of " +
                       std::to_string(world) + " ranks");
  train::MeshOptions mesh;
  mesh.degrees.tp = options.tp;
  mesh.degrees.cp = cp;
  mesh.degrees.pp = options.pp;
  mesh.degrees.dp = world / (model * cp);
  mesh.degrees.ep = options.ep;
  mesh.embedding_group = options.pp > 1;
  return train::Mesh(comm, mesh);
}

train::ReducerOptions reducer_options(const Options& options) {
  auto reducer = sync_options<train::ReducerOptions>(options);
  reducer.autograd_hooks = false;
  return reducer;
}

train::ZeroOptions zero_options(const Options& options, const train::Mesh& mesh) {
  auto zero = sync_options<train::ZeroOptions>(options);
  zero.stage = options.zero;
  zero.autograd_hooks = false;
  zero.broadcast_parameters = false;
  zero.divisor = mesh.layout().dp;
  zero.mixed_precision = mixed_precision(options);
  return zero;
}

train::PipelineGroups pipeline_groups(const train::Mesh& mesh, const Options& options) {
  const int p = mesh.layout().pp, stage = mesh.coordinates().pp;
  std::optional<train::Group> embedding;
  if (p > 1 && (stage == 0 || stage == p - 1)) embedding = mesh.embedding();
  std::optional<train::Group> cp;
  if (mesh.layout().cp > 1 || options.moe_experts > 0) cp = mesh.cp();
  std::optional<train::Group> ep;
  if (options.moe_experts > 0) ep = mesh.expert();
  return {mesh.pp(), mesh.tp(), embedding, cp, ep};
}

train::GptConfig gpt_config(const Options& options) {
  train::GptConfig c;
  c.layers = options.layers;
  c.hidden = options.hidden;
  c.heads = options.heads;
  c.vocab = kVocabulary;
  c.sequence = options.seq_len;
  c.sequence_parallel = options.sequence_parallel;
  c.seed = options.seed;
  c.dropout = options.dropout;
  c.moe = moe_config(options);
  c.recompute = options.recompute == Recomputation::Full        ? train::Recompute::Full
                : options.recompute == Recomputation::Selective ? train::Recompute::Selective
                                                                : train::Recompute::None;
  return c;
}

TokenSplit::TokenSplit(const std::vector<std::uint8_t>& data, std::int64_t s) : seq_len(s) {
  bytes = torch::from_blob(const_cast<std::uint8_t*>(data.data()),
                           {static_cast<std::int64_t>(data.size())}, torch::kUInt8)
              .to(torch::kInt64);
}

std::size_t TokenSplit::samples() const {
  return bytes.size(0) < 1 ? 0 : static_cast<std::size_t>((bytes.size(0) - 1) / seq_len);
}

std::pair<torch::Tensor, torch::Tensor> TokenSplit::batch(
    const std::vector<std::size_t>& indices) const {
  std::vector<torch::Tensor> rows;
  for (std::size_t i : indices) {
    rows.push_back(bytes.narrow(0, static_cast<std::int64_t>(i) * seq_len, seq_len + 1));
  }
  const torch::Tensor windows = torch::stack(rows).t();  // [s + 1, b]
  return {windows.narrow(0, 0, seq_len).contiguous(), windows.narrow(0, 1, seq_len).contiguous()};
}

}  // namespace chorus::train_tool
