// allowed_cpus() against the affinity mask read here, and after narrowing it.
#include "core/cpus.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <thread>

namespace chorus {
namespace {

TEST(Cpus, AllowedCpusAreTheAffinityMaskInOrder) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const std::vector<int> cpus = allowed_cpus();
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&set));
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  for (int cpu : cpus) EXPECT_TRUE(CPU_ISSET(cpu, &set)) << cpu;

  // A thread bound to the last CPU sees only that one (sched_getaffinity(0) is per thread).
  std::vector<int> narrowed;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus.back(), &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) narrowed = allowed_cpus();
  }).join();
  EXPECT_EQ(narrowed, std::vector<int>{cpus.back()});
}

}  // namespace
}  // namespace chorus
