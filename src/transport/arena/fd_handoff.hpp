// Handing a file descriptor to other processes of the same user on this host: a server
// thread listens on an abstract Unix socket (no file, gone with the process) under a random
// name and sends the descriptor (SCM_RIGHTS) to every client whose uid is its own, until it
// is stopped. Works between processes that may not trace each other (non-dumpable ones too).
#pragma once

#include "core/deadline.hpp"

#include <memory>
#include <string>
#include <thread>

namespace chorus::transport {

class FdServer {
 public:
  /// Starts serving `fd` (not owned; it must stay open until stop()) under a fresh name.
  explicit FdServer(int fd);
  ~FdServer() { stop(); }
  FdServer(const FdServer&) = delete;
  FdServer& operator=(const FdServer&) = delete;

  /// The name clients pass to receive_fd().
  const std::string& name() const { return name_; }
  /// Stops serving: connects after this fail. Idempotent.
  void stop() noexcept;

 private:
  void serve() noexcept;

  int fd_;
  int listener_ = -1;
  int wake_ = -1;  ///< an eventfd that stop() signals
  std::string name_;
  std::thread thread_;
};

/// Connects to the FdServer called `name` and returns the descriptor it sends (close it).
/// Throws SystemError when there is no such server (it stopped, or its process is gone) or
/// when it does not answer by `deadline`, and InternalError when it runs under another uid.
int receive_fd(const std::string& name, Deadline deadline);

}  // namespace chorus::transport
