// DistributedSampler and the epoch permutation (see include/chorus/train/data.hpp).
#include <chorus/train/data.hpp>

#include <chorus/error.hpp>

#include <numeric>

namespace chorus::train {
namespace {

/// splitmix64 (Steele, Lea, Flood 2014): a 64-bit state advanced by a Weyl constant and
/// finalised by two xor-shift-multiply rounds; every output is a bijection of the state.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, bound) by rejection: values at or above the largest multiple of bound
  /// that fits in 2^64 are redrawn, so every residue is equally likely.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
    std::uint64_t value = next();
    while (value >= limit) value = next();
    return value % bound;
  }

 private:
  std::uint64_t state_;
};

std::size_t per_rank_count(std::size_t n, int nranks, TailPolicy tail) {
  const auto ranks = static_cast<std::size_t>(nranks);
  return tail == TailPolicy::Pad ? (n + ranks - 1) / ranks : n / ranks;
}

}  // namespace

std::vector<std::size_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  // One generator per (seed, epoch): the epoch goes through a splitmix round first so that
  // neighbouring seeds and epochs do not give shifted streams.
  SplitMix64 mixer(epoch);
  SplitMix64 rng(seed ^ mixer.next());
  for (std::size_t i = n; i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

DistributedSampler::DistributedSampler(std::size_t dataset_size, int rank, int nranks,
                                       std::uint64_t seed, bool shuffle, TailPolicy tail)
    : dataset_size_(dataset_size),
      rank_(rank),
      nranks_(nranks),
      seed_(seed),
      shuffle_(shuffle),
      tail_(tail),
      per_rank_(0) {
  require_argument(nranks > 0 && rank >= 0 && rank < nranks,
                   "DistributedSampler: rank " + std::to_string(rank) + " is not in [0, " +
                       std::to_string(nranks) + ")");
  require_argument(dataset_size > 0, "DistributedSampler: the dataset is empty");
  per_rank_ = per_rank_count(dataset_size, nranks, tail);
  set_epoch(0);
}

void DistributedSampler::set_epoch(std::uint64_t epoch) {
  state_ = SamplerState{epoch, 0};
  current_ = epoch_indices();
}

std::vector<std::size_t> DistributedSampler::epoch_indices() const {
  std::vector<std::size_t> order(dataset_size_);
  if (shuffle_) {
    order = epoch_permutation(dataset_size_, seed_, state_.epoch);
  } else {
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
  // Global position p of the padded/truncated order is order[p % n]: wrapping pads (even
  // when the padding exceeds n, i.e. nranks > n); truncation never reaches p >= n.
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  const auto ranks = static_cast<std::size_t>(nranks_);
  for (std::size_t k = 0; k < per_rank_; ++k) {
    mine.push_back(order[(k * ranks + static_cast<std::size_t>(rank_)) % dataset_size_]);
  }
  return mine;
}

std::vector<std::size_t> DistributedSampler::next_batch(std::size_t batch_size) {
  require_argument(batch_size > 0, "DistributedSampler::next_batch: batch_size is 0");
  const std::size_t first = std::min<std::size_t>(state_.position, per_rank_);
  const std::size_t last = std::min(per_rank_, first + batch_size);
  state_.position = last;
  return {current_.begin() + static_cast<std::ptrdiff_t>(first),
          current_.begin() + static_cast<std::ptrdiff_t>(last)};
}

void DistributedSampler::load_state(const SamplerState& state) {
  require_argument(state.position <= per_rank_,
                   "DistributedSampler::load_state: position " + std::to_string(state.position) +
                       " exceeds the " + std::to_string(per_rank_) + " samples per rank");
  set_epoch(state.epoch);
  state_.position = state.position;
}

}  // namespace chorus::train
