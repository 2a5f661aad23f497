// Ranks as forked processes of the test, so that each has its own address
// space (tests/comm/test_cma.cpp). The ranks are forked while the test process
// has a single thread; the test then serves the store and hands its port to the
// ranks through a pipe. A rank's body records failures with rank_check(); the
// rank exits 1 if any, so the test sees every rank's verdict in its status.
#pragma once

#include "bootstrap/store.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {

/// Memory shared by the test and its ranks (an anonymous MAP_SHARED page).
struct SharedPage {
  std::atomic<long long> killed_at_ns{0};
  std::atomic<int> pids[16] = {};
};

inline long long monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Failures recorded by rank_check in this process (threads as ranks share it).
inline std::atomic<int>& rank_failures() {
  static std::atomic<int> failures{0};
  return failures;
}

/// In a rank: prints `what` and counts a failure unless `ok`.
inline bool rank_check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "[pid %d] %s\n", static_cast<int>(::getpid()), what.c_str());
    ++rank_failures();
  }
  return ok;
}

using RankBody = std::function<void(Communicator&, SharedPage&)>;

struct ForkedRanks {
  int n = 2;
  std::vector<std::string> env;  ///< NAME=value set in every rank before it joins
  std::chrono::seconds limit{60};
  std::function<void()> before_join;  ///< runs in every rank before it joins (may be empty)
};

inline void run_rank(const ForkedRanks& job, int rank, int port_pipe, SharedPage& page,
                     const RankBody& body) {
  for (const std::string& entry : job.env) ::putenv(const_cast<char*>(entry.c_str()));
  page.pids[rank].store(static_cast<int>(::getpid()));
  if (job.before_join) job.before_join();
  int port = 0;
  if (::read(port_pipe, &port, sizeof(port)) != sizeof(port)) std::_Exit(3);
  try {
    InitOptions init;
    init.nranks = job.n;
    init.rank = rank;
    init.store_address = "127.0.0.1:" + std::to_string(port);
    init.host_store = false;
    init.auth_token = "forked-ranks-secret";
    init.timeout = std::chrono::seconds(20);
    Communicator comm = Communicator::init(init);
    body(comm, page);
  } catch (const std::exception& e) {
    rank_check(false, "rank " + std::to_string(rank) + " threw: " + e.what());
  }
  std::fflush(stderr);
  std::_Exit(rank_failures() == 0 ? 0 : 1);
}

/// Runs `body` on job.n forked ranks; returns each rank's wait status (-1: still
/// running at job.limit, then killed).
inline std::vector<int> run_forked_ranks(const ForkedRanks& job, const RankBody& body) {
  void* memory = ::mmap(nullptr, sizeof(SharedPage), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return {};
  auto* page = new (memory) SharedPage();
  int fds[2];
  if (::pipe(fds) != 0) return {};
  std::vector<pid_t> pids;
  for (int r = 0; r < job.n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      run_rank(job, r, fds[0], *page, body);
    }
    pids.push_back(pid);
  }
  ::close(fds[0]);
  std::vector<int> statuses(pids.size(), -1);
  {
    StoreServer server("127.0.0.1", 0, "forked-ranks-secret");
    const int port = server.port();
    for (int r = 0; r < job.n; ++r) {
      if (::write(fds[1], &port, sizeof(port)) != sizeof(port)) break;
    }
    const auto deadline = std::chrono::steady_clock::now() + job.limit;
    std::size_t done = 0;
    std::vector<bool> reaped(pids.size(), false);
    while (done < pids.size() && std::chrono::steady_clock::now() < deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!reaped[i] && ::waitpid(pids[i], &statuses[i], WNOHANG) == pids[i]) {
          reaped[i] = true;
          ++done;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!reaped[i]) ::kill(pids[i], SIGKILL), ::waitpid(pids[i], nullptr, 0), statuses[i] = -1;
    }
  }
  ::close(fds[1]);
  page->~SharedPage();
  ::munmap(memory, sizeof(SharedPage));
  return statuses;
}

inline bool exited_cleanly(int status) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Whether all `n` ranks ran and exited cleanly (run_forked_ranks's statuses), each
/// failure described in `*why`.
inline bool all_exited_cleanly(const std::vector<int>& statuses, int n, std::string* why) {
  if (statuses.size() != static_cast<std::size_t>(n)) {
    *why = "the ranks did not start";
    return false;
  }
  for (int r = 0; r < n; ++r) {
    if (!exited_cleanly(statuses[static_cast<std::size_t>(r)])) {
      *why += "rank " + std::to_string(r) + " status " +
              std::to_string(statuses[static_cast<std::size_t>(r)]) + "; ";
    }
  }
  return why->empty();
}

/// Runs `body` on job.n forked ranks; "" when every rank ran and exited cleanly, else
/// which did not (for EXPECT_EQ(..., "")).
inline std::string forked_ranks_failures(const ForkedRanks& job, const RankBody& body) {
  std::string why;
  all_exited_cleanly(run_forked_ranks(job, body), job.n, &why);
  return why;
}

/// Rank 1 SIGKILLs itself 100-300 ms in while every rank repeats the call that `prepare(c)`
/// returns; every other rank must fail with RemoteError naming rank 1 within 2 s, and
/// `after(c)` (may be empty) checks what else must hold then. Returns the wait statuses.
inline std::vector<int> run_with_killed_peer(
    const ForkedRanks& job, const std::function<std::function<void()>(Communicator&)>& prepare,
    const std::function<void(Communicator&)>& after = {}) {
  return run_forked_ranks(job, [&](Communicator& c, SharedPage& page) {
    const std::function<void()> call = prepare(c);
    if (c.rank() == 1) {
      std::thread([&page] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100 + ::getpid() % 200));
        page.killed_at_ns.store(monotonic_ns());
        ::raise(SIGKILL);
      }).detach();
    }
    try {
      for (int i = 0; i < 100000; ++i) call();
      rank_check(false, "no call failed");
    } catch (const Error& e) {
      const long long waited = monotonic_ns() - page.killed_at_ns.load();
      const std::string what = "rank " + std::to_string(c.rank()) + ": " + e.what();
      rank_check(e.status() == Status::RemoteError, what);
      rank_check(std::string(e.what()).find("rank 1") != std::string::npos, what);
      rank_check(page.killed_at_ns.load() > 0 && waited < 2'000'000'000LL,
                 what + " after " + std::to_string(waited / 1000000) + " ms");
      if (after) after(c);
    }
  });
}

/// For ForkedRanks::before_join: makes this process's memory unreadable to its peers
/// (cross-memory reads fail with EPERM): not dumpable, and without CAP_SYS_PTRACE
/// (which would override that for root).
inline void forbid_cross_memory_reads() {
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return;
  data[0].effective &= ~(1u << CAP_SYS_PTRACE);
  data[0].permitted &= ~(1u << CAP_SYS_PTRACE);
  ::syscall(SYS_capset, &header, data);
}

/// In a rank after forbid_cross_memory_reads: checks the premise, that reading the next
/// rank's memory now fails with EPERM.
inline void check_cross_memory_reads_refused(const Communicator& c, const SharedPage& page) {
  std::uint64_t word = 0, target = 0;
  iovec local{&word, sizeof(word)}, remote{&target, sizeof(target)};
  const pid_t peer = page.pids[(c.rank() + 1) % c.size()].load();
  rank_check(::process_vm_readv(peer, &local, 1, &remote, 1, 0) == -1 && errno == EPERM,
             "process_vm_readv of a peer is still allowed");
}

}  // namespace chorus::testing
