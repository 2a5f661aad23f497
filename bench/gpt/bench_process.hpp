// What the training benchmarks (gpt_bench, moe_bench) share: joining the job and the median.
#pragma once

#include <chorus/communicator.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace chorus::bench {

/// The communicator of a chorusrun job (RANK set), else a job of this process alone.
inline Communicator connect() {
  if (std::getenv("RANK") != nullptr) return Communicator::init_from_env();
  InitOptions single;
  single.store_address = "127.0.0.1:0";
  return Communicator::init(single);
}

/// The median of `v` (not empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace chorus::bench
