// The tuning file of the cost model (cost_model.hpp): text lines "key value # mark",
// times in microseconds and nanoseconds per byte so the numbers read well.
#include "algorithms/cost_model.hpp"
#include "core/log.hpp"

#include <chorus/error.hpp>

#include <fstream>
#include <iomanip>
#include <istream>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>

namespace chorus::algorithms {
namespace {

constexpr double kMicro = 1e-6;
constexpr double kNano = 1e-9;
/// Significant digits written: far more than any measurement has, few enough that a value
/// such as 160e-6 s reads back as "160" rather than "160.00000000000003".
constexpr int kDigits = 15;

struct Key {
  TuningKey key;
  const char* name;
  double CostParameters::*plain;  // gamma
  LinkCost CostParameters::*link;
  double LinkCost::*field;
  double scale;
};

// In TuningKey order.
constexpr Key kKeys[kNumTuningKeys] = {
    {TuningKey::ShmAlpha, "shm.alpha_us", nullptr, &CostParameters::shm, &LinkCost::alpha, kMicro},
    {TuningKey::ShmBeta, "shm.beta_ns_per_byte", nullptr, &CostParameters::shm, &LinkCost::beta,
     kNano},
    {TuningKey::TcpAlpha, "tcp.alpha_us", nullptr, &CostParameters::tcp, &LinkCost::alpha, kMicro},
    {TuningKey::TcpBeta, "tcp.beta_ns_per_byte", nullptr, &CostParameters::tcp, &LinkCost::beta,
     kNano},
    {TuningKey::ArenaAlpha, "arena.alpha_us", nullptr, &CostParameters::arena, &LinkCost::alpha,
     kMicro},
    {TuningKey::ArenaBeta, "arena.beta_ns_per_byte", nullptr, &CostParameters::arena,
     &LinkCost::beta, kNano},
    {TuningKey::Gamma, "gamma_ns_per_byte", &CostParameters::gamma, nullptr, nullptr, kNano},
    {TuningKey::TcpLinks, "tcp.links_per_host", &CostParameters::tcp_links, nullptr, nullptr, 1},
};

double& slot(CostParameters& parameters, const Key& key) {
  return key.plain ? parameters.*key.plain : parameters.*key.link.*key.field;
}

/// The value of `key` in the file's units.
double file_value(const CostParameters& parameters, const Key& key) {
  CostParameters copy = parameters;
  return slot(copy, key) / key.scale;
}

/// The mark a line's comment (the text after '#') gives.
TuningMark mark_of(std::string_view comment) {
  std::istringstream words{std::string(comment)};
  std::string first;
  words >> first;
  if (first == "measured") return TuningMark::Measured;
  if (first == "assumed") return TuningMark::Assumed;
  return TuningMark::Unmarked;
}

/// The comment write_tuning puts after a value.
const char* comment_for(TuningMark mark) {
  switch (mark) {
    case TuningMark::Measured:
      return "measured";
    case TuningMark::Assumed:
      return "assumed (not measured)";
    case TuningMark::Unmarked:
      return "assumed (kept from a file that did not say it was measured)";
    case TuningMark::Default:
      break;
  }
  return "assumed (the built-in default, not measured here)";
}

/// "tuning file F: shm.alpha_us 2.5 (measured), ...; built-in defaults for arena.alpha_us".
std::string describe(const Tuning& tuning, const std::string& path) {
  std::ostringstream set, defaults;
  for (const Key& key : kKeys) {
    const TuningMark mark = tuning.mark(key.key);
    if (mark == TuningMark::Default) {
      defaults << (defaults.tellp() > 0 ? ", " : "") << key.name;
      continue;
    }
    set << (set.tellp() > 0 ? ", " : "") << key.name << ' ' << std::setprecision(6)
        << file_value(tuning.parameters, key) << " (" << to_string(mark) << ')';
  }
  std::string text = "CHORUS_TUNING_FILE " + path + " read: ";
  text += set.tellp() > 0 ? set.str() : "it sets nothing";
  if (defaults.tellp() > 0) text += "; built-in defaults for " + defaults.str();
  return text;
}

/// Logs describe() at INFO the first time `path` is read in this process.
void log_once(const Tuning& tuning, const std::string& path) {
  if (!log_enabled(LogLevel::Info)) return;
  static std::mutex mutex;
  static std::set<std::string> logged;
  {
    std::lock_guard lock(mutex);
    if (!logged.insert(path).second) return;
  }
  log(LogLevel::Info, describe(tuning, path));
}

}  // namespace

std::string_view to_string(TuningKey key) { return kKeys[static_cast<std::size_t>(key)].name; }

std::string_view to_string(TuningMark mark) {
  switch (mark) {
    case TuningMark::Default:
      return "default";
    case TuningMark::Unmarked:
      return "unmarked";
    case TuningMark::Assumed:
      return "assumed";
    case TuningMark::Measured:
      return "measured";
  }
  return "?";
}

void write_tuning(std::ostream& out, const Tuning& tuning) {
  out << "# chorus cost-model tuning (chorus-perf --tune); read via CHORUS_TUNING_FILE\n"
         "# each value is marked: measured (by chorus-perf --tune), or assumed (not measured)\n";
  for (const Key& key : kKeys) {
    out << key.name << ' ' << std::setprecision(kDigits) << file_value(tuning.parameters, key)
        << "  # " << comment_for(tuning.mark(key.key)) << '\n';
  }
}

Tuning read_tuning(std::istream& in, std::string_view source) {
  Tuning tuning;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string where = std::string(source) + ":" + std::to_string(number);
    auto hash = line.find('#');
    std::istringstream fields(line.substr(0, hash));
    std::string name, rest;
    double value = 0;
    if (!(fields >> name)) continue;
    require_argument(static_cast<bool>(fields >> value) && !(fields >> rest) && value >= 0,
                     where + ": expected '" + name + " <non-negative number>'");
    const Key* found = nullptr;
    for (const Key& key : kKeys) found = name == key.name ? &key : found;
    require_argument(found != nullptr, where + ": unknown tuning key '" + name + "'");
    require_argument(found->key != TuningKey::TcpLinks || value >= 1,
                     where + ": " + name + " " + std::to_string(value) + " is below 1");
    slot(tuning.parameters, *found) = value * found->scale;
    tuning.mark(found->key) = hash == std::string::npos
                                  ? TuningMark::Unmarked
                                  : mark_of(std::string_view(line).substr(hash + 1));
  }
  return tuning;
}

CostParameters load_tuning_file(const std::string& path) {
  if (path.empty()) return CostParameters::defaults();
  std::ifstream in(path);
  require_argument(in.good(), "CHORUS_TUNING_FILE '" + path + "' cannot be read");
  Tuning tuning = read_tuning(in, path);
  log_once(tuning, path);
  return tuning.parameters;
}

}  // namespace chorus::algorithms
