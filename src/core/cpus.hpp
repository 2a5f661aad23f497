// The CPUs this process may run on.
#pragma once

#include <vector>

namespace chorus {

/// The CPUs this process may run on (sched_getaffinity), in increasing order; empty when
/// the kernel does not say.
std::vector<int> allowed_cpus();

}  // namespace chorus
