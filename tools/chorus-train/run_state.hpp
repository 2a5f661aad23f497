// What the training loops of chorus-train (trainer.cpp, the GPT's gpt_steps.cpp) share: rank
// 0's output, the run's recorded settings and the checkpointed position of its sampler. No torch.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/buckets.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/data.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train_tool {

/// Prints `line` on rank 0 of `comm` (flushed at once on every rank).
void say(const Communicator& comm, const std::string& line);

/// The settings every run records: "--optimizer", "--lr" (shortest exact text), "--batch",
/// "--seed".
train::RunConfig common_run_config(const Options& options);

/// --compression as the gradient reducer's type.
train::GradCompression grad_compression(Compression compression);

/// The bucket options (--bucket-cap-mb, --compression, --no-shared-buckets, --no-overlap) as
/// DdpOptions or ReducerOptions, which name them alike; the first bucket is capped by the cap.
template <class SyncOptions>
SyncOptions sync_options(const Options& options) {
  SyncOptions sync;
  sync.bucket_cap_bytes = static_cast<std::size_t>(options.bucket_cap_mb * 1024 * 1024);
  sync.first_bucket_bytes = std::min(sync.first_bucket_bytes, sync.bucket_cap_bytes);
  if constexpr (requires { sync.compression; }) {  // ZeroOptions has none
    sync.compression = grad_compression(options.compression);
  }
  sync.shared_buckets = options.shared_buckets;
  sync.overlap_backward = options.overlap;
  return sync;
}

/// A checkpoint's state at `step`: the sampler's epoch and position (extra
/// "sampler_position"), the rank count it deals the epoch to (extra "sampler_ranks") and
/// `config`.
train::TrainingState run_state(std::int64_t step, const train::DistributedSampler& sampler,
                               int sampler_ranks, train::RunConfig config);

/// After a resume attempt on `path`: says "no checkpoint at PATH: starting from scratch" and
/// returns 0 when there was none; otherwise restores the sampler's position (dealt to
/// `sampler_ranks` ranks now: the same number of the epoch's samples taken as when saved,
/// since step s takes the same samples at any rank count of the same global batch), says
/// "resumed from PATH at step S" and returns S. InvalidArgument when the state has no sampler
/// position or its samples taken do not split evenly over `sampler_ranks`.
std::int64_t resume_position(const std::optional<train::TrainingState>& state,
                             const std::string& path, train::DistributedSampler& sampler,
                             int sampler_ranks, const Communicator& comm);

/// With --alternate-sync K, whether step `step` (from 0) belongs to an unsynchronised block:
/// steps [K, 2K), [3K, 4K), ... (never without it).
bool in_unsynced_block(const Options& options, std::int64_t step);

/// One step's wall time, and whether it belongs to a synchronised block (--alternate-sync).
struct StepTime {
  double seconds = 0;
  bool synced = true;
};

/// The median step times, in seconds, of the synchronised and the unsynchronised steps (0 when
/// there are none); the first 5 steps are left out as warm-up when there are more than 10.
struct StepMedians {
  double synced = 0;
  double unsynced = 0;
};
StepMedians step_medians(const std::vector<StepTime>& steps);

/// " unsynced_step_ms_median=M" when there were unsynchronised steps, else "".
std::string unsynced_median_text(const StepMedians& medians);

}  // namespace chorus::train_tool
