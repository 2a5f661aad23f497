// A rank of a real multi-process job, launched by chorusrun or by the test driver.
//   mp_worker collectives   every collective once per dtype family, checked; exit 0 when right
//   mp_worker kill          random collectives until rank CHORUS_TEST_VICTIM kills itself after
//                           CHORUS_TEST_KILL_AFTER iterations (below 0: before its first
//                           collective, right after init); survivors must see RemoteError
//                           within 2 s of the kill (time taken from CHORUS_TEST_KILL_FILE)
//   mp_worker churn         20 rounds of: split in two, an 8-byte all-reduce in the half, a
//                           world barrier (communicators made and destroyed all along)
#include "reference.hpp"

#include <chorus/communicator.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace chorus;
using namespace chorus::testing;

long long monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int check_collectives(Communicator& c) {
  int wrong = 0;
  const int n = c.size();
  for (DataType t : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      const std::size_t count = 1031;
      auto buf = make_input(c.rank(), count, t, op);
      c.all_reduce(buf.data(), buf.data(), count, t, op);
      for (std::size_t i = 0; i < count; ++i)
        wrong += element(buf, i, t) != expected_reduction(n, i, t, op);
    }
  }
  std::vector<std::int64_t> mine(5, c.rank()), all(5 * n), scattered(5);
  c.all_gather(mine.data(), all.data(), 5, DataType::Int64);
  for (int r = 0; r < n; ++r) wrong += all[r * 5 + 4] != r;
  c.broadcast(all.data(), all.data(), all.size(), DataType::Int64, n - 1);
  c.scatter(all.data(), scattered.data(), 5, DataType::Int64, 0);
  wrong += scattered[0] != c.rank();
  std::vector<std::int64_t> sends(n), recvs(n);
  for (int p = 0; p < n; ++p) sends[p] = c.rank() * 100 + p;
  c.all_to_all(sends.data(), recvs.data(), 1, DataType::Int64);
  for (int p = 0; p < n; ++p) wrong += recvs[p] != p * 100 + c.rank();
  c.gather(mine.data(), c.rank() == 0 ? all.data() : nullptr, 5, DataType::Int64, 0);
  if (c.rank() == 0) {
    for (int r = 0; r < n; ++r) wrong += all[r * 5] != r;
  }
  if (n > 1) {
    std::int64_t token = c.rank(), got = -1;
    Request s = c.isend(&token, 1, DataType::Int64, (c.rank() + 1) % n);
    c.recv(&got, 1, DataType::Int64, (c.rank() + n - 1) % n);
    s.wait();
    wrong += got != (c.rank() + n - 1) % n;
  }
  Communicator half = c.split(c.rank() % 2, 0);
  std::int64_t one = 1;
  half.all_reduce(&one, &one, 1, DataType::Int64, ReduceOp::Sum);
  wrong += one != (n + 1 - c.rank() % 2) / 2;
  c.barrier();
  int total = wrong;
  c.all_reduce(&total, &total, 1, DataType::Int32, ReduceOp::Sum);
  if (c.rank() == 0) std::printf("collectives on %d ranks: %d wrong\n", n, total);
  return total == 0 ? 0 : 1;
}

/// Starts the collective of iteration `it` (the same on every rank).
Request start_collective(Communicator& c, int it, std::vector<float>& a, std::vector<float>& b) {
  const std::size_t count = a.size() / c.size();
  switch (it % 4) {
    case 0:
      return c.iall_reduce(a.data(), a.data(), a.size(), DataType::Float32, ReduceOp::Sum);
    case 1:
      return c.ibroadcast(a.data(), a.data(), a.size(), DataType::Float32, it % c.size());
    case 2:
      return c.iall_gather(a.data(), b.data(), count, DataType::Float32);
    default:
      return c.iall_to_all(a.data(), b.data(), count, DataType::Float32);
  }
}

int kill_scenario(Communicator& c) {
  const int victim = env_int("CHORUS_TEST_VICTIM", 1);
  const int kill_after = env_int("CHORUS_TEST_KILL_AFTER", 5);
  const std::string kill_file = std::getenv("CHORUS_TEST_KILL_FILE");
  std::vector<float> a(1 << 18, 1.0f), b(a.size());
  const auto die = [&] {
    std::ofstream(kill_file + ".tmp") << monotonic_ns() << "\n";
    std::rename((kill_file + ".tmp").c_str(), kill_file.c_str());
    raise(SIGKILL);
  };
  if (c.rank() == victim && kill_after < 0) die();  // before any link to it is opened
  for (int it = 0;; ++it) {
    if (c.rank() == victim && it == kill_after) {
      Request pending = start_collective(c, it, a, b);  // peers are mid-transfer with us
      die();
    }
    try {
      start_collective(c, it, a, b).wait();
    } catch (const Error& e) {
      long long detected = monotonic_ns(), killed = 0;
      std::ifstream(kill_file) >> killed;
      double ms = killed ? (detected - killed) / 1e6 : -1;
      std::printf("rank %d: %s after %.1f ms: %s\n", c.rank(),
                  std::string(to_string(e.status())).c_str(), ms, e.what());
      return e.status() == Status::RemoteError && killed && ms < 2000 ? 0 : 3;
    }
  }
}

int churn(Communicator& c) {
  for (int round = 0; round < 20; ++round) {
    Communicator half = c.split(c.rank() % 2, c.rank());
    std::int64_t value = 1;
    half.all_reduce(&value, &value, 1, DataType::Int64, ReduceOp::Sum);
    if (value != half.size()) return 3;
    c.barrier();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mp_worker collectives|kill|churn\n");
    return 2;
  }
  try {
    Communicator c = Communicator::init_from_env();
    std::string scenario = argv[1];
    if (scenario == "collectives") return check_collectives(c);
    if (scenario == "kill") return kill_scenario(c);
    if (scenario == "churn") return churn(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_worker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "mp_worker: unknown scenario\n");
  return 2;
}
