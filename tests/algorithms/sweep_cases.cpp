// The list of sweep cases (see sweep.hpp).
#include "algorithms/selection.hpp"
#include "algorithms/window.hpp"
#include "sweep.hpp"

#include <utility>

namespace chorus::testing {
namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};
constexpr std::size_t kTypeSweepCount = 1031;
constexpr std::size_t kFullProductCount = 7;

// Where the structure and type cases put an algorithm's buffers: where it runs its own path.
Placement home_of(const algorithms::Algorithm& algorithm) {
  return needs_windows(algorithm) ? Placement::Windows : Placement::Heap;
}

// Appends `c` unless its algorithm declines it. accepts() may only look at
// what every rank shares, so the representative arguments here decide for all.
void add_if_accepted(std::vector<SweepCase>& cases, SweepCase c, algorithms::Needs provided) {
  algorithms::Call args;
  args.collective = c.algorithm->collective;
  args.count = c.count;
  args.dtype = c.dtype;
  args.op = c.op;
  args.root = c.root;
  if (!algorithms::algorithm_accepts(*c.algorithm, args, c.nranks, provided)) return;
  c.seq = cases.size() + 1;
  cases.push_back(c);
}

// The (dtype, op) pairs one structural case runs with: all of them at
// kFullProductCount, else one pair taken from a rotation that visits all 40
// pairs every 40 cases (dtype = k mod 10, op = (k / 10 + k) mod 4).
std::vector<std::pair<DataType, ReduceOp>> type_choices(std::size_t count, int ops, int& rotation) {
  std::vector<std::pair<DataType, ReduceOp>> choices;
  if (count == kFullProductCount) {
    for (int dtype = 0; dtype < kNumDataTypes; ++dtype) {
      for (int op = 0; op < ops; ++op) choices.push_back({static_cast<DataType>(dtype), kOps[op]});
    }
    return choices;
  }
  int k = rotation++;
  choices.push_back(
      {static_cast<DataType>(k % kNumDataTypes), kOps[(k / kNumDataTypes + k) % ops]});
  return choices;
}

void add_structure_cases(std::vector<SweepCase>& cases, const algorithms::Algorithm& algorithm,
                         int nranks, algorithms::Needs provided) {
  const Collective collective = algorithm.collective;
  const int roots = is_rooted(collective) ? nranks : 1;
  const int ops = is_reducing(collective) ? 4 : 1;
  int rotation = 11 * nranks;  // a different start per rank count
  for (std::size_t count : kSweepCounts) {
    for (bool in_place : {false, true}) {
      for (int root = 0; root < roots; ++root) {
        for (auto [dtype, op] : type_choices(count, ops, rotation)) {
          SweepCase c{&algorithm, nranks, count, dtype, op, root, in_place};
          c.placement = home_of(algorithm);
          add_if_accepted(cases, c, provided);
        }
      }
    }
  }
}

void add_type_cases(std::vector<SweepCase>& cases, const algorithms::Algorithm& algorithm,
                    int nranks, algorithms::Needs provided) {
  const int ops = is_reducing(algorithm.collective) ? 4 : 1;
  for (int dtype = 0; dtype < kNumDataTypes; ++dtype) {
    for (int op = 0; op < ops; ++op) {
      SweepCase c{&algorithm, nranks, kTypeSweepCount};
      c.dtype = static_cast<DataType>(dtype);
      c.op = kOps[op];
      c.root = is_rooted(algorithm.collective) ? nranks - 1 : 0;
      c.in_place = (dtype + op) % 2 == 1;
      c.placement = home_of(algorithm);
      add_if_accepted(cases, c, provided);
    }
  }
}

// The smallest count whose larger buffer exceeds kMinWindowBytes (an all-reduce's buffers
// hold count elements, the others' larger one n x count), plus 2 for uneven slices.
std::size_t window_count(Collective collective, DataType dtype, int nranks) {
  const std::size_t blocks =
      collective == Collective::AllReduce ? 1 : static_cast<std::size_t>(nranks);
  return algorithms::kMinWindowBytes / (dtype_size(dtype) * blocks) + 2;
}

// A count whose every rank's share (1/n of an all-reduce, its own block otherwise) spans
// more than two kWindowChunkBytes chunks of a dtype that is its own accumulator.
std::size_t chunked_count(Collective collective, DataType dtype, int nranks) {
  const std::size_t share = 2 * algorithms::kWindowChunkBytes / dtype_size(dtype) + 3;
  return collective == Collective::AllReduce ? share * static_cast<std::size_t>(nranks) + 1 : share;
}

void add_window_cases(std::vector<SweepCase>& cases, const algorithms::Algorithm& algorithm,
                      int nranks, algorithms::Needs provided) {
  if (!needs_windows(algorithm)) return;
  const Collective collective = algorithm.collective;
  const int ops = is_reducing(collective) ? 4 : 1;
  auto add = [&](DataType dtype, ReduceOp op, std::size_t count, bool in_place, Placement at) {
    SweepCase c{&algorithm, nranks, count, dtype, op, 0, in_place};
    c.placement = at;
    add_if_accepted(cases, c, provided);
  };
  for (int d = 0; d < kNumDataTypes; ++d) {
    const auto dtype = static_cast<DataType>(d);
    for (int op = 0; op < ops; ++op) {
      for (bool in_place : {false, true}) {
        add(dtype, kOps[op], window_count(collective, dtype, nranks), in_place, Placement::Windows);
      }
    }
  }
  const ReduceOp op = kOps[nranks % ops];
  for (auto [dtype, in_place] : {std::pair{DataType::Float64, false}, {DataType::Int64, true}}) {
    add(dtype, op, chunked_count(collective, dtype, nranks), in_place, Placement::Windows);
  }
  const auto dtype = static_cast<DataType>(nranks % kNumDataTypes);
  const std::size_t count = window_count(collective, dtype, nranks);
  add(dtype, op, count, nranks % 2 == 0, Placement::Heap);
  add(dtype, op, count, nranks % 2 == 1, Placement::LastRankOutside);
}

}  // namespace

bool is_reducing(Collective collective) {
  return collective == Collective::AllReduce || collective == Collective::Reduce ||
         collective == Collective::ReduceScatter;
}

bool is_rooted(Collective collective) {
  return collective == Collective::Broadcast || collective == Collective::Reduce ||
         collective == Collective::Gather || collective == Collective::Scatter;
}

bool in_window(const SweepCase& c, int rank) {
  return c.placement == Placement::Windows ||
         (c.placement == Placement::LastRankOutside && rank != c.nranks - 1);
}

bool needs_windows(const algorithms::Algorithm& algorithm) {
  return (algorithm.needs & algorithms::kNeedsSharedWindows) != 0;
}

std::string_view placement_name(Placement placement) {
  switch (placement) {
    case Placement::Windows:
      return "in the windows";
    case Placement::LastRankOutside:
      return "the last rank's outside the windows";
    case Placement::Heap:
      break;
  }
  return "outside the windows";
}

std::string describe(const SweepCase& c) {
  std::string text = std::string(to_string(c.algorithm->collective)) + "/" +
                     std::string(c.algorithm->name) + " on " + std::to_string(c.nranks) +
                     " ranks, count " + std::to_string(c.count) + ", " +
                     std::string(to_string(c.dtype));
  if (is_reducing(c.algorithm->collective)) text += ", " + std::string(to_string(c.op));
  if (is_rooted(c.algorithm->collective)) text += ", root " + std::to_string(c.root);
  if (needs_windows(*c.algorithm)) text += ", " + std::string(placement_name(c.placement));
  return text + (c.in_place ? ", in place" : ", out of place") + " (case " + std::to_string(c.seq) +
         ")";
}

std::vector<SweepCase> sweep_cases(int nranks, algorithms::Needs provided) {
  std::vector<SweepCase> cases;
  for (const algorithms::Algorithm* algorithm : algorithms::all_algorithms()) {
    add_structure_cases(cases, *algorithm, nranks, provided);
  }
  for (const algorithms::Algorithm* algorithm : algorithms::all_algorithms()) {
    add_type_cases(cases, *algorithm, nranks, provided);
  }
  for (const algorithms::Algorithm* algorithm : algorithms::all_algorithms()) {
    add_window_cases(cases, *algorithm, nranks, provided);
  }
  return cases;
}

}  // namespace chorus::testing
