// chorus-soak: random collectives with data verification for a given time (issue 4 item 7).
//   chorusrun -n 4 chorus-soak --seconds S [--max-count N] [--seed X] [--report-every R]
// Every rank draws the same calls from the same seed (random_ops.hpp: every collective,
// dtype, op, root, in place or not, counts log-uniform up to N) and runs each on the whole
// communicator or on one of two sub-communicators: halves (rank parity) and a random split
// redrawn every 200 calls (so split itself runs under load). Every result is checked against
// an independent reference. Ranks agree every 64 calls whether the time is up. Rank 0 prints
// progress every R seconds and at the end: calls, calls/s, payload MB/s, wrong elements.
// Exit 0 when nothing was wrong and no call failed.
#include "random_ops.hpp"

#include <chorus/error.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using namespace chorus;
using Clock = std::chrono::steady_clock;

struct Options {
  double seconds = 60;
  std::size_t max_count = 1 << 18;
  std::uint64_t seed = 12345;
  double report_every = 30;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--seconds")
      o.seconds = std::stod(value);
    else if (flag == "--max-count")
      o.max_count = std::stoull(value);
    else if (flag == "--seed")
      o.seed = std::stoull(value);
    else if (flag == "--report-every")
      o.report_every = std::stod(value);
    else {
      std::fprintf(
          stderr, "usage: chorus-soak --seconds S [--max-count N] [--seed X] [--report-every R]\n");
      std::exit(2);
    }
  }
  return o;
}

struct Totals {
  std::int64_t calls = 0, wrong = 0, bytes = 0, sub_calls = 0, splits = 0;
};

/// A fresh random split of `world`: every rank draws all colours and keys from the shared
/// stream and takes its own, so they agree.
Communicator random_split(Communicator& world, std::mt19937_64& rng) {
  int colors = 1 + static_cast<int>(rng() % 3), my_color = 0, my_key = 0;
  for (int r = 0; r < world.size(); ++r) {
    int color = static_cast<int>(rng() % colors), key = static_cast<int>(rng() % 100);
    if (r == world.rank()) my_color = color, my_key = key;
  }
  return world.split(my_color, my_key);
}

void report(const Communicator& world, const Totals& t, double elapsed, const char* what) {
  if (world.rank() != 0) return;
  std::printf(
      "chorus-soak %s: %d ranks, %.0f s, %lld calls (%lld on sub-communicators, %lld splits), "
      "%.1f calls/s, %.1f MB/s payload per rank, %lld wrong elements on rank 0\n",
      what, world.size(), elapsed, static_cast<long long>(t.calls),
      static_cast<long long>(t.sub_calls), static_cast<long long>(t.splits), t.calls / elapsed,
      t.bytes / elapsed / 1e6, static_cast<long long>(t.wrong));
  std::fflush(stdout);
}

int soak(const Options& o) {
  Communicator world = Communicator::init_from_env();
  Communicator halves = world.split(world.rank() % 2, world.rank());
  std::mt19937_64 rng(o.seed);
  Communicator random = random_split(world, rng);
  Totals t;
  const auto start = Clock::now();
  double next_report = o.report_every;
  for (;;) {
    if (t.calls % 64 == 0) {
      std::int32_t done = std::chrono::duration<double>(Clock::now() - start).count() >= o.seconds;
      world.all_reduce(&done, &done, 1, DataType::Int32, ReduceOp::Max);
      if (done) break;
    }
    if (t.calls % 200 == 199) {
      random = random_split(world, rng);
      ++t.splits;
    }
    faults::OpSpec spec = faults::draw_op(rng, o.max_count);
    int which = static_cast<int>(rng() % 4);  // 0, 1: world; 2: halves; 3: random split
    Communicator& comm = which < 2 ? world : which == 2 ? halves : random;
    t.wrong += static_cast<std::int64_t>(faults::run_checked(comm, spec));
    t.bytes += static_cast<std::int64_t>(faults::payload_bytes(spec, comm.size()));
    t.sub_calls += which >= 2;
    ++t.calls;
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= next_report) {
      report(world, t, elapsed, "progress");
      next_report += o.report_every;
    }
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::int64_t wrong = t.wrong;
  world.all_reduce(&wrong, &wrong, 1, DataType::Int64, ReduceOp::Sum);
  report(world, t, elapsed, "done");
  if (world.rank() == 0)
    std::printf("chorus-soak: %lld wrong elements on all ranks, 0 failed calls\n",
                static_cast<long long>(wrong));
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    return soak(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "chorus-soak: a call failed: %s\n", e.what());
    return 1;
  }
}
