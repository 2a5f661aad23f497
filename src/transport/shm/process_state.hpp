// Is a peer process still running? kill(pid, 0) alone is not enough: a process
// that exited but was not yet reaped by its parent (a zombie) still answers it.
#pragma once

#include "core/deadline.hpp"

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace chorus::transport::shm {

/// The state letter of a /proc/<pid>/stat line ("R", "S", "Z", ...): the first
/// non-space after the LAST ')', because the command name in parentheses may
/// itself contain ')' and spaces. '\0' when the line has no such letter.
char state_from_stat(std::string_view stat);

/// False when `pid` is gone: no such process, or one in state 'Z' (zombie) or
/// 'X' (dead) per /proc/<pid>/stat. When /proc cannot be read (not mounted,
/// no permission) only kill(pid, 0) decides.
bool process_alive(pid_t pid);

/// Watches a host's peer processes at a cost that does not grow with their number: one
/// pidfd per process in one epoll set, so that a pass over every peer costs one epoll_wait
/// (a pidfd turns readable when its process exits, zombie or reaped), where reading each
/// peer's /proc/<pid>/stat cost three system calls per peer. A process whose pidfd cannot
/// be opened (a kernel before 5.3, no descriptors left) is asked with process_alive().
/// Not thread-safe: the links of one transport use it under the transport's lock.
class ProcessWatch {
 public:
  explicit ProcessWatch(std::vector<pid_t> pids);
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  /// False once process `index` (of the constructor's list) has exited. The epoll set is
  /// read at most once per kRefresh, so a pass over every peer reads it once.
  bool alive(std::size_t index);

 private:
  static constexpr auto kRefresh = std::chrono::milliseconds(1);
  void refresh();

  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;  ///< -1: not watched, process_alive() decides
  std::vector<char> exited_;
  int epoll_ = -1;
  Clock::time_point refreshed_{};
};

}  // namespace chorus::transport::shm
