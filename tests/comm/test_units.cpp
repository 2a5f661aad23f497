// The comm layer's pure parts: argument validation, call plans and the ordered executor.
#include "comm/call_plan.hpp"
#include "comm/executor.hpp"
#include "comm/roots_digest.hpp"
#include "comm/validate.hpp"

#include <chorus/error.hpp>

#include <thread>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <vector>

namespace chorus::detail {
namespace {

using algorithms::Call;

Call args(Collective c, const void* send, void* recv, std::size_t count, int root = 0) {
  Call a;
  a.collective = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = DataType::Float32;
  a.root = root;
  return a;
}

TEST(Validate, BuffersARankDoesNotUseMayBeNull) {
  float x[8];
  EXPECT_NO_THROW(validate_collective(args(Collective::Reduce, x, nullptr, 1, 1), 0, 2));
  EXPECT_THROW(validate_collective(args(Collective::Reduce, x, nullptr, 1, 0), 0, 2), Error);
  EXPECT_NO_THROW(validate_collective(args(Collective::Broadcast, nullptr, x, 1, 1), 0, 2));
  EXPECT_THROW(validate_collective(args(Collective::Broadcast, nullptr, x, 1, 0), 0, 2), Error);
  EXPECT_NO_THROW(validate_collective(args(Collective::Scatter, nullptr, x, 1, 1), 0, 2));
  EXPECT_NO_THROW(validate_collective(args(Collective::Gather, x, nullptr, 1, 1), 0, 2));
  EXPECT_NO_THROW(validate_collective(args(Collective::AllReduce, nullptr, nullptr, 0), 0, 2));
  EXPECT_NO_THROW(validate_collective(args(Collective::Barrier, nullptr, nullptr, 0), 0, 2));
}

TEST(Validate, RootsDtypesOpsAndOverflow) {
  float x[1];
  EXPECT_THROW(validate_collective(args(Collective::Gather, x, x, 1, 2), 0, 2), Error);
  Call bad = args(Collective::AllReduce, x, x, 1);
  bad.dtype = static_cast<DataType>(10);
  EXPECT_THROW(validate_collective(bad, 0, 2), Error);
  bad = args(Collective::AllReduce, x, x, 1);
  bad.op = static_cast<ReduceOp>(5);
  EXPECT_THROW(validate_collective(bad, 0, 2), Error);
  EXPECT_THROW(validate_collective(args(Collective::AllGather, x, x, SIZE_MAX / 4), 0, 2), Error);
  try {
    validate_collective(args(Collective::AllReduce, nullptr, x, 3), 0, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_STREQ(e.what(), "allreduce: sendbuf is NULL but the call moves 12 bytes");
  }
}

TEST(Validate, AllToAllVNeedsOneEntryPerRankAndNoOverflow) {
  float x[4];
  std::size_t counts[2] = {1, 1}, displs[2] = {0, 1}, huge[2] = {SIZE_MAX, 0};
  Call a = args(Collective::AllToAllV, x, x, 0);
  a.send_counts = counts, a.send_displs = displs, a.recv_counts = counts, a.recv_displs = displs;
  EXPECT_NO_THROW(validate_collective(a, 0, 2));
  a.recv_displs = huge;
  EXPECT_THROW(validate_collective(a, 0, 2), Error);
  a.recv_displs = std::span<const std::size_t>(displs, 1);
  EXPECT_THROW(validate_collective(a, 0, 2), Error);
}

TEST(Validate, AllToAllVSendsItselfWhatItReceivesFromItself) {
  float x[4];
  std::size_t ones[2] = {1, 1}, others[2] = {1, 2}, displs[2] = {0, 2};
  Call a = args(Collective::AllToAllV, x, x + 2, 0);
  a.send_counts = ones, a.send_displs = displs, a.recv_counts = others, a.recv_displs = displs;
  EXPECT_NO_THROW(validate_collective(a, 0, 2));  // rank 0: 1 to itself, 1 from itself
  try {
    validate_collective(a, 1, 2);  // rank 1: 1 to itself, 2 from itself
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_STREQ(e.what(), "alltoallv: rank 1 sends 1 elements to itself but expects 2");
  }
}

TEST(Validate, PointToPointPeers) {
  float x;
  EXPECT_NO_THROW(validate_point_to_point(Collective::Send, &x, 1, DataType::Float32, 1, 0, 2));
  EXPECT_THROW(validate_point_to_point(Collective::Send, &x, 1, DataType::Float32, 0, 0, 2), Error);
  EXPECT_THROW(validate_point_to_point(Collective::Recv, &x, 1, DataType::Float32, 2, 0, 2), Error);
  EXPECT_THROW(validate_point_to_point(Collective::Recv, nullptr, 1, DataType::Float32, 1, 0, 2),
               Error);
}

/// Stamps a sequence of calls (collective, root) as the communicator does; returns the
/// barriers' fingerprints.
std::vector<Fingerprint> stamp_calls(detail::RootsDigest& digest,
                                     std::vector<std::pair<Collective, int>> calls) {
  std::vector<Fingerprint> barriers;
  std::uint64_t seq = 0;
  for (auto [collective, root] : calls) {
    Fingerprint fp;
    fp.seq = ++seq;
    fp.collective = collective;
    fp.root = has_root(collective) ? root : -1;
    digest.stamp(fp);
    if (collective == Collective::Barrier) barriers.push_back(fp);
  }
  return barriers;
}

TEST(RootsDigest, BarriersCarryTheRootsOfTheRootedCallsSinceThePreviousOne) {
  using C = Collective;
  detail::RootsDigest same, other, none;
  const std::vector<std::pair<C, int>> calls = {
      {C::Broadcast, 0}, {C::AllReduce, -1}, {C::Gather, 2},  {C::Barrier, -1},
      {C::Barrier, -1},  {C::Scatter, 1},    {C::Barrier, -1}};
  auto mine = stamp_calls(same, calls);
  auto changed = calls;
  changed[2].second = 1;  // the gather's root differs on the other rank
  auto theirs = stamp_calls(other, changed);
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_NE(mine[0].root, -1);
  EXPECT_FALSE(fingerprints_match(mine[0], theirs[0]));  // the barrier after the gather
  EXPECT_EQ(mine[1].root, -1);                           // no rooted call since
  EXPECT_TRUE(fingerprints_match(mine[2], theirs[2]));   // a new digest after each barrier
  EXPECT_TRUE(fingerprints_match(mine[1], theirs[1]));
  EXPECT_NE(describe(mine[0]).find("whose roots digest to"), std::string::npos);
  EXPECT_EQ(same.calls_before(4),
            "broadcast #1 (count 0, int8, root 0), gather #3 (count 0, int8, root 2)");
  EXPECT_EQ(same.calls_before(5), "");  // a barrier that carried no digest
  // The same roots in another order are another sequence of calls.
  auto swapped =
      stamp_calls(none, {{C::Broadcast, 2}, {C::AllReduce, -1}, {C::Gather, 0}, {C::Barrier, -1}});
  EXPECT_FALSE(fingerprints_match(mine[0], swapped[0]));
}

// What a plan stands for: the buffers a rank needs are buffer_bytes' non-zero ones, and a
// plan serves exactly its shape.
TEST(CallPlans, ServeTheirShapeAndKnowTheBuffersARankNeeds) {
  float x[8];
  const BufferBytes rooted = buffer_bytes(args(Collective::Gather, x, x, 2, 1), 0, 2);
  EXPECT_EQ(rooted.send, 8u);
  EXPECT_EQ(rooted.recv, 0u);  // rank 0 is not the root
  EXPECT_EQ(buffer_bytes(args(Collective::Gather, x, x, 2, 1), 1, 2).recv, 16u);
  EXPECT_EQ(buffer_bytes(args(Collective::Scatter, x, x, 2, 1), 0, 2).send, 0u);

  CallPlan plan;
  const Call call = args(Collective::Reduce, x, x, 4, 1);
  plan.count = call.count;
  plan.collective = call.collective;
  plan.dtype = call.dtype;
  plan.op = call.op;
  plan.root = call.root;
  plan.needs_send = true;
  plan.used = true;
  PlanTable table;
  EXPECT_EQ(table.find(call), nullptr);
  table.keep(plan);
  ASSERT_NE(table.find(call), nullptr);
  EXPECT_TRUE(table.find(call)->buffers_pass(args(Collective::Reduce, x, nullptr, 4, 1)));
  EXPECT_FALSE(table.find(call)->buffers_pass(args(Collective::Reduce, nullptr, x, 4, 1)));
  Call other = call;
  other.root = 0;
  EXPECT_EQ(table.find(other), nullptr);
  other = call;
  other.op = ReduceOp::Max;
  EXPECT_EQ(table.find(other), nullptr);
  other = call;
  other.dtype = DataType::Float64;
  EXPECT_EQ(table.find(other), nullptr);
  other = call;
  other.count = 5;
  EXPECT_EQ(table.find(other), nullptr);
  // A plan kept unused (no algorithm accepted its shape) serves nothing; every field of the
  // shape tells plans apart, whatever the packing.
  CallPlan unused = plan;
  unused.used = false;
  table.keep(unused);
  EXPECT_EQ(table.find(call), nullptr);
  table.keep(plan);
  for (int root : {-1, 0, 1 << 30}) {
    other = call;
    other.root = root;
    CallPlan rooted = plan;
    rooted.root = root;
    table.keep(rooted);
    EXPECT_NE(table.find(other), nullptr) << root;
    EXPECT_EQ(table.find(call), nullptr) << root;
    other.collective = Collective::Gather;
    EXPECT_EQ(table.find(other), nullptr) << root;
  }
  EXPECT_FALSE(PlanTable::plannable(args(Collective::Reduce, x, x, 0)));
  EXPECT_FALSE(PlanTable::plannable(args(Collective::AllToAllV, x, x, 1)));
  EXPECT_FALSE(PlanTable::plannable(args(Collective::Barrier, x, x, 1)));
  EXPECT_TRUE(PlanTable::plannable(call));
}

TEST(Executor, RunsInSubmissionOrderAndReportsFailures) {
  std::vector<int> order;
  std::atomic<int> failures{0};
  auto executor = Executor::create([&](Status, const std::string&) { ++failures; }, nullptr);
  std::vector<std::shared_ptr<RequestState>> requests;
  for (int i = 0; i < 50; ++i) {
    requests.push_back(executor->submit([&, i] {
      order.push_back(i);
      if (i == 7) throw Error(Status::Timeout, "seven");
    }));
  }
  for (auto& r : requests) EXPECT_TRUE(executor->wait(*r, std::nullopt));
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(requests[7]->status, Status::Timeout);
  EXPECT_EQ(requests[7]->message, "seven");
  EXPECT_EQ(failures.load(), 1);
}

TEST(Executor, WaitForTimesOutAndDrainFinishesQueuedWork) {
  auto executor = Executor::create(nullptr, nullptr);
  std::atomic<bool> release{false};
  auto slow = executor->submit([&] {
    while (!release) std::this_thread::yield();
  });
  EXPECT_FALSE(executor->wait(*slow, std::chrono::milliseconds(20)));
  std::atomic<int> ran{0};
  auto next = executor->submit([&] { ++ran; });
  release = true;
  executor->drain_and_stop();
  EXPECT_TRUE(slow->done);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_THROW(executor->submit([] {}), Error);
}

TEST(Executor, BlockingWorkRunsOnTheCallersThreadAndBackgroundWorkOnTheWorker) {
  auto executor = Executor::create(nullptr, nullptr);
  std::thread::id ran_on;
  auto blocking = executor->submit([&] { ran_on = std::this_thread::get_id(); }, std::nullopt,
                                   Executor::Start::ByCaller);
  ASSERT_TRUE(executor->wait(*blocking, std::nullopt));
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  // Nobody waits on background work: the worker must run it by itself.
  std::atomic<bool> ran{false};
  std::thread::id worker;
  auto background = executor->submit([&] {
    worker = std::this_thread::get_id();
    ran = true;
  });
  for (int i = 0; i < 5000 && !ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(ran.load()) << "the worker did not run background work within 5 s";
  ASSERT_TRUE(executor->wait(*background, std::nullopt));
  EXPECT_NE(worker, std::this_thread::get_id());

  // Blocking work queued behind background work runs after it, in order.
  std::vector<int> order;
  std::atomic<bool> release{false};
  auto slow = executor->submit([&] {
    while (!release) std::this_thread::yield();
    order.push_back(1);
  });
  auto after =
      executor->submit([&] { order.push_back(2); }, std::nullopt, Executor::Start::ByCaller);
  release = true;
  ASSERT_TRUE(executor->wait(*after, std::nullopt));
  EXPECT_TRUE(slow->done);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

/// A claimed run (Executor::claim) for the tests below: runs `body` on this thread.
void run_claimed(Executor& executor, FlightRecorder::RecordId record, std::function<void()> body) {
  executor.run_claimed(body, record);
}

TEST(Executor, ClaimedWorkRunsAloneAndWakesWhatQueuedBehindIt) {
  auto recorder = std::make_unique<FlightRecorder>(16, TraceIdentity{});
  FlightRecorder* trace = recorder.get();
  auto executor = Executor::create(nullptr, nullptr, std::move(recorder));
  FlightRecorder::RecordId record = 0;
  OpDescription op;
  op.fingerprint.collective = Collective::Broadcast;
  ASSERT_TRUE(executor->claim(op, coarse_now(), &record));
  EXPECT_NE(record, 0u);
  FlightRecorder::RecordId second = 0;
  EXPECT_FALSE(executor->claim(op, coarse_now(), &second)) << "two claims at once";
  EXPECT_EQ(trace->snapshot(Clock::now()).entries.at(0).state, OpState::Started);

  // Another thread queues background work (the worker's) and blocking work (its own, which
  // it runs while waiting) behind the claim: neither may start before the claimed run ends,
  // and both must be woken when it does.
  std::vector<int> order;
  std::atomic<bool> queued{false};
  std::thread other([&] {
    auto background = executor->submit([&] { order.push_back(2); }, op);
    auto blocking = executor->submit([&] { order.push_back(3); }, op, Executor::Start::ByCaller);
    queued = true;
    EXPECT_TRUE(executor->wait(*blocking, std::nullopt));
    EXPECT_TRUE(background->done);
  });
  run_claimed(*executor, record, [&] {
    while (!queued) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // room for a wrong start
    order.push_back(1);
  });
  other.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  TraceSnapshot snapshot = trace->snapshot(Clock::now());
  ASSERT_EQ(snapshot.entries.size(), 3u);
  EXPECT_EQ(snapshot.entries[0].state, OpState::Completed);

  // No claim while anything is queued or running; a failed claimed run throws its error and
  // leaves the executor free.
  std::atomic<bool> release{false};
  auto slow = executor->submit([&] {
    while (!release) std::this_thread::yield();
  });
  EXPECT_FALSE(executor->claim(op, coarse_now(), &record));
  release = true;
  ASSERT_TRUE(executor->wait(*slow, std::nullopt));
  ASSERT_TRUE(executor->claim(op, coarse_now(), &record));
  try {
    run_claimed(*executor, record, [] { throw Error(Status::RemoteError, "peer left"); });
    ADD_FAILURE() << "the claimed run's failure was not thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
  }
  EXPECT_EQ(trace->snapshot(Clock::now()).entries.back().state, OpState::Failed);
  EXPECT_TRUE(executor->claim(op, coarse_now(), &record));
  run_claimed(*executor, record, [] {});
}

TEST(Executor, DrainWaitsForAClaimedRun) {
  auto executor = Executor::create(nullptr, nullptr);
  FlightRecorder::RecordId record = 0;
  ASSERT_TRUE(executor->claim(OpDescription{}, coarse_now(), &record));
  std::atomic<bool> running{false}, finished{false};
  std::thread drainer([&] {
    while (!running) std::this_thread::yield();
    executor->drain_and_stop();
    EXPECT_TRUE(finished.load()) << "drain_and_stop returned while a claimed run was running";
  });
  run_claimed(*executor, record, [&] {
    running = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    finished = true;
  });
  drainer.join();
  EXPECT_FALSE(executor->claim(OpDescription{}, coarse_now(), &record));  // stopped
}

}  // namespace
}  // namespace chorus::detail
