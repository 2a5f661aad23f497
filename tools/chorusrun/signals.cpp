// Self-pipe signal handling (see signals.hpp).
#include "signals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chorus/error.hpp>
#include <csignal>
#include <cstring>
#include <string>

namespace chorus::run {
namespace {

constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

// Written only by the constructor/destructor; read by the handler.
volatile sig_atomic_t g_write_fd = -1;

extern "C" void on_signal(int signal_number) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signal_number);
  // A full pipe drops the byte: the loop polls children anyway, and a pending
  // byte of the same signal is already there to wake it.
  [[maybe_unused]] ssize_t ignored = write(g_write_fd, &byte, 1);
  errno = saved_errno;
}

void install(int signal_number, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | (signal_number == SIGCHLD ? SA_NOCLDSTOP : 0);
  if (sigaction(signal_number, &action, nullptr) != 0) {
    throw Error(Status::SystemError, std::string("sigaction failed: ") + std::strerror(errno));
  }
}

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(Status::SystemError, std::string("pipe2 failed: ") + std::strerror(errno));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_write_fd = write_fd_;
  for (int signal_number : kHandledSignals) install(signal_number, on_signal);
  install(SIGPIPE, SIG_IGN);
}

SignalPipe::~SignalPipe() {
  for (int signal_number : kHandledSignals) {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigaction(signal_number, &action, nullptr);
  }
  g_write_fd = -1;
  close(read_fd_);
  close(write_fd_);
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> signals;
  unsigned char buffer[64];
  for (;;) {
    ssize_t n = read(read_fd_, buffer, sizeof buffer);
    if (n > 0) {
      signals.insert(signals.end(), buffer, buffer + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return signals;  // EAGAIN: empty
  }
}

bool is_forwarded_signal(int signal_number) {
  return signal_number == SIGINT || signal_number == SIGTERM || signal_number == SIGHUP;
}

std::string signal_name(int signal_number) {
  const char* abbreviation = sigabbrev_np(signal_number);
  return abbreviation ? std::string("SIG") + abbreviation
                      : "signal " + std::to_string(signal_number);
}

}  // namespace chorus::run
