// Minimal logging to stderr: "chorus[rank] LEVEL message". The level comes from CHORUS_DEBUG.
#pragma once

#include "core/env.hpp"

#include <string_view>

namespace chorus {

void set_log_level(LogLevel level) noexcept;
bool log_enabled(LogLevel level) noexcept;
/// Sets the rank shown in this thread's log lines (-1: none).
void set_log_rank(int rank) noexcept;
void log(LogLevel level, std::string_view message);

}  // namespace chorus
