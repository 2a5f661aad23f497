// chorus-perf --tune (tune.hpp). The fits, with t(b) the measured time:
//   link:  a recursive-doubling all-reduce of b bytes (R rounds, see
//          measure_link) = R (alpha + b beta) + reductions, fitted through
//          b = 8 and b = 1 MiB: the latency a round has inside a collective,
//          with every rank busy, which is what the model needs (a ping-pong
//          between two otherwise idle ranks reads far lower on a loaded host);
//   gamma: one float32 sum of b bytes into a buffer = b * gamma (b = 4 MiB);
//   arena: shm_direct broadcast of b bytes = 2 alpha + 2 b beta (two
//          synchronisations; the root writes b, every rank reads b), fitted
//          through b = 8 and b = 1 MiB.
// Each time is the minimum over a few repetitions of a mean over iterations,
// which filters out the other jobs sharing the cores.
#include "tune.hpp"

#include "algorithms/cost_model.hpp"
#include "core/reduce.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace chorus::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSmall = 8;
constexpr std::size_t kLarge = 1 << 20;
constexpr std::size_t kReduceBytes = 4 << 20;
constexpr int kRepeats = 5;

// Minimum over kRepeats of the mean time of `iters` calls of `body`, in seconds.
double best_mean(int iters, const std::function<void()>& body) {
  double best = 1e30;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    auto start = Clock::now();
    for (int i = 0; i < iters; ++i) body();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / iters);
  }
  return best;
}

// Mean time of a recursive-doubling all-reduce of `bytes` (main() pins the
// algorithm for --tune), the slowest rank's.
double allreduce_time(Communicator& comm, std::size_t bytes, int iters) {
  std::vector<std::byte> buffer(bytes);
  comm.barrier();
  double time = best_mean(iters, [&] {
    comm.all_reduce(buffer.data(), buffer.data(), bytes, DataType::Uint8, ReduceOp::Max);
  });
  comm.all_reduce(&time, &time, 1, DataType::Float64, ReduceOp::Max);
  return time;
}

// Fits the link through the all-reduce: R = log2 p + 2f rounds of the whole
// buffer, (log2 p + f) reductions of it (cost_model.cpp's formula).
algorithms::LinkCost measure_link(Communicator& comm, double gamma) {
  auto n = static_cast<unsigned>(comm.size());
  double f = std::has_single_bit(n) ? 0 : 1;
  double log2p = std::bit_width(n) - 1;
  double rounds = log2p + 2 * f;
  double small = allreduce_time(comm, kSmall, 50);
  double large = allreduce_time(comm, kLarge, 5);
  double reduce = (log2p + f) * static_cast<double>(kLarge) * gamma;
  return {small / rounds,
          std::max(large - small - reduce, 0.0) / (rounds * static_cast<double>(kLarge - kSmall))};
}

double reduce_gamma() {
  std::size_t count = kReduceBytes / sizeof(float);
  std::vector<float> a(count, 1.0f), b(count, 2.0f);
  double time = best_mean(4, [&] {
    reduce_into(a.data(), a.data(), b.data(), count, DataType::Float32, ReduceOp::Sum);
  });
  return time / static_cast<double>(kReduceBytes);
}

// Arena alpha and beta when the collectives use shm_direct; false otherwise.
bool measure_arena(Communicator& comm, algorithms::LinkCost& arena) {
  comm.barrier();
  if (comm.last_algorithm() != "shm_direct") return false;
  std::vector<std::byte> buffer(kLarge);
  auto bcast = [&](std::size_t bytes) {
    return best_mean(
        10, [&] { comm.broadcast(buffer.data(), buffer.data(), bytes, DataType::Uint8, 0); });
  };
  double small = bcast(kSmall);
  arena.alpha = small / 2;
  arena.beta = std::max(bcast(kLarge) - small, 0.0) / (2.0 * static_cast<double>(kLarge - kSmall));
  return comm.last_algorithm() == "shm_direct";
}

/// "alpha 2.50 us, beta 0.1000 ns/B".
std::string link_text(const algorithms::LinkCost& link) {
  char text[64];
  std::snprintf(text, sizeof text, "alpha %.2f us, beta %.4f ns/B", link.alpha * 1e6,
                link.beta * 1e9);
  return text;
}

/// The file's tuning if it exists (its measured values stay marked measured), else defaults.
algorithms::Tuning existing_or_defaults(const std::string& path) {
  std::ifstream in(path);
  return in.good() ? algorithms::read_tuning(in, path) : algorithms::Tuning{};
}

/// Sets one link's parameters and marks them measured.
void set_measured(algorithms::Tuning& tuning,
                  algorithms::LinkCost algorithms::CostParameters::*link,
                  algorithms::TuningKey alpha, algorithms::TuningKey beta,
                  const algorithms::LinkCost& value) {
  tuning.parameters.*link = value;
  tuning.mark(alpha) = tuning.mark(beta) = algorithms::TuningMark::Measured;
}

}  // namespace

void run_tune(Communicator& comm, const std::string& path) {
  using algorithms::TuningKey;
  const char* transport = std::getenv("CHORUS_TRANSPORT");
  const bool tcp = transport && std::string(transport) == "tcp";
  double gamma = reduce_gamma();
  comm.all_reduce(&gamma, &gamma, 1, DataType::Float64, ReduceOp::Max);
  algorithms::LinkCost link;
  if (comm.size() >= 2) link = measure_link(comm, gamma);
  algorithms::LinkCost arena;
  bool has_arena = comm.size() >= 2 && measure_arena(comm, arena);
  comm.barrier();
  if (comm.rank() != 0) return;
  // Only what was measured now is marked measured; the rest keeps the file's value and mark
  // (or the built-in default, written as assumed).
  algorithms::Tuning tuning = existing_or_defaults(path);
  if (comm.size() >= 2 && tcp) {
    set_measured(tuning, &algorithms::CostParameters::tcp, TuningKey::TcpAlpha, TuningKey::TcpBeta,
                 link);
  } else if (comm.size() >= 2) {
    set_measured(tuning, &algorithms::CostParameters::shm, TuningKey::ShmAlpha, TuningKey::ShmBeta,
                 link);
  }
  if (has_arena) {
    set_measured(tuning, &algorithms::CostParameters::arena, TuningKey::ArenaAlpha,
                 TuningKey::ArenaBeta, arena);
  }
  tuning.parameters.gamma = gamma;
  tuning.mark(TuningKey::Gamma) = algorithms::TuningMark::Measured;
  std::ofstream out(path);
  algorithms::write_tuning(out, tuning);
  if (!out.good()) throw Error(Status::InvalidArgument, "cannot write the tuning file " + path);
  std::printf("# %s link: %s; arena: %s; gamma %.4f ns/B -> %s\n", tcp ? "tcp" : "shm",
              comm.size() >= 2 ? link_text(link).c_str() : "not measured (one rank)",
              has_arena ? link_text(arena).c_str() : "not in use", gamma * 1e9, path.c_str());
}

}  // namespace chorus::perf
