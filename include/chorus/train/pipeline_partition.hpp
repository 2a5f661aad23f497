// Cutting a model's layers into pipeline stages (docs/parallel.md, "Pipeline parallelism").
// Pure functions: every rank computes the same partition.
#pragma once

#include <chorus/export.hpp>

#include <cstdint>
#include <vector>

namespace chorus::train {

/// The layers of each of `stages` consecutive stages, balanced by cost: every stage gets at
/// least one layer and the largest stage's cost is as small as possible, where a stage's cost
/// is the sum of its layers' `layer_costs` (e.g. parameter counts), plus `first_extra` on the
/// first stage and `last_extra` on the last (the embedding, the final norm). Among equally
/// good cuts the last stage takes the fewest layers it can, then the one before it, and so
/// on. InvalidArgument naming the
/// numbers when there are fewer layers than stages or stages < 1.
CHORUS_EXPORT std::vector<std::int64_t> balanced_partition(
    const std::vector<std::int64_t>& layer_costs, int stages, std::int64_t first_extra = 0,
    std::int64_t last_extra = 0);

/// Checks an explicit `layers_per_stage` against `layers` and `stages`: one positive count per
/// stage, summing to `layers`; InvalidArgument naming the numbers otherwise.
CHORUS_EXPORT void check_partition(const std::vector<std::int64_t>& layers_per_stage,
                                   std::int64_t layers, int stages);

}  // namespace chorus::train
