// Logging to stderr, one write per line so lines of different threads do not interleave.
#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace chorus {
namespace {

LogLevel initial_level() {
  const char* value = std::getenv("CHORUS_DEBUG");
  if (!value) return LogLevel::Warn;
  std::string text(value);
  if (text == "ERROR" || text == "error") return LogLevel::Error;
  if (text == "INFO" || text == "info") return LogLevel::Info;
  if (text == "TRACE" || text == "trace") return LogLevel::Trace;
  return LogLevel::Warn;
}

std::atomic<int>& level() {
  static std::atomic<int> value{static_cast<int>(initial_level())};
  return value;
}

thread_local int t_rank = -1;

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Error:
      return "ERROR";
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Trace:
      return "TRACE";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel l) noexcept { level().store(static_cast<int>(l)); }

bool log_enabled(LogLevel l) noexcept {
  return static_cast<int>(l) <= level().load(std::memory_order_relaxed);
}

void set_log_rank(int rank) noexcept { t_rank = rank; }

void log(LogLevel l, std::string_view message) {
  if (!log_enabled(l)) return;
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict overlap for
  // `"literal" + std::string&&` (its inlined insert at offset 0).
  std::string line = "chorus";
  if (t_rank >= 0) line.append("[").append(std::to_string(t_rank)).append("]");
  line.append(" ").append(level_name(l)).append(" ").append(message).append("\n");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace chorus
