// Shared-memory peers have no socket to close, so their death is seen by the
// pid check: a pid that is gone, and a zombie (exited, not yet reaped by its
// parent), which still answers kill(pid, 0).
#include "mesh_harness.hpp"
#include "transport/shm/process_state.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace chorus::transport::testing {
namespace {

using namespace std::chrono_literals;

/// A child that has exited but is not reaped until the object goes away.
class Zombie {
 public:
  Zombie() : pid_(::fork()) {
    if (pid_ == 0) ::_exit(0);
    siginfo_t info{};
    // WNOWAIT: wait for the exit but leave the child unreaped.
    ok_ = pid_ > 0 && ::waitid(P_PID, pid_, &info, WEXITED | WNOWAIT) == 0;
  }
  ~Zombie() {
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  Zombie(const Zombie&) = delete;
  Zombie& operator=(const Zombie&) = delete;
  bool ok() const { return ok_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
  bool ok_ = false;
};

TEST(ProcessState, StateLetterFollowsTheLastParenthesis) {
  EXPECT_EQ(shm::state_from_stat("42 (chorus) S 1 42 42 0"), 'S');
  EXPECT_EQ(shm::state_from_stat("42 (a) Z (b)) Z 1 2"), 'Z');  // ')' inside the name
  EXPECT_EQ(shm::state_from_stat("42 (x y) R 1"), 'R');
  EXPECT_EQ(shm::state_from_stat("42 (name"), '\0');
  EXPECT_EQ(shm::state_from_stat("42 (name)   "), '\0');
}

TEST(ProcessState, RunningZombieAndReapedProcesses) {
  EXPECT_TRUE(shm::process_alive(::getpid()));
  pid_t reaped;
  {
    Zombie zombie;
    ASSERT_TRUE(zombie.ok());
    reaped = zombie.pid();
    EXPECT_EQ(::kill(zombie.pid(), 0), 0) << "a zombie answers kill(pid, 0)";
    EXPECT_FALSE(shm::process_alive(zombie.pid()));
  }
  EXPECT_FALSE(shm::process_alive(reaped));
}

/// A child that runs until release() (or the object goes away), then is left unreaped
/// until the object goes away.
class Sleeper {
 public:
  Sleeper() {
    ok_ = ::pipe(pipe_) == 0;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(pipe_[1]);
      char byte;
      ssize_t ignored = ::read(pipe_[0], &byte, 1);  // returns at EOF: release()
      (void)ignored;
      ::_exit(0);
    }
    ok_ = ok_ && pid_ > 0;
  }
  ~Sleeper() {
    release();
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    ::close(pipe_[0]);
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  /// Lets the child exit and waits until it has, without reaping it.
  void release() {
    if (pipe_[1] < 0) return;
    ::close(pipe_[1]);
    pipe_[1] = -1;
    siginfo_t info{};
    ::waitid(P_PID, pid_, &info, WEXITED | WNOWAIT);
  }
  bool ok() const { return ok_; }
  pid_t pid() const { return pid_; }

 private:
  int pipe_[2] = {-1, -1};
  pid_t pid_ = -1;
  bool ok_ = false;
};

TEST(ProcessState, WatchSeesRunningZombieReapedAndLaterExits) {
  Sleeper running;
  Zombie zombie;
  ASSERT_TRUE(running.ok() && zombie.ok());
  pid_t reaped;
  {
    Zombie gone;
    reaped = gone.pid();
  }
  shm::ProcessWatch watch({::getpid(), running.pid(), zombie.pid(), reaped});
  EXPECT_TRUE(watch.alive(0));
  EXPECT_TRUE(watch.alive(1));
  EXPECT_FALSE(watch.alive(2)) << "a zombie has exited";
  EXPECT_FALSE(watch.alive(3)) << "a reaped process has exited";
  running.release();
  std::this_thread::sleep_for(5ms);  // past the watch's refresh period
  EXPECT_FALSE(watch.alive(1)) << "an exit after the watch began is seen";
  EXPECT_TRUE(watch.alive(0));
}

TEST(MeshShm, ZombiePeerProcessIsDetected) {
  Zombie zombie;
  ASSERT_TRUE(zombie.ok());
  auto identity = [&](int r) {
    return LocalIdentity{"test-host", r == 1 ? zombie.pid() : ::getpid()};
  };
  Mesh mesh(2, Kind::Shm, identity);
  ASSERT_TRUE(mesh.ok());
  char byte = 0;
  RequestId id = mesh[0].post_recv(1, &byte, 1, recv_stamp(0, 1));
  auto start = Clock::now();
  try {
    wait_one(mesh[0], id, 15s);
    ADD_FAILURE() << "the receive from a zombie completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_EQ(std::string(e.what()), "rank 1 (pid " + std::to_string(zombie.pid()) + ") died");
  }
  EXPECT_LT(Clock::now() - start, 2s);
}

}  // namespace
}  // namespace chorus::transport::testing
