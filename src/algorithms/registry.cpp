// The registry: the table of every algorithm's row (registry.def), and what every row
// shares (Algorithm::execute, Context).
#include "algorithms/algorithm.hpp"

#include "transport/arena/host_arena.hpp"

#include <array>

namespace chorus::algorithms {
namespace {

constexpr std::array kAlgorithms = {
#define CHORUS_ALGORITHM(row) &rows::row,
#include "algorithms/registry.def"
#undef CHORUS_ALGORITHM
};

bool is_half(DataType dtype) { return dtype == DataType::Float16 || dtype == DataType::Bfloat16; }

}  // namespace

std::span<const Algorithm* const> all_algorithms() { return kAlgorithms; }

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm* algorithm : kAlgorithms) {
    if (algorithm->collective == collective && algorithm->name == name) return algorithm;
  }
  return nullptr;
}

Needs Context::provides() const {
  if (!arena) return kNeedsNothing;
  Needs needs = kNeedsArena;
  if (cross_memory) needs |= kNeedsCrossMemory;
  if (arena->windows().ever_used()) needs |= kNeedsSharedWindows;
  return needs;
}

Context Context::on(transport::Transport& other) const {
  Context view{other};
  view.deadline = deadline;
  view.started = started;
  view.chunk_bytes = chunk_bytes;
  return view;
}

bool Algorithm::folds_average(const Call& call) const {
  if (!call.average) return false;
  switch (folding) {
    case Folding::None:
      return false;
    case Folding::Halves:
      return is_half(call.dtype);
    case Folding::Averages:
      return true;
  }
  return false;
}

Outcome Algorithm::execute(const Call& call, const Context& context) const {
  const Algorithm* other = run(call, context);
  const Algorithm& ran = other ? *other : *this;
  return {&ran, ran.folds_average(call)};
}

}  // namespace chorus::algorithms
