// Randomized mismatches, threads as ranks over shared memory and TCP: a seeded
// generator picks a sequence of collectives on 2, 3 or 8 ranks; a random group of
// ranks (at least one, not all) changes the collective, count, dtype, op or root of
// one call (#k) in the same way. Every rank must fail with
// Mismatch, naming both calls #k (or, when it meets the mismatch in a later call,
// that call and the other side's #k). A rank whose part of a call involved no rank
// in another call (it only sent, or exchanged only with ranks that made the same
// call) may complete it — with correct data, which is checked — and fails later, at
// the latest in the barrier every rank closes with. Never a hang (the timeout is
// short), never success with wrong data. CHORUS_MISMATCH_SEED=<n> reruns one trial.
// RootSplit does the same without chance: every rooted collective, each group with
// its own root (the two groups' calls each look whole from inside).
#include "core/collective.hpp"
#include "reference.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kTrials = 25;  // per transport
constexpr std::uint64_t kBaseSeed = 0x5eed2026;

struct Call {
  Collective collective = Collective::AllReduce;
  std::size_t count = 1;
  DataType dtype = DataType::Int32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
};

constexpr Collective kCollectives[] = {
    Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
    Collective::AllGather, Collective::ReduceScatter, Collective::Gather,
    Collective::Scatter,   Collective::AllToAll,      Collective::Barrier};

/// The fingerprint the library stamps on `c` (collectives.cpp), for the expected sentences.
Fingerprint stamp(const Call& c, std::uint64_t seq) {
  Fingerprint fp;
  fp.seq = seq;
  fp.collective = c.collective;
  fp.count = c.count;
  fp.root = has_root(c.collective) ? c.root : -1;
  fp.dtype = c.collective == Collective::Barrier ? 0 : static_cast<std::uint8_t>(c.dtype);
  fp.op = has_reduce_op(c.collective) ? static_cast<std::uint8_t>(c.op) : 0;
  if (c.collective == Collective::Barrier) fp.count = 0;
  return fp;
}

Call random_call(std::mt19937_64& rng, int n) {
  Call c;
  c.collective = kCollectives[rng() % std::size(kCollectives)];
  c.count = c.collective == Collective::Barrier ? 0 : 1 + rng() % 5;
  c.dtype = rng() % 2 ? DataType::Int32 : DataType::Float32;
  c.op = rng() % 2 ? ReduceOp::Sum : ReduceOp::Max;
  c.root = static_cast<int>(rng() % n);
  return c;
}

/// `c` changed in one respect that its fingerprint shows.
Call perturb(std::mt19937_64& rng, Call c, int n) {
  for (;;) {
    switch (rng() % 5) {
      case 0: {
        Collective other = kCollectives[rng() % std::size(kCollectives)];
        if (other == c.collective) continue;
        c.collective = other;
        c.count = other == Collective::Barrier ? 0 : std::max<std::size_t>(c.count, 1);
        return c;
      }
      case 1:
        if (c.collective == Collective::Barrier) continue;
        c.count += 1;
        return c;
      case 2:
        if (c.collective == Collective::Barrier) continue;
        c.dtype = c.dtype == DataType::Int32 ? DataType::Float32 : DataType::Int32;
        return c;
      case 3:
        if (!has_reduce_op(c.collective)) continue;
        c.op = c.op == ReduceOp::Sum ? ReduceOp::Max : ReduceOp::Sum;
        return c;
      default:
        if (!has_root(c.collective)) continue;
        c.root = (c.root + 1) % n;
        return c;
    }
  }
}

struct Trial {
  int ranks = 2;
  std::vector<Call> calls;  ///< what every rank outside `odd` calls
  std::size_t odd_index = 0;
  std::vector<bool> odd;  ///< per rank: whether it calls `odd_call` as call #odd_index
  Call odd_call;
  const Call& call_of(int rank, std::size_t i) const {
    return odd[rank] && i == odd_index ? odd_call : calls[i];
  }
  std::string odd_ranks() const {
    std::string text;
    for (int r = 0; r < ranks; ++r) {
      if (odd[r]) text += (text.empty() ? "" : ",") + std::to_string(r);
    }
    return text;
  }
};

constexpr int kRankCounts[] = {2, 3, 8};

Trial make_trial(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Trial t;
  t.ranks = kRankCounts[rng() % std::size(kRankCounts)];
  t.calls.resize(2 + rng() % 3);
  for (Call& c : t.calls) c = random_call(rng, t.ranks);
  t.odd_index = rng() % t.calls.size();
  t.odd.assign(t.ranks, false);
  for (int r = 0; r < t.ranks; ++r) t.odd[r] = rng() % 3 == 0;
  t.odd[rng() % t.ranks] = true;  // at least one
  if (std::count(t.odd.begin(), t.odd.end(), true) == t.ranks) {
    t.odd[rng() % t.ranks] = false;  // and not all
  }
  t.odd_call = perturb(rng, t.calls[t.odd_index], t.ranks);
  return t;
}

/// Element i of what `rank` must hold after call `c` on n ranks that all made it.
double expected(const Call& c, int n, int rank, std::size_t i) {
  const std::size_t k = c.count;
  switch (c.collective) {
    case Collective::AllReduce:
    case Collective::Reduce:
      return expected_reduction(n, i, c.dtype, c.op);
    case Collective::ReduceScatter:
      return expected_reduction(n, rank * k + i, c.dtype, c.op);
    case Collective::Broadcast:
      return input_value(c.root, i, c.dtype, ReduceOp::Sum);
    case Collective::AllGather:
    case Collective::Gather:
      return input_value(static_cast<int>(i / k), i % k, c.dtype, ReduceOp::Sum);
    case Collective::Scatter:
      return input_value(c.root, rank * k + i, c.dtype, ReduceOp::Sum);
    case Collective::AllToAll:
      return input_value(static_cast<int>(i / k), rank * k + i % k, c.dtype, ReduceOp::Sum);
    default:
      return 0;
  }
}

/// Runs `c`; on success checks what this rank received. Throws chorus::Error.
void run_and_check(Communicator& comm, const Call& c) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t k = c.count;
  const bool reduces = has_reduce_op(c.collective);
  const ReduceOp data_op = reduces ? c.op : ReduceOp::Sum;
  const bool wide_send = c.collective == Collective::ReduceScatter ||
                         c.collective == Collective::AllToAll ||
                         c.collective == Collective::Scatter;
  const bool wide_recv = c.collective == Collective::AllGather ||
                         c.collective == Collective::Gather || c.collective == Collective::AllToAll;
  const int source =
      c.collective == Collective::Broadcast || c.collective == Collective::Scatter ? c.root : r;
  auto send = make_input(source, wide_send ? n * k : k, c.dtype, data_op);
  std::vector<unsigned char> recv((wide_recv ? n * k : k) * dtype_size(c.dtype), 0xEE);
  switch (c.collective) {
    case Collective::AllReduce:
      comm.all_reduce(send.data(), recv.data(), k, c.dtype, c.op);
      break;
    case Collective::Broadcast:
      comm.broadcast(send.data(), recv.data(), k, c.dtype, c.root);
      break;
    case Collective::Reduce:
      comm.reduce(send.data(), recv.data(), k, c.dtype, c.op, c.root);
      break;
    case Collective::AllGather:
      comm.all_gather(send.data(), recv.data(), k, c.dtype);
      break;
    case Collective::ReduceScatter:
      comm.reduce_scatter(send.data(), recv.data(), k, c.dtype, c.op);
      break;
    case Collective::Gather:
      comm.gather(send.data(), recv.data(), k, c.dtype, c.root);
      break;
    case Collective::Scatter:
      comm.scatter(send.data(), recv.data(), k, c.dtype, c.root);
      break;
    case Collective::AllToAll:
      comm.all_to_all(send.data(), recv.data(), k, c.dtype);
      break;
    default:
      comm.barrier();
      return;
  }
  const bool receives =
      (c.collective != Collective::Reduce && c.collective != Collective::Gather) || r == c.root;
  if (!receives) return;
  for (std::size_t i = 0; i < recv.size() / dtype_size(c.dtype); ++i) {
    const double want = expected(c, n, r, i), got = element(recv, i, c.dtype);
    if (got != want) {
      ADD_FAILURE() << "rank " << r << ": " << to_string(c.collective) << " succeeded with element "
                    << i << " = " << got << ", expected " << want;
      return;
    }
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Outcome {
  std::size_t failed_at =
      SIZE_MAX;  ///< index of the first failing call (calls.size(): the last barrier)
  Status status = Status::Success;
  std::string message;
};

void run_trial(const std::string& transport, const Trial& t) {
  SCOPED_TRACE(std::to_string(t.ranks) + " ranks over " + transport + ", ranks " + t.odd_ranks() +
               " call " + describe(stamp(t.odd_call, t.odd_index + 1)) + " instead of " +
               describe(stamp(t.calls[t.odd_index], t.odd_index + 1)));
  ThreadJob job(t.ranks, {.transport = transport, .timeout = 5s});
  ASSERT_TRUE(job.ok());
  std::vector<Outcome> outcomes(t.ranks);
  job.run([&](Communicator& comm) {
    Outcome& out = outcomes[comm.rank()];
    for (std::size_t i = 0; i <= t.calls.size(); ++i) {
      try {
        if (i == t.calls.size())
          comm.barrier();  // the next call after the last
        else
          run_and_check(comm, t.call_of(comm.rank(), i));
      } catch (const Error& e) {
        out = Outcome{i, e.status(), e.what()};
        return;
      }
    }
  });
  const std::string a = describe(stamp(t.calls[t.odd_index], t.odd_index + 1));
  const std::string b = describe(stamp(t.odd_call, t.odd_index + 1));
  for (int r = 0; r < t.ranks; ++r) {
    const Outcome& o = outcomes[r];
    // Earlier calls fail only when a rank that ran ahead already broke the job; later
    // ones complete (with their data checked) only while this rank exchanges nothing with
    // a broken rank: the closing barrier involves every rank, so it fails at the latest.
    EXPECT_LE(o.failed_at, t.calls.size()) << "rank " << r << ": " << o.message;
    EXPECT_EQ(o.status, Status::Mismatch) << "rank " << r << ": " << o.message;
    // Both calls of seq k, or (a rank that finished its part of call k ran into the next
    // call) that next call and the other side's call k.
    const bool both = contains(o.message, a) && contains(o.message, b);
    bool later = false;
    for (std::size_t seq = t.odd_index + 2; seq <= t.calls.size() + 1; ++seq) {
      later = later || contains(o.message, " #" + std::to_string(seq) + " ") ||
              o.message.ends_with(" #" + std::to_string(seq));
    }
    const bool next = (contains(o.message, a) || contains(o.message, b)) && later;
    // Ranks that disagreed on a root and each completed the call: the closing barriers'
    // roots digests differ (the rank that found it names its rooted calls; the others may
    // learn of it from that rank's abort).
    const bool roots =
        a.find(", root ") != std::string::npos && contains(o.message, "whose roots digest to");
    EXPECT_TRUE(both || next || roots) << "rank " << r << ": " << o.message;
  }
}

void run_trials(const std::string& transport, std::uint64_t base) {
  const auto run_seed = [&](std::uint64_t seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (CHORUS_MISMATCH_SEED=" + std::to_string(seed) +
                 ")");
    run_trial(transport, make_trial(seed));
  };
  if (const char* seed = std::getenv("CHORUS_MISMATCH_SEED")) {
    return run_seed(std::strtoull(seed, nullptr, 0));
  }
  for (int trial = 0; trial < kTrials && !::testing::Test::HasFailure(); ++trial) {
    run_seed(base + trial);
  }
}

/// The ways RootSplit splits n ranks: {ranks with the odd root, odd root, everyone else's}.
struct RootSplitCase {
  std::vector<bool> odd;
  int odd_root;
  int root;
};

std::vector<RootSplitCase> root_split_cases(int n) {
  std::vector<RootSplitCase> cases(3, RootSplitCase{std::vector<bool>(n, false), 0, 1});
  cases[0].odd[0] = true;  // rank 0 alone with root 0: both roots in their own group
  for (int r = 1; r < n; r += 2) cases[1].odd[r] = true;  // each group's root in the other
  cases[1].root = 0;
  cases[1].odd_root = 1;
  for (int r : {1, n / 2 + 1, n - 1}) {  // a few with root 0, the rest with root n - 1
    if (r < n) cases[2].odd[r] = true;
  }
  cases[2].root = n - 1;
  return cases;
}

/// Every rooted collective of `count` elements on 2, 3 and 8 ranks, the ranks split in
/// two groups that each make the call with their own root (root_split_cases).
void run_root_splits(const std::string& transport, std::size_t count) {
  for (Collective collective :
       {Collective::Broadcast, Collective::Reduce, Collective::Gather, Collective::Scatter}) {
    for (int n : kRankCounts) {
      for (const RootSplitCase& split : root_split_cases(n)) {
        if (::testing::Test::HasFailure()) return;
        Trial t;
        t.ranks = n;
        t.calls = {Call{collective, count, DataType::Int32, ReduceOp::Sum, split.root}};
        t.odd_call = t.calls[0];
        t.odd_call.root = split.odd_root;
        t.odd = split.odd;
        run_trial(transport, t);
      }
    }
  }
}

/// Sets CHORUS_ALGO for the communicators created while it lives.
class ForcedAlgorithms {
 public:
  explicit ForcedAlgorithms(const char* algo) { ::setenv("CHORUS_ALGO", algo, 1); }
  ~ForcedAlgorithms() { ::unsetenv("CHORUS_ALGO"); }
};

// Every collective by messages (the algorithms that work in the host arena are
// excluded here: see HostArena below).
constexpr const char* kMessageAlgorithms =
    "allreduce=ring,broadcast=binomial,reduce=binomial,allgather=ring,reducescatter=ring,"
    "gather=binomial,scatter=binomial,alltoall=pairwise,barrier=dissemination";

TEST(MismatchRandom, RootSplitSharedMemoryMessages) {
  ForcedAlgorithms algo(kMessageAlgorithms);
  run_root_splits("auto", 3);
}
TEST(MismatchRandom, RootSplitTcp) { run_root_splits("tcp", 3); }
TEST(MismatchRandom, RootSplitHostArena) {
  run_root_splits("auto", 3);
  run_root_splits("auto", 100000);  // several rounds per call
}
TEST(MismatchRandom, RootSplitLarge) {
  run_root_splits("auto", 1 << 20);  // large messages: the cma algorithms where selected
}

TEST(MismatchRandom, SharedMemoryMessages) {
  ForcedAlgorithms algo(kMessageAlgorithms);
  run_trials("auto", kBaseSeed);
}

TEST(MismatchRandom, Tcp) { run_trials("tcp", kBaseSeed + 1000); }

// The default algorithms: on one host, the shm_direct collectives in the host
// arena. A broadcast root leaves the call at once, so its readers must check the
// root's record of the round they read (seed 0x5eed2027 once returned wrong data).
TEST(MismatchRandom, HostArena) { run_trials("auto", kBaseSeed); }

}  // namespace
}  // namespace chorus::testing
