// CHORUS_* environment knobs.
#include "core/env.hpp"

#include <chorus/error.hpp>

#include <cstdlib>
#include <string>

namespace chorus {
namespace {

std::chrono::milliseconds parse_timeout(const std::string& text) {
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0) || seconds > 1e7) {
    throw Error(Status::InvalidArgument,
                "CHORUS_TIMEOUT must be a positive number of seconds, got '" + text + "'");
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

bool parse_cma(const std::string& text) {
  if (text == "0" || text == "1") return text == "1";
  throw Error(Status::InvalidArgument, "CHORUS_CMA must be 0 or 1, got '" + text + "'");
}

}  // namespace

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
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
  config.cma = parse_cma(env_or("CHORUS_CMA", "1"));
  return config;
}

}  // namespace chorus
