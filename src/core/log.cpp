// Logging to stderr, one write per line so lines of different threads do not interleave.
#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace chorus {
namespace {

LogLevel initial_level() noexcept {
  const char* value = std::getenv("CHORUS_DEBUG");
  if (!value) return LogLevel::Warn;
  const std::string_view text(value);
  if (text == "ERROR" || text == "error") return LogLevel::Error;
  if (text == "INFO" || text == "info") return LogLevel::Info;
  if (text == "TRACE" || text == "trace") return LogLevel::Trace;
  return LogLevel::Warn;
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

namespace detail {

/// Reads CHORUS_DEBUG unless set_log_level (or another thread) already set the level.
int log_level_from_env() noexcept {
  int expected = -1;
  const int from_env = static_cast<int>(initial_level());
  log_level.compare_exchange_strong(expected, from_env, std::memory_order_relaxed);
  return log_level.load(std::memory_order_relaxed);
}

}  // namespace detail

void set_log_level(LogLevel l) noexcept { detail::log_level.store(static_cast<int>(l)); }

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
