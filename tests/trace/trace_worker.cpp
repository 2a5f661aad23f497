// Jobs with a rank that holds the others up, for the chorus-trace end-to-end tests.
//
//   trace_worker R          every rank does a barrier and two all-reduces, except rank R, which
//                           does the barrier and the first all-reduce, then sits in application
//                           code (a long sleep) instead of calling the second.
//   trace_worker R late S   every rank does two barriers; rank R sleeps S seconds (longer than
//                           CHORUS_TIMEOUT) between them, then issues the second one late.
//
// The others time out (CHORUS_TIMEOUT), dump their flight records and exit 1; a late rank then
// fails in its barrier on their abort and dumps too.
//
// The waiting ranks (and a late one) ignore SIGTERM: chorusrun stops the job when the first of
// them fails, and the others must still reach their own failure and dump (they do within the
// launcher's grace period, after which it sends SIGKILL).
#include <chorus/communicator.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

void skip_second_allreduce(chorus::Communicator& comm, int skip) {
  comm.barrier();
  for (int i = 0; i < 2; ++i) {
    if (comm.rank() == skip && i == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // the launcher stops us first
      return;
    }
    int value = comm.rank();
    comm.all_reduce(&value, &value, 1, chorus::DataType::Int32, chorus::ReduceOp::Sum);
  }
}

void late_to_second_barrier(chorus::Communicator& comm, int late, double seconds) {
  comm.barrier();
  if (comm.rank() == late) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  comm.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = argc > 1 ? std::atoi(argv[1]) : -1;
  const bool late = argc > 3 && std::strcmp(argv[2], "late") == 0;
  try {
    chorus::Communicator comm = chorus::Communicator::init_from_env();
    if (late || comm.rank() != rank) std::signal(SIGTERM, SIG_IGN);
    if (late) {
      late_to_second_barrier(comm, rank, std::atof(argv[3]));
    } else {
      skip_second_allreduce(comm, rank);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
