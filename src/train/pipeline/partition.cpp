// The stage partition of pipeline_partition.hpp.
//
// balanced_partition is the classic linear-partition dynamic programme, run twice: first for
// the smallest possible largest stage cost M, then, among the cuts whose stages all cost at
// most M, for the smallest sum of squared stage costs (so 7 equal layers on 3 stages are
// 3, 2, 2 rather than 3, 3, 1). With L layers and S stages each pass is O(S·L²) steps.
#include <chorus/error.hpp>
#include <chorus/train/pipeline_partition.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace chorus::train {
namespace {

using Costs = std::function<double(int, int, int)>;

/// The cut of `layers` layers into `stages` stages that minimises the objective folded with
/// `combine` over the stages' costs, every stage costing at most `bound`: the objective's
/// value and the layers per stage. best[k][j] is the objective of stages 0..k over layers
/// [0, j), stage k starting at from[k][j]; among equal objectives the latest start wins.
template <class Combine>
std::pair<double, std::vector<std::int64_t>> best_cut(const Costs& cost, int layers, int stages,
                                                      Combine combine, double bound) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages, std::vector<double>(layers + 1, kNone));
  std::vector<std::vector<int>> from(stages, std::vector<int>(layers + 1, 0));
  for (int j = 1; j <= layers; ++j)
    if (cost(0, 0, j) <= bound) best[0][j] = combine(0.0, cost(0, 0, j));
  for (int k = 1; k < stages; ++k)
    for (int j = k + 1; j <= layers; ++j)
      for (int i = j - 1; i >= k; --i) {
        const double c = cost(k, i, j);
        if (best[k - 1][i] == kNone || c > bound) continue;
        const double value = combine(best[k - 1][i], c);
        if (value < best[k][j]) best[k][j] = value, from[k][j] = i;
      }
  std::vector<std::int64_t> counts(static_cast<std::size_t>(stages));
  for (int k = stages - 1, j = layers; k >= 0; --k) {
    const int i = k == 0 ? 0 : from[k][j];
    counts[static_cast<std::size_t>(k)] = j - i;
    j = i;
  }
  return {best[stages - 1][layers], counts};
}

}  // namespace

void check_partition(const std::vector<std::int64_t>& layers_per_stage, std::int64_t layers,
                     int stages) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  require_argument(stages >= 1, "pipeline partition: " + n(stages) + " stages");
  require_argument(layers >= stages, "pipeline partition: " + n(layers) + " layers for " +
                                         n(stages) + " stages; every stage needs a layer");
  require_argument(static_cast<std::int64_t>(layers_per_stage.size()) == stages,
                   "pipeline partition: " + n(static_cast<std::int64_t>(layers_per_stage.size())) +
                       " layer counts for " + n(stages) + " stages");
  std::string list;
  for (std::int64_t c : layers_per_stage) list += (list.empty() ? "" : ", ") + n(c);
  const std::int64_t sum =
      std::accumulate(layers_per_stage.begin(), layers_per_stage.end(), std::int64_t{0});
  const bool positive = std::all_of(layers_per_stage.begin(), layers_per_stage.end(),
                                    [](std::int64_t c) { return c >= 1; });
  require_argument(positive && sum == layers, "pipeline partition: layers per stage [" + list +
                                                  "] must be positive and sum to " + n(layers));
}

std::vector<std::int64_t> balanced_partition(const std::vector<std::int64_t>& layer_costs,
                                             int stages, std::int64_t first_extra,
                                             std::int64_t last_extra) {
  const int layers = static_cast<int>(layer_costs.size());
  require_argument(stages >= 1, "pipeline partition: " + std::to_string(stages) + " stages");
  require_argument(layers >= stages, "pipeline partition: " + std::to_string(layers) +
                                         " layers for " + std::to_string(stages) +
                                         " stages; every stage needs a layer");
  std::vector<std::int64_t> prefix(static_cast<std::size_t>(layers) + 1, 0);
  for (int j = 0; j < layers; ++j) prefix[j + 1] = prefix[j] + layer_costs[j];
  const Costs cost = [&](int k, int i, int j) {  // stage k holding layers [i, j)
    return static_cast<double>(prefix[j] - prefix[i] + (k == 0 ? first_extra : 0) +
                               (k == stages - 1 ? last_extra : 0));
  };
  const auto largest = [](double so_far, double c) { return std::max(so_far, c); };
  const auto squares = [](double so_far, double c) { return so_far + c * c; };
  constexpr double kAny = std::numeric_limits<double>::infinity();
  const double bound = best_cut(cost, layers, stages, largest, kAny).first;
  return best_cut(cost, layers, stages, squares, bound).second;
}
}  // namespace chorus::train
