// Shared-memory peers have no socket to close, so their death is seen by the
// pid check: a pid that is gone, and a zombie (exited, not yet reaped by its
// parent), which still answers kill(pid, 0).
#include "mesh_harness.hpp"
#include "transport/shm/process_state.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

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
