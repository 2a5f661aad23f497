// Process liveness; see process_state.hpp.
#include "transport/shm/process_state.hpp"

#include <fcntl.h>
#include <signal.h>
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
