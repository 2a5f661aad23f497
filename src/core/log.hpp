// Minimal logging to stderr: "chorus[rank] LEVEL message". The level comes from CHORUS_DEBUG.
#pragma once

#include "core/env.hpp"

#include <atomic>
#include <string_view>

namespace chorus {

namespace detail {
/// The level, or -1 until CHORUS_DEBUG was read (log_level_from_env, once).
inline constinit std::atomic<int> log_level{-1};
int log_level_from_env() noexcept;
}  // namespace detail

void set_log_level(LogLevel level) noexcept;
/// Inline: every collective asks (one relaxed load once the level is known).
inline bool log_enabled(LogLevel level) noexcept {
  int current = detail::log_level.load(std::memory_order_relaxed);
  if (current < 0) current = detail::log_level_from_env();
  return static_cast<int>(level) <= current;
}
/// Sets the rank shown in this thread's log lines (-1: none).
void set_log_rank(int rank) noexcept;
void log(LogLevel level, std::string_view message);

}  // namespace chorus
