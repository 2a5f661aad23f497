// Mismatched calls, aborts, timeouts and bad arguments, threads as ranks.
#include "scoped_env.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

Status status_of(const std::function<void()>& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.status();
  }
  return Status::Success;
}

class Faults : public ::testing::TestWithParam<std::string> {};

TEST_P(Faults, DifferentCollectivesFailWithMismatchNamingBoth) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 10s});
  ASSERT_TRUE(job.ok());
  std::vector<std::string> messages(2);
  std::vector<Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = job.comms()[r];
      float buf[4] = {1, 2, 3, 4};
      statuses[r] = status_of(
          [&] {
            if (r == 0)
              c.all_reduce(buf, buf, 4, DataType::Float32, ReduceOp::Sum);
            else
              c.broadcast(buf, buf, 4, DataType::Float32, 0);
          },
          &messages[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r], Status::Mismatch) << "rank " << r << ": " << messages[r];
    EXPECT_NE(messages[r].find("allreduce"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("broadcast"), std::string::npos) << messages[r];
  }
  // The communicator stays failed: later calls fail too, and never hang.
  job.run([](Communicator& c) { EXPECT_NE(status_of([&] { c.barrier(); }), Status::Success); });
}

// Here no message ever flows (rank 0 waits on rank 2's all-reduce contribution,
// ranks 1 and 2 wait on the broadcast from rank 0): stalled ranks exchange what
// they are waiting in, so it is still a Mismatch, long before the timeout.
TEST_P(Faults, MismatchWithoutAnyMessageIsFoundQuickly) {
  ThreadJob job(3, {.transport = GetParam(), .timeout = 60s});
  ASSERT_TRUE(job.ok());
  auto start = std::chrono::steady_clock::now();
  job.run([](Communicator& c) {
    float buf[4] = {1, 2, 3, 4};
    std::string message;
    Status s = status_of(
        [&] {
          if (c.rank() == 0)
            c.all_reduce(buf, buf, 4, DataType::Float32, ReduceOp::Sum);
          else
            c.broadcast(buf, buf, 4, DataType::Float32, 0);
        },
        &message);
    EXPECT_EQ(s, Status::Mismatch) << "rank " << c.rank() << ": " << message;
    EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
    EXPECT_NE(message.find("broadcast"), std::string::npos) << message;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_P(Faults, DifferentCountsOrDtypesAreMismatches) {
  for (int variant = 0; variant < 2; ++variant) {
    ThreadJob job(3, {.transport = GetParam(), .timeout = 10s});
    ASSERT_TRUE(job.ok());
    std::atomic<int> mismatches{0};
    job.run([&](Communicator& c) {
      std::vector<double> buf(8, 1.0);
      std::size_t count = variant == 0 && c.rank() == 2 ? 7 : 8;
      DataType t = variant == 1 && c.rank() == 1 ? DataType::Int64 : DataType::Float64;
      Status s = status_of([&] { c.all_reduce(buf.data(), buf.data(), count, t, ReduceOp::Sum); });
      if (s == Status::Mismatch) ++mismatches;
      EXPECT_TRUE(s == Status::Mismatch || s == Status::RemoteError) << to_string(s);
    });
    EXPECT_GE(mismatches.load(), 1);
  }
}

TEST_P(Faults, AbortFromAnotherThreadWakesABlockedCall) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 60s});
  ASSERT_TRUE(job.ok());
  Communicator& c = job.comms()[0];
  auto start = std::chrono::steady_clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(200ms);
    c.abort();
  });
  int value = 1;
  Status s = status_of([&] { c.all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum); });
  aborter.join();
  EXPECT_NE(s, Status::Success);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(status_of([&] { c.barrier(); }), Status::InvalidUsage);
  // The peer learns of the abort rather than waiting for its timeout.
  Communicator& peer = job.comms()[1];
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of([&] { peer.all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum); }),
            Status::RemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_P(Faults, APeerThatNeverArrivesIsATimeout) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 1s});
  ASSERT_TRUE(job.ok());
  std::string message;
  int value = 1;
  auto start = std::chrono::steady_clock::now();
  Status s = status_of(
      [&] { job.comms()[0].all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum); },
      &message);
  EXPECT_EQ(s, Status::Timeout) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(job.comms()[0].last_error(), "");
}

TEST_P(Faults, DestroyingAPeerIsARemoteError) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 30s});
  ASSERT_TRUE(job.ok());
  job.comms()[1] = Communicator();  // rank 1 goes away
  int value = 1;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of([&] {
              job.comms()[0].all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum);
            }),
            Status::RemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// A rank that finished its part of a call and left (destroyed its communicator) fails
// nobody who still reads what it wrote: the root of a gather that waits for a late rank
// after another one wrote and left completes with every block. A later call that needs
// the rank that left fails, naming it.
TEST_P(Faults, APeerThatLeftAfterItsPartFailsOnlyWhatNeedsIt) {
  ThreadJob job(3, {.transport = GetParam(), .timeout = 30s});
  ASSERT_TRUE(job.ok());
  Status left = Status::InProgress, late_status = Status::InProgress;
  std::thread leaver([&] {
    int mine = 12;
    left = status_of([&] { job.comms()[2].gather(&mine, nullptr, 1, DataType::Int32, 0); });
    job.comms()[2] = Communicator();
  });
  leaver.join();
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);  // the root waits for rank 1 with rank 2 gone
    int mine = 11;
    late_status = status_of([&] { job.comms()[1].gather(&mine, nullptr, 1, DataType::Int32, 0); });
  });
  std::vector<int> gathered(3, -1);
  int mine = 10;
  std::string message;
  EXPECT_EQ(status_of([&] { job.comms()[0].gather(&mine, gathered.data(), 1, DataType::Int32, 0); },
                      &message),
            Status::Success)
      << message;
  late.join();
  EXPECT_EQ(left, Status::Success);
  EXPECT_EQ(late_status, Status::Success);
  EXPECT_EQ(gathered, (std::vector<int>{10, 11, 12}));

  std::string other;
  std::thread waiter([&] { status_of([&] { job.comms()[1].barrier(); }, &other); });
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of([&] { job.comms()[0].barrier(); }, &message), Status::RemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
  waiter.join();
}

TEST_P(Faults, BadArgumentsAreRejectedBeforeAnythingIsSent) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 10s});
  ASSERT_TRUE(job.ok());
  Communicator& c = job.comms()[0];
  float x = 0;
  auto bad_dtype = static_cast<DataType>(42);
  auto bad_op = static_cast<ReduceOp>(-1);
  std::vector<std::function<void()>> calls = {
      [&] { c.all_reduce(nullptr, &x, 1, DataType::Float32, ReduceOp::Sum); },
      [&] { c.all_reduce(&x, nullptr, 1, DataType::Float32, ReduceOp::Sum); },
      [&] { c.all_reduce(&x, &x, 1, bad_dtype, ReduceOp::Sum); },
      [&] { c.all_reduce(&x, &x, 1, DataType::Float32, bad_op); },
      [&] { c.broadcast(&x, &x, 1, DataType::Float32, 2); },
      [&] { c.reduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum, -1); },
      [&] { c.gather(&x, nullptr, 1, DataType::Float32, 0); },
      [&] { c.all_reduce(&x, &x, SIZE_MAX / 2, DataType::Float32, ReduceOp::Sum); },
      [&] { c.send(&x, 1, DataType::Float32, 0); },
      [&] { c.send(&x, 1, DataType::Float32, 5); },
      [&] { c.recv(nullptr, 1, DataType::Float32, 1); },
      [&] { c.all_to_all_v(&x, {}, {}, &x, {}, {}, DataType::Float32); },
  };
  for (std::size_t i = 0; i < calls.size(); ++i) {
    std::string message;
    EXPECT_EQ(status_of(calls[i], &message), Status::InvalidArgument) << "call " << i;
    EXPECT_FALSE(message.empty());
    EXPECT_EQ(c.last_error(), message);
  }
  // Nothing was sent: the communicator still works for both ranks.
  job.run([](Communicator& comm) {
    int v = comm.rank() + 1;
    comm.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(v, 3);
  });
}

/// One bad call of every kind that can be found locally, on rank 0 of 3 (rank 0 is the root of
/// the rooted ones). Each must fail with InvalidArgument before it is queued or numbered.
std::vector<std::function<void()>> bad_calls_of_rank_0(Communicator& c, std::vector<float>& buf) {
  float* x = buf.data();
  const DataType f32 = DataType::Float32;
  // All-to-all-v: the counts to and from the others are fine, but rank 0 sends itself 1
  // element and expects 2 (a check only rank 0 can make).
  static const std::size_t ones[3] = {1, 1, 1}, twos[3] = {2, 1, 1}, displs[3] = {0, 2, 4};
  std::span<const std::size_t> send_counts(ones), recv_counts(twos), offsets(displs);
  return {
      [=, &c] { c.all_to_all_v(x, send_counts, offsets, x + 8, recv_counts, offsets, f32); },
      [=, &c] {
        c.iall_to_all_v(x, send_counts, offsets, x + 8, recv_counts, offsets, f32).wait();
      },
      [=, &c] { c.all_reduce(nullptr, x, 1, f32, ReduceOp::Sum); },
      [=, &c] { c.iall_reduce(x, x, 1, f32, static_cast<ReduceOp>(9)).wait(); },
      [=, &c] { c.broadcast(x, x, 1, f32, 3); },
      [=, &c] { c.ireduce(x, x, 1, static_cast<DataType>(42), ReduceOp::Sum, 0).wait(); },
      [=, &c] { c.all_gather(x, nullptr, 1, f32); },
      [=, &c] { c.reduce_scatter(nullptr, x, 1, f32, ReduceOp::Sum); },
      [&c] { c.igather(nullptr, nullptr, 1, f32, 0).wait(); },
      [=, &c] { c.scatter(nullptr, x, 1, f32, 0); },
      [=, &c] { c.all_to_all(x, x, SIZE_MAX / 4, f32); },
      [=, &c] { c.send(x, 1, f32, 0); },
      [=, &c] { c.irecv(x, 1, f32, 3).wait(); },
      [=, &c] { c.send(x, 1, f32, 1, -1); },
      [&c] { c.recv_any(nullptr, 1, f32, 0); },
  };
}

// The documented promise: a call that fails its argument checks leaves no trace, so a rank
// that makes one (here on every collective kind) and then goes on with the correct calls works
// with peers that never saw it, and the sequence numbers still agree.
TEST_P(Faults, ArgumentErrorsLeaveTheCommunicatorUsableOnEveryRank) {
  ThreadJob job(3, {.transport = GetParam(), .timeout = 20s});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    std::vector<float> buf(16, 1.0f);
    if (c.rank() == 0) {
      std::vector<std::function<void()>> calls = bad_calls_of_rank_0(c, buf);
      for (std::size_t i = 0; i < calls.size(); ++i) {
        std::string message;
        EXPECT_EQ(status_of(calls[i], &message), Status::InvalidArgument)
            << "call " << i << ": " << message;
        if (i == 0) {
          EXPECT_EQ(message, "alltoallv: rank 0 sends 1 elements to itself but expects 2");
        }
      }
    }
    c.barrier();
    int v = c.rank() + 1;
    c.all_reduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(v, 6) << "rank " << c.rank();
    // A correct all-to-all-v after the bad one: rank r sends r+1 elements to each peer.
    std::vector<std::size_t> counts(3, static_cast<std::size_t>(c.rank()) + 1);
    std::vector<std::size_t> displs = {0, 4, 8}, recv_counts = {1, 2, 3};
    std::vector<float> out(12, -1.0f), in(12, static_cast<float>(c.rank()));
    c.all_to_all_v(in.data(), counts, displs, out.data(), recv_counts, displs, DataType::Float32);
    for (std::size_t p = 0; p < 3; ++p) {
      for (std::size_t i = 0; i < recv_counts[p]; ++i) {
        EXPECT_EQ(out[displs[p] + i], static_cast<float>(p)) << "rank " << c.rank();
      }
    }
  });
}

// A blocking call of a shape already run skips the full argument checks (comm/call_plan.hpp):
// a NULL buffer that shape needs must still fail with the full check's sentence, before
// anything is numbered or sent, while a NULL buffer the rank does not use still passes.
TEST_P(Faults, NullBuffersOfAShapeAlreadyRunAreStillNamed) {
  ThreadJob job(2, {.transport = GetParam(), .timeout = 20s});
  ASSERT_TRUE(job.ok());
  const DataType f32 = DataType::Float32;
  // Every shape twice (planned by the first call), rank 0's reduce recv NULL (root 1).
  const auto good_calls = [f32](Communicator& c, std::vector<float>& x) {
    const int r = c.rank();
    for (int repeat = 0; repeat < 2; ++repeat) {
      std::fill(x.begin(), x.end(), static_cast<float>(r + 1));
      c.broadcast(x.data(), x.data(), 2, f32, 1);
      EXPECT_EQ(x[0], 2.0f) << "rank " << r;
      c.all_reduce(x.data(), x.data(), 2, f32, ReduceOp::Sum);
      EXPECT_EQ(x[1], 4.0f) << "rank " << r;
      c.reduce(x.data(), r == 1 ? x.data() + 2 : nullptr, 2, f32, ReduceOp::Sum, 1);
      if (r == 1) {
        EXPECT_EQ(x[2], 8.0f);
      }
      c.gather(x.data(), r == 0 ? x.data() + 4 : nullptr, 2, f32, 0);
      c.scatter(r == 0 ? x.data() + 4 : nullptr, x.data(), 2, f32, 0);
    }
  };
  job.run([&](Communicator& c) {
    std::vector<float> x(8);
    good_calls(c, x);
    if (c.rank() == 0) {
      float* p = x.data();
      const std::vector<std::pair<std::function<void()>, std::string>> bad = {
          {[&] { c.broadcast(p, nullptr, 2, f32, 1); },
           "broadcast: recvbuf is NULL but the call moves 8 bytes"},
          {[&] { c.all_reduce(nullptr, p, 2, f32, ReduceOp::Sum); },
           "allreduce: sendbuf is NULL but the call moves 8 bytes"},
          {[&] { c.reduce(nullptr, nullptr, 2, f32, ReduceOp::Sum, 1); },
           "reduce: sendbuf is NULL but the call moves 8 bytes"},
          {[&] { c.gather(p, nullptr, 2, f32, 0); },
           "gather: recvbuf is NULL but the call moves 16 bytes"},
          {[&] { c.scatter(nullptr, p, 2, f32, 0); },
           "scatter: sendbuf is NULL but the call moves 16 bytes"},
      };
      for (const auto& [call, sentence] : bad) {
        std::string message;
        EXPECT_EQ(status_of(call, &message), Status::InvalidArgument) << sentence;
        EXPECT_EQ(message, sentence);
        EXPECT_EQ(c.last_error(), sentence);
      }
    }
    // Nothing was numbered: both ranks go on with the same calls.
    good_calls(c, x);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, Faults, ::testing::Values("auto", "tcp"));

TEST(Init, MalformedStoreAddressesAreInvalidArguments) {
  for (const char* address : {"", "nohostport", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:abc"}) {
    InitOptions o;
    o.nranks = 2;
    o.rank = 1;
    o.store_address = address;
    EXPECT_EQ(status_of([&] { Communicator::init(o); }), Status::InvalidArgument) << address;
  }
  InitOptions o;
  o.nranks = 2;
  o.rank = 2;
  o.store_address = "127.0.0.1:1234";
  EXPECT_EQ(status_of([&] { Communicator::init(o); }), Status::InvalidArgument);
}

TEST(Init, SingleRankWithPortZero) {
  InitOptions o;
  o.store_address = "127.0.0.1:0";
  Communicator c = Communicator::init(o);
  double v = 2.5;
  c.all_reduce(&v, &v, 1, DataType::Float64, ReduceOp::Avg);
  EXPECT_EQ(v, 2.5);
  EXPECT_EQ(c.size(), 1);
}

// Every boolean CHORUS_* variable goes through one parser: a bad value fails the creation
// with the same sentence, whichever variable it is, before any store is started.
// (CHORUS_TRACE_SIGNAL: FlightRecorder.SettingsAreChecked.)
TEST(Init, BadBooleanVariablesFailAlike) {
  ScopedEnv rank("RANK", "0"), size("WORLD_SIZE", "1"), port("MASTER_PORT", "1");
  for (const char* name : {"CHORUS_STORE_EXTERNAL", "CHORUS_CMA"}) {
    ScopedEnv bad(name, "abc");
    std::string message;
    EXPECT_EQ(status_of([] { Communicator::init_from_env(); }, &message), Status::InvalidArgument)
        << name;
    EXPECT_EQ(message, std::string(name) + " must be 0 or 1, got 'abc'");
  }
}

// A CHORUS_SOCKET_IFNAME that fits no interface here fails at once, before the store is
// reached (nobody serves this one).
TEST(Init, UnknownSocketInterfaceFailsAtStart) {
  ScopedEnv ifname("CHORUS_SOCKET_IFNAME", "nosuch0");
  InitOptions o;
  o.nranks = 2;
  o.rank = 1;
  o.store_address = "127.0.0.1:1";
  o.timeout = std::chrono::seconds(20);
  std::string message;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of([&] { Communicator::init(o); }, &message), Status::InvalidArgument);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(message.find("CHORUS_SOCKET_IFNAME=\"nosuch0\""), std::string::npos) << message;
}

}  // namespace
}  // namespace chorus::testing
