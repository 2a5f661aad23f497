// Tagged point-to-point and receive-from-any-source through the Communicator, threads as
// ranks over shared memory and TCP with 2, 3 and 5 ranks: out-of-order tags, many tags
// interleaved, any-source from several senders (each message once, sources right), any-source
// mixed with named receives, zero counts, mismatches, argument checks and a lost peer.
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <tuple>
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

/// The value of element `i` of the `index`-th message with `tag` from `from` to `to`.
std::int32_t value(int from, int to, int tag, int index, int i) {
  return ((from * 31 + to) * 1009 + tag * 101 + index) * 1000 + i;
}

std::vector<std::int32_t> message(int from, int to, int tag, int index, std::size_t count) {
  std::vector<std::int32_t> data(count);
  for (std::size_t i = 0; i < count; ++i) {
    data[i] = value(from, to, tag, index, static_cast<int>(i));
  }
  return data;
}

class P2pTags : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  ThreadRanksOptions options() const {
    return {.transport = std::get<0>(GetParam()), .timeout = 20s};
  }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(P2pTags, TagsOutOfOrder) {
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size(), r = c.rank();
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto one = message(r, right, 1, 0, 3), two = message(r, right, 2, 0, 5000);
    Request sends[2] = {c.isend(one.data(), one.size(), DataType::Int32, right, 1),
                        c.isend(two.data(), two.size(), DataType::Int32, right, 2)};
    std::vector<std::int32_t> in_two(two.size()), in_one(one.size());
    c.recv(in_two.data(), in_two.size(), DataType::Int32, left, 2);
    c.recv(in_one.data(), in_one.size(), DataType::Int32, left, 1);
    for (Request& s : sends) s.wait();
    EXPECT_EQ(in_two, message(left, r, 2, 0, 5000));
    EXPECT_EQ(in_one, message(left, r, 1, 0, 3));
  });
}

/// Every rank sends kPerTag messages of each tag to every other rank, tags interleaved
/// round-robin; receivers take tags in reverse order. Messages of one tag stay in order.
TEST_P(P2pTags, ManyTagsInterleaved) {
  static constexpr int kTags = 5, kPerTag = 3, kCount = 7;
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size(), r = c.rank();
    std::vector<std::vector<std::int32_t>> out;
    std::vector<Request> sends;
    out.reserve(static_cast<std::size_t>(n * kTags * kPerTag));
    for (int peer = 0; peer < n; ++peer) {
      if (peer == r) continue;
      for (int index = 0; index < kPerTag; ++index) {
        for (int tag = 0; tag < kTags; ++tag) {
          out.push_back(message(r, peer, tag, index, kCount));
          sends.push_back(c.isend(out.back().data(), kCount, DataType::Int32, peer, tag));
        }
      }
    }
    for (int tag = kTags - 1; tag >= 0; --tag) {
      for (int peer = 0; peer < n; ++peer) {
        if (peer == r) continue;
        for (int index = 0; index < kPerTag; ++index) {
          std::vector<std::int32_t> in(kCount);
          c.recv(in.data(), kCount, DataType::Int32, peer, tag);
          EXPECT_EQ(in, message(peer, r, tag, index, kCount)) << "tag " << tag << " #" << index;
        }
      }
    }
    for (Request& s : sends) s.wait();
  });
}

/// Rank 0 takes (n-1) * kPerSender messages with recv_any: each exactly once, in order
/// per sender, and source() names the sender.
TEST_P(P2pTags, AnySourceFromSeveralSenders) {
  static constexpr int kPerSender = 4, kCount = 3;
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size(), r = c.rank();
    if (r != 0) {
      for (int index = 0; index < kPerSender; ++index) {
        auto out = message(r, 0, 8, index, kCount);
        c.send(out.data(), kCount, DataType::Int32, 0, 8);
      }
      return;
    }
    std::map<int, int> next;
    for (int k = 0; k < (n - 1) * kPerSender; ++k) {
      std::vector<std::int32_t> in(kCount);
      Request request = c.irecv_any(in.data(), kCount, DataType::Int32, 8);
      request.wait();
      const int source = request.source();
      ASSERT_TRUE(source > 0 && source < n) << source;
      EXPECT_EQ(in, message(source, 0, 8, next[source], kCount));
      ++next[source];
    }
    for (int peer = 1; peer < n; ++peer) EXPECT_EQ(next[peer], kPerSender) << "from " << peer;
  });
}

/// Rank 0 receives tag 1 from each peer by name and tag 2 from any source, posted
/// interleaved; every peer sends tag 2 first, which only the any-source receives may take.
TEST_P(P2pTags, AnySourceMixedWithNamedReceives) {
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size(), r = c.rank();
    if (r != 0) {
      auto a = message(r, 0, 1, 0, 4), b = message(r, 0, 2, 0, 4);
      Request sends[2] = {c.isend(b.data(), 4, DataType::Int32, 0, 2),
                          c.isend(a.data(), 4, DataType::Int32, 0, 1)};
      for (Request& s : sends) s.wait();
      return;
    }
    std::vector<std::vector<std::int32_t>> named(n, std::vector<std::int32_t>(4));
    std::vector<std::vector<std::int32_t>> any(n, std::vector<std::int32_t>(4));
    std::vector<Request> named_requests, any_requests;
    for (int peer = 1; peer < n; ++peer) {
      any_requests.push_back(c.irecv_any(any[peer].data(), 4, DataType::Int32, 2));
      named_requests.push_back(c.irecv(named[peer].data(), 4, DataType::Int32, peer, 1));
    }
    std::vector<int> sources;
    for (int peer = 1; peer < n; ++peer) {
      named_requests[peer - 1].wait();
      EXPECT_EQ(named_requests[peer - 1].source(), peer);
      EXPECT_EQ(named[peer], message(peer, 0, 1, 0, 4));
      any_requests[peer - 1].wait();
      const int source = any_requests[peer - 1].source();
      sources.push_back(source);
      EXPECT_EQ(any[peer], message(source, 0, 2, 0, 4)) << "from " << source;
    }
    std::sort(sources.begin(), sources.end());
    for (int peer = 1; peer < n; ++peer) EXPECT_EQ(sources[peer - 1], peer);
  });
}

TEST_P(P2pTags, ZeroCountMessages) {
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    const int n = c.size(), r = c.rank();
    if (r != 0) {
      c.send(nullptr, 0, DataType::Float32, 0, 3);
      c.send(nullptr, 0, DataType::Float32, 0, 4);
      return;
    }
    for (int peer = 1; peer < n; ++peer) c.recv(nullptr, 0, DataType::Float32, peer, 4);
    std::vector<int> sources;
    for (int k = 1; k < n; ++k) sources.push_back(c.recv_any(nullptr, 0, DataType::Float32, 3));
    std::sort(sources.begin(), sources.end());
    for (int peer = 1; peer < n; ++peer) EXPECT_EQ(sources[peer - 1], peer);
  });
}

TEST_P(P2pTags, SizeMismatchWithATagNamesBothSides) {
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  std::vector<std::int32_t> out(4), in(2);
  job.comms()[1].send(out.data(), 4, DataType::Int32, 0, 3);
  std::string message;
  EXPECT_EQ(status_of([&] { job.comms()[0].recv(in.data(), 2, DataType::Int32, 1, 3); }, &message),
            Status::Mismatch);
  EXPECT_NE(message.find("rank 0 is in recv"), std::string::npos) << message;
  EXPECT_NE(message.find("with tag 3 but rank 1 sent send #0 (count 4, int32) with tag 3"),
            std::string::npos)
      << message;
}

TEST_P(P2pTags, LosingAPeerFailsAnAnySourceReceive) {
  ThreadJob job(ranks(), options());
  ASSERT_TRUE(job.ok());
  std::int32_t x = 0;
  Request request = job.comms()[0].irecv_any(&x, 1, DataType::Int32, 0);
  job.comms()[ranks() - 1] = Communicator();  // the last rank goes away
  auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(status_of([&] { request.wait(); }, &message), Status::RemoteError) << message;
  EXPECT_NE(message.find("rank " + std::to_string(ranks() - 1)), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(request.source(), -1);
}

INSTANTIATE_TEST_SUITE_P(TransportsAndSizes, P2pTags,
                         ::testing::Combine(::testing::Values("shm", "tcp"),
                                            ::testing::Values(2, 3, 5)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(P2pArguments, NegativeTagsAndLonelyAnySourceAreRejected) {
  ThreadJob job(2, {.transport = "auto", .timeout = 10s});
  ASSERT_TRUE(job.ok());
  Communicator& c = job.comms()[0];
  float x = 0;
  EXPECT_EQ(status_of([&] { c.isend(&x, 1, DataType::Float32, 1, -1); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { c.irecv(&x, 1, DataType::Float32, 1, -2); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { c.irecv_any(&x, 1, DataType::Float32, -3); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { c.irecv_any(nullptr, 1, DataType::Float32, 0); }),
            Status::InvalidArgument);
  EXPECT_NE(c.last_error(), "");
  EXPECT_EQ(Request().source(), -1);
  // Nothing was sent: tagged traffic still flows, and a send reports no source.
  job.run([](Communicator& comm) {
    float v = 5;
    if (comm.rank() == 1) {
      Request send = comm.isend(&v, 1, DataType::Float32, 0, 0);
      send.wait();
      EXPECT_EQ(send.source(), -1);
    } else {
      EXPECT_EQ(comm.recv_any(&v, 1, DataType::Float32, 0), 1);
    }
  });
  ThreadJob alone(1, {.transport = "auto", .timeout = 10s});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(status_of([&] { alone.comms()[0].irecv_any(&x, 1, DataType::Float32, 0); }),
            Status::InvalidUsage);
}

}  // namespace
}  // namespace chorus::testing
