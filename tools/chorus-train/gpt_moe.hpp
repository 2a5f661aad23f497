// The mixture-of-experts side of chorus-train's GPT run (--moe-experts): the model's MoE
// configuration, the two gradient reductions (experts over the expert-data-parallel group, the
// rest over dp·cp, both divided by dp), the global norm's placements over ep and edp, and the
// progress line's expert counts.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <memory>
#include <string>
#include <vector>

namespace chorus::train_tool {

/// GptConfig::moe of the --moe-* options (experts 0 without --moe-experts).
train::GptMoeConfig moe_config(const Options& options);

/// "; moe E experts top-k K capacity C every F, ep N" ("" without --moe-experts).
std::string moe_description(const Options& options, const train::Mesh& mesh);

/// Whether `name` is an expert's parameter (split over ep).
bool is_expert_parameter(const std::string& name);

/// The gradient reduction of an MoE GPT: experts summed over edp, the rest over dp·cp, each
/// divided by `options.divisor` (dp). Reduces everything after the step's backwards.
class MoeGradients {
 public:
  MoeGradients(const std::vector<train::GptParameter>& parameters, const train::Mesh& mesh,
               const train::ReducerOptions& options);
  void begin_step();
  /// Marks every parameter ready and waits for both reductions. Collective.
  void finish_step();

 private:
  std::unique_ptr<train::GradientReducer> experts_, dense_;
};

/// `pieces` (norm_pieces(2) over {tp, pp, ep, edp}) with the experts sharded over ep.
std::vector<train::NormPiece> moe_norm_pieces(std::vector<train::NormPiece> pieces,
                                              const std::vector<train::GptParameter>& parameters);

/// Collective over `comm`: " experts n0/n1/... drop D aux A" of the counters of every rank that
/// `counts` (one rank per tp group), the tokens each expert kept summed over the MoE blocks.
std::string moe_progress(const train::GptMoeCounters& counters, bool counts, std::int64_t experts,
                         Communicator& comm);

}  // namespace chorus::train_tool
