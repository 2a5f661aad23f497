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
#include "bootstrap/launch_env.hpp"
#include "core/reduce.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
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

/// Where this rank runs: its host's index (hosts numbered by their lowest rank), its place
/// among that host's ranks, and how many hosts the job spans, from every rank's
/// host_identity() (the identity the transports use to tell hosts apart).
struct Placement {
  int host = 0;
  int local_rank = 0;
  int num_hosts = 1;
};

Placement place(Communicator& comm) {
  constexpr std::size_t kIdentityBytes = 320;  // a host name (<= 255) and a boot id
  std::string mine = host_identity();
  mine.resize(kIdentityBytes - 1, '\0');
  std::vector<char> all(kIdentityBytes * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine.c_str(), all.data(), kIdentityBytes, DataType::Uint8);
  auto identity = [&](int r) {
    return std::string_view(all.data() + kIdentityBytes * static_cast<std::size_t>(r));
  };
  std::vector<std::string_view> hosts;  // in order of their lowest rank
  Placement at;
  for (int r = 0; r < comm.size(); ++r) {
    auto known = std::find(hosts.begin(), hosts.end(), identity(r));
    if (known == hosts.end()) hosts.push_back(identity(r));
    if (r >= comm.rank()) continue;
    if (identity(r) == identity(comm.rank())) ++at.local_rank;
  }
  at.host = static_cast<int>(std::find(hosts.begin(), hosts.end(), identity(comm.rank())) -
                             hosts.begin());
  at.num_hosts = static_cast<int>(hosts.size());
  return at;
}

/// What one rank measured; the job's values are the maxima over ranks (a rank that did not
/// measure a link leaves it at 0, has = 0).
struct Measurements {
  algorithms::LinkCost shm, tcp, arena;
  double has_shm = 0, has_tcp = 0, has_arena = 0;
  double gamma = 0;

  void combine(Communicator& comm) {
    double values[] = {shm.alpha,  shm.beta, tcp.alpha, tcp.beta,  arena.alpha,
                       arena.beta, has_shm,  has_tcp,   has_arena, gamma};
    comm.all_reduce(values, values, std::size(values), DataType::Float64, ReduceOp::Max);
    shm = {values[0], values[1]};
    tcp = {values[2], values[3]};
    arena = {values[4], values[5]};
    has_shm = values[6];
    has_tcp = values[7];
    has_arena = values[8];
    gamma = values[9];
  }
};

/// The links within a host (shm, or tcp under CHORUS_TRANSPORT=tcp) and the arena, on a
/// communicator of one host's ranks.
void measure_one_host(Communicator& comm, bool tcp, Measurements& m) {
  if (comm.size() < 2) return;
  (tcp ? m.tcp : m.shm) = measure_link(comm, m.gamma);
  (tcp ? m.has_tcp : m.has_shm) = 1;
  m.has_arena = measure_arena(comm, m.arena) ? 1 : 0;
}

/// Across hosts: each host's ranks measure their shared links and arena on a communicator of
/// their own, all hosts at once (with CHORUS_TRANSPORT=tcp those links are tcp too, and
/// are not measured: the tcp parameters are the links between hosts); then one rank per host
/// measures the tcp links between hosts.
void measure_hosts(Communicator& comm, const Placement& at, bool tcp, Measurements& m) {
  {
    Communicator host = comm.split(at.host, comm.rank(), "tune_host");
    if (!tcp) measure_one_host(host, false, m);
  }
  Communicator leaders = comm.split(at.local_rank == 0 ? 0 : -1, comm.rank(), "tune_leaders");
  if (leaders) {
    m.tcp = measure_link(leaders, m.gamma);
    m.has_tcp = 1;
  }
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

/// Rank 0: merges what was measured into the file at `path` and says what it wrote.
void write_measurements(const Measurements& m, int num_hosts, const std::string& path) {
  using algorithms::CostParameters;
  using algorithms::TuningKey;
  // Only what was measured now is marked measured; the rest keeps the file's value and mark
  // (or the built-in default, written as assumed).
  algorithms::Tuning tuning = existing_or_defaults(path);
  if (m.has_shm)
    set_measured(tuning, &CostParameters::shm, TuningKey::ShmAlpha, TuningKey::ShmBeta, m.shm);
  if (m.has_tcp)
    set_measured(tuning, &CostParameters::tcp, TuningKey::TcpAlpha, TuningKey::TcpBeta, m.tcp);
  if (m.has_arena) {
    set_measured(tuning, &CostParameters::arena, TuningKey::ArenaAlpha, TuningKey::ArenaBeta,
                 m.arena);
  }
  tuning.parameters.gamma = m.gamma;
  tuning.mark(TuningKey::Gamma) = algorithms::TuningMark::Measured;
  std::ofstream out(path);
  algorithms::write_tuning(out, tuning);
  if (!out.good()) throw Error(Status::InvalidArgument, "cannot write the tuning file " + path);
  auto text = [](double has, const algorithms::LinkCost& link) {
    return has ? link_text(link) : std::string("not measured");
  };
  std::printf("# %d host(s); shm link: %s; tcp link: %s; arena: %s; gamma %.4f ns/B -> %s\n",
              num_hosts, text(m.has_shm, m.shm).c_str(), text(m.has_tcp, m.tcp).c_str(),
              text(m.has_arena, m.arena).c_str(), m.gamma * 1e9, path.c_str());
}

}  // namespace

void run_tune(Communicator& comm, const std::string& path) {
  const char* transport = std::getenv("CHORUS_TRANSPORT");
  const bool tcp = transport && std::string(transport) == "tcp";
  Measurements m;
  m.gamma = reduce_gamma();
  comm.all_reduce(&m.gamma, &m.gamma, 1, DataType::Float64, ReduceOp::Max);
  const Placement at = place(comm);
  if (at.num_hosts == 1) {
    measure_one_host(comm, tcp, m);
  } else {
    measure_hosts(comm, at, tcp, m);
  }
  m.combine(comm);
  if (comm.rank() == 0) write_measurements(m, at.num_hosts, path);
}

}  // namespace chorus::perf
