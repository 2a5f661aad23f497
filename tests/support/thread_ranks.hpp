// Threads as ranks: runs `body(comm)` on N threads, each holding its own
// Communicator joined through one in-process store. Failures on any rank are
// collected and reported; a rank that throws aborts its communicator so the
// others fail fast instead of waiting for the timeout.
#pragma once

#include "bootstrap/store.hpp"

#include <chorus/communicator.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {

struct ThreadRanksOptions {
  std::string transport = "auto";
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

inline std::vector<Communicator> connect_thread_ranks(int n, const ThreadRanksOptions& options,
                                                      StoreServer& server) {
  std::vector<Communicator> comms(n);
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::vector<std::string> errors;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        InitOptions init;
        init.nranks = n;
        init.rank = r;
        init.store_address = "127.0.0.1:" + std::to_string(server.port());
        init.host_store = false;
        init.auth_token = "thread-ranks-secret";
        init.transport = options.transport;
        init.timeout = options.timeout;
        comms[r] = Communicator::init(init);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << "init failed: " << e;
  if (!errors.empty()) comms.clear();
  return comms;
}

/// Runs body on every rank of `comms` concurrently; returns when all finished.
inline void run_on_ranks(std::vector<Communicator>& comms,
                         const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  std::mutex mutex;
  for (auto& comm : comms) {
    threads.emplace_back([&] {
      try {
        body(comm);
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mutex);
          ADD_FAILURE() << "rank " << comm.rank() << " threw: " << e.what();
        }
        comm.abort();
      }
    });
  }
  for (auto& t : threads) t.join();
}

/// A job of n thread-ranks with its own store: connect, run, tear down.
class ThreadJob {
 public:
  explicit ThreadJob(int n, ThreadRanksOptions options = {})
      : server_("127.0.0.1", 0, "thread-ranks-secret"),
        comms_(connect_thread_ranks(n, options, server_)) {}
  bool ok() const { return !comms_.empty(); }
  void run(const std::function<void(Communicator&)>& body) { run_on_ranks(comms_, body); }
  std::vector<Communicator>& comms() { return comms_; }

 private:
  StoreServer server_;
  std::vector<Communicator> comms_;
};

}  // namespace chorus::testing
