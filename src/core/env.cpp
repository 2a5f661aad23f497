// CHORUS_* environment knobs.
#include "core/env.hpp"

#include <chorus/error.hpp>

#include <charconv>
#include <cstdlib>
#include <string>

namespace chorus {
namespace {

/// CHORUS_TIMEOUT's range, in seconds: a millisecond (the clock a deadline is kept in)
/// to kMaxTimeoutSeconds (about 115 days; far from the clock's overflow).
constexpr double kMinTimeoutSeconds = 0.001;
constexpr double kMaxTimeoutSeconds = 1e7;

std::chrono::milliseconds parse_timeout(const std::string& text) {
  double seconds = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, seconds);
  if (ec != std::errc() || end != last || !(seconds >= kMinTimeoutSeconds) ||
      seconds > kMaxTimeoutSeconds) {
    throw Error(
        Status::InvalidArgument,
        "CHORUS_TIMEOUT must be a number of seconds from 0.001 to 10000000, got '" + text + "'");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0 + 0.5));
}

LogLevel parse_level(const std::string& text) {
  if (text == "ERROR" || text == "error") return LogLevel::Error;
  if (text == "WARN" || text == "warn") return LogLevel::Warn;
  if (text == "INFO" || text == "info") return LogLevel::Info;
  if (text == "TRACE" || text == "trace") return LogLevel::Trace;
  throw Error(Status::InvalidArgument,
              "CHORUS_DEBUG must be ERROR, WARN, INFO or TRACE, got '" + text + "'");
}

}  // namespace

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

bool env_flag(const char* name, bool fallback) {
  const std::string text = env_or(name, "");
  if (text.empty()) return fallback;
  if (text != "0" && text != "1") {
    throw Error(Status::InvalidArgument, std::string(name) + " must be 0 or 1, got '" + text + "'");
  }
  return text == "1";
}

Config read_config() {
  Config config;
  std::string timeout = env_or("CHORUS_TIMEOUT", "");
  if (!timeout.empty()) config.timeout = parse_timeout(timeout);
  config.transport = env_or("CHORUS_TRANSPORT", "auto");
  config.algo = env_or("CHORUS_ALGO", "");
  std::string level = env_or("CHORUS_DEBUG", "");
  if (!level.empty()) config.log_level = parse_level(level);
  config.auth_token = env_or("CHORUS_AUTH_TOKEN", "");
  config.socket_ifname = env_or("CHORUS_SOCKET_IFNAME", "");
  config.tuning_file = env_or("CHORUS_TUNING_FILE", "");
  config.cma = env_flag("CHORUS_CMA", true);
  return config;
}

}  // namespace chorus
