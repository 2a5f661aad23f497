// The launcher's signal handling: handlers only write the signal number to a
// self-pipe, so the event loop learns about SIGCHLD, SIGINT, SIGTERM and SIGHUP
// by polling one file descriptor (no work in signal context).
#pragma once

#include <string>
#include <vector>

namespace chorus::run {

class SignalPipe {
 public:
  /// Installs the handlers and ignores SIGPIPE (a closed stdout must not kill
  /// the launcher while it relays output). Only one may exist at a time.
  SignalPipe();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// Readable when a signal arrived.
  int fd() const { return read_fd_; }
  /// Signals received since the last call, in arrival order (never blocks).
  std::vector<int> drain();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

/// Signals the launcher forwards to its ranks.
bool is_forwarded_signal(int signal_number);

/// "SIGTERM" for SIGTERM ("signal 99" for a number without a name).
std::string signal_name(int signal_number);

}  // namespace chorus::run
