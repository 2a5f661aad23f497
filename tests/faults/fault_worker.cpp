// One rank of a fault-injection trial (run by chorus-faults through chorusrun).
// Announces its pid in $CHORUS_FAULT_DIR/rank<R>.pid once the communicator is up,
// then runs random checked collectives (seed $CHORUS_FAULT_SEED, the same on every
// rank) until one fails. The failure is written to $CHORUS_FAULT_DIR/rank<R>.result
// as "<status number> <CLOCK_MONOTONIC ns>\n<sentence>\n" (status -1: wrong data)
// for the driver to judge.
// SIGTERM is ignored: chorusrun sends it to the survivors as soon as the victim dies,
// and the point is to see how fast the library itself reports the death (chorusrun
// follows with SIGKILL after its 3 s grace period).
// Exit: 0 after a library failure was recorded, 4 on wrong data, 5 when nothing
// failed within $CHORUS_FAULT_MAX_SECONDS (default 60).
#include "random_ops.hpp"

#include <chorus/error.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

using namespace chorus;

long long monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

/// Writes `text` to `path` atomically (the driver never sees half a file).
void publish(const std::string& path, const std::string& text) {
  std::ofstream(path + ".tmp") << text;
  std::rename((path + ".tmp").c_str(), path.c_str());
}

void ignore_sigterm() {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
}

int run(const std::string& dir) {
  Communicator comm = Communicator::init_from_env();
  const std::string me = dir + "/rank" + std::to_string(comm.rank());
  publish(me + ".pid", std::to_string(getpid()) + "\n");
  std::mt19937_64 rng(std::stoull(env_or("CHORUS_FAULT_SEED", "1")));
  const long long stop_at =
      monotonic_ns() + std::stoll(env_or("CHORUS_FAULT_MAX_SECONDS", "60")) * 1'000'000'000LL;
  for (long long op = 0; monotonic_ns() < stop_at; ++op) {
    faults::OpSpec spec = faults::draw_op(rng, 1 << 16);
    try {
      if (std::size_t wrong = faults::run_checked(comm, spec)) {
        publish(me + ".result", "-1 " + std::to_string(monotonic_ns()) + "\n" +
                                    std::to_string(wrong) + " wrong elements in op " +
                                    std::to_string(op) + ": " + faults::describe(spec) + "\n");
        return 4;
      }
    } catch (const Error& e) {
      long long detected = monotonic_ns();
      publish(me + ".result", std::to_string(static_cast<int>(e.status())) + " " +
                                  std::to_string(detected) + "\n" + e.what() + "\n");
      return 0;
    }
  }
  return 5;
}

}  // namespace

int main() {
  ignore_sigterm();
  const char* dir = std::getenv("CHORUS_FAULT_DIR");
  if (!dir) {
    std::fprintf(stderr, "fault_worker: CHORUS_FAULT_DIR is not set (run it from chorus-faults)\n");
    return 2;
  }
  try {
    return run(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_worker: %s\n", e.what());
    return 1;
  }
}
