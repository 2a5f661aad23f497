// Process liveness; see process_state.hpp.
#include "transport/shm/process_state.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace chorus::transport::shm {

char state_from_stat(std::string_view stat) {
  std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return '\0';
  std::size_t state = stat.find_first_not_of(' ', close + 1);
  return state == std::string_view::npos ? '\0' : stat[state];
}

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) == -1 && errno == ESRCH) return false;
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;  // ENOENT: it went away since kill()
  // pid, then "(comm)" of at most 16 bytes plus ')' characters inside it, then the state:
  // the first 256 bytes hold the state unless the name is pathological.
  char buffer[256];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return true;
  char state = state_from_stat(std::string_view(buffer, static_cast<std::size_t>(n)));
  return state != 'Z' && state != 'X';
}

}  // namespace chorus::transport::shm

namespace chorus::transport::shm {
namespace {

/// A pidfd for `pid`, or -1 (the caller then asks process_alive()); -2 when there is no
/// such process any more.
int open_pidfd(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) return fd;
  return errno == ESRCH ? -2 : -1;
}

}  // namespace

ProcessWatch::ProcessWatch(std::vector<pid_t> pids)
    : pids_(std::move(pids)), pidfds_(pids_.size(), -1), exited_(pids_.size(), 0) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  for (std::size_t i = 0; i < pids_.size() && epoll_ >= 0; ++i) {
    int fd = open_pidfd(pids_[i]);
    if (fd == -2) exited_[i] = 1;
    if (fd < 0) continue;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = i;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      ::close(fd);
      continue;
    }
    pidfds_[i] = fd;
  }
}

ProcessWatch::~ProcessWatch() {
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
  if (epoll_ >= 0) ::close(epoll_);
}

bool ProcessWatch::alive(std::size_t index) {
  if (exited_[index]) return false;
  if (pidfds_[index] < 0) {
    exited_[index] = process_alive(pids_[index]) ? 0 : 1;
    return !exited_[index];
  }
  const auto now = Clock::now();
  if (now - refreshed_ >= kRefresh) {
    refreshed_ = now;
    refresh();
  }
  return !exited_[index];
}

/// Marks every process whose pidfd is readable (level-triggered: it stays readable).
void ProcessWatch::refresh() {
  epoll_event events[64];
  for (;;) {
    int n = ::epoll_wait(epoll_, events, 64, 0);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; ++i) {
      const std::size_t index = events[i].data.u64;
      if (exited_[index]) continue;
      exited_[index] = 1;
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, pidfds_[index], nullptr);
    }
    if (n < 64) return;
  }
}

}  // namespace chorus::transport::shm
