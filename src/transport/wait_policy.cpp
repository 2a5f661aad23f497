// The wait policy's choice by ranks and cores; see wait_policy.hpp.
#include "transport/wait_policy.hpp"

#include "core/cpus.hpp"
#include "core/env.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <charconv>
#include <string>

namespace chorus::transport {
namespace {

int usable_cpus() { return std::max(1, static_cast<int>(allowed_cpus().size())); }

int launcher_local_ranks() {
  const std::string text = env_or("LOCAL_WORLD_SIZE", "");
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() ? value : 0;
}

/// CHORUS_SPIN_US / CHORUS_YIELD_US: whole microseconds, 0 to 10 s.
void override_from_env(const char* name, std::chrono::microseconds* phase) {
  const std::string text = env_or(name, "");
  if (text.empty()) return;
  long value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > 10'000'000) {
    throw Error(Status::InvalidArgument, std::string(name) + " is \"" + text +
                                             "\"; expected whole microseconds from 0 to 10000000");
  }
  *phase = std::chrono::microseconds(value);
}

}  // namespace

WaitPolicy WaitPolicy::for_counts(int ranks_on_host, int cpus) {
  using std::chrono::microseconds;
  if (ranks_on_host > kCrowdedRanksPerCpu * cpus) {
    return WaitPolicy{microseconds(0), microseconds(0), true};
  }
  if (ranks_on_host > cpus) return WaitPolicy{microseconds(0), microseconds(1000), true};
  return WaitPolicy{microseconds(20), microseconds(30), false};
}

WaitPolicy WaitPolicy::for_host(int ranks_on_host) {
  WaitPolicy policy = for_counts(std::max(ranks_on_host, launcher_local_ranks()), usable_cpus());
  override_from_env("CHORUS_SPIN_US", &policy.spin);
  override_from_env("CHORUS_YIELD_US", &policy.yield);
  return policy;
}

}  // namespace chorus::transport
