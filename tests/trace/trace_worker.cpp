// A job with a rank that never arrives, for the chorus-trace end-to-end test:
// every rank does a barrier and two all-reduces, except rank `skip` (argv[1]),
// which does the barrier and the first all-reduce, then sits in application
// code (a long sleep) instead of calling the second. The others time out
// (CHORUS_TIMEOUT), dump their flight records and exit 1.
//
// The waiting ranks ignore SIGTERM: chorusrun stops the job when the first of
// them fails, and the others must still reach their own timeout and dump (they
// do within the launcher's grace period, after which it sends SIGKILL).
#include <chorus/communicator.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  const int skip = argc > 1 ? std::atoi(argv[1]) : -1;
  try {
    chorus::Communicator comm = chorus::Communicator::init_from_env();
    if (comm.rank() != skip) std::signal(SIGTERM, SIG_IGN);
    comm.barrier();
    for (int i = 0; i < 2; ++i) {
      if (comm.rank() == skip && i == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(60));  // the launcher stops us first
        return 0;
      }
      int value = comm.rank();
      comm.all_reduce(&value, &value, 1, chorus::DataType::Int32, chorus::ReduceOp::Sum);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
