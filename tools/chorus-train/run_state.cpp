// Shared parts of chorus-train's training loops; see run_state.hpp.
#include "run_state.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

namespace chorus::train_tool {

void say(const Communicator& comm, const std::string& line) {
  if (comm.rank() == 0) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

train::RunConfig common_run_config(const Options& options) {
  std::array<char, 32> lr{};
  const auto lr_end = std::to_chars(lr.data(), lr.data() + lr.size(), options.lr).ptr;
  return {{"--optimizer", optimizer_name(options.optimizer)},
          {"--lr", std::string(lr.data(), lr_end)},
          {"--batch", std::to_string(options.batch)},
          {"--seed", std::to_string(options.seed)}};
}

train::GradCompression grad_compression(Compression compression) {
  switch (compression) {
    case Compression::Fp16:
      return train::GradCompression::Fp16;
    case Compression::Bf16:
      return train::GradCompression::Bf16;
    case Compression::None:
      break;
  }
  return train::GradCompression::None;
}

namespace {
constexpr const char* kSamplerPosition = "sampler_position";
constexpr const char* kSamplerRanks = "sampler_ranks";  ///< the rank count of a checkpoint
}  // namespace

train::TrainingState run_state(std::int64_t step, const train::DistributedSampler& sampler,
                               int sampler_ranks, train::RunConfig config) {
  train::TrainingState state;
  state.step = step;
  state.epoch = static_cast<std::int64_t>(sampler.epoch());
  state.extra[kSamplerPosition] = static_cast<std::int64_t>(sampler.state().position);
  state.extra[kSamplerRanks] = sampler_ranks;
  state.config = std::move(config);
  return state;
}

std::int64_t resume_position(const std::optional<train::TrainingState>& state,
                             const std::string& path, train::DistributedSampler& sampler,
                             int sampler_ranks, const Communicator& comm) {
  if (!state) {
    say(comm, "no checkpoint at " + path + ": starting from scratch");
    return 0;
  }
  const auto position = state->extra.find(kSamplerPosition);
  require_argument(position != state->extra.end(),
                   "checkpoint " + path + " has no sampler position");
  const auto ranks = state->extra.find(kSamplerRanks);
  const std::int64_t taken =
      position->second * (ranks == state->extra.end() ? sampler_ranks : ranks->second);
  require_argument(taken % sampler_ranks == 0,
                   "checkpoint " + path + " was saved after " + std::to_string(taken) +
                       " samples of epoch " + std::to_string(state->epoch) + ", which " +
                       std::to_string(sampler_ranks) + " ranks cannot share evenly");
  sampler.load_state(train::SamplerState{static_cast<std::uint64_t>(state->epoch),
                                         static_cast<std::uint64_t>(taken / sampler_ranks)});
  say(comm, "resumed from " + path + " at step " + std::to_string(state->step));
  return state->step;
}

bool in_unsynced_block(const Options& options, std::int64_t step) {
  return options.alternate_sync > 0 && (step / options.alternate_sync) % 2 == 1;
}

namespace {
constexpr std::size_t kWarmupSteps = 5;  ///< left out of the step-time medians

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}
}  // namespace

StepMedians step_medians(const std::vector<StepTime>& steps) {
  std::vector<double> synced, unsynced;
  const std::size_t warmup = steps.size() > 2 * kWarmupSteps ? kWarmupSteps : 0;
  for (std::size_t i = warmup; i < steps.size(); ++i) {
    (steps[i].synced ? synced : unsynced).push_back(steps[i].seconds);
  }
  return {median_of(synced), median_of(unsynced)};
}

std::string unsynced_median_text(const StepMedians& medians) {
  if (medians.unsynced == 0) return "";
  char text[64];
  std::snprintf(text, sizeof text, " unsynced_step_ms_median=%.2f", medians.unsynced * 1e3);
  return text;
}

}  // namespace chorus::train_tool
