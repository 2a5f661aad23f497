// The tuning file of the cost model (cost_model.hpp): text lines "key value",
// times in microseconds and nanoseconds per byte so the numbers read well.
#include "algorithms/cost_model.hpp"

#include <chorus/error.hpp>

#include <fstream>
#include <iomanip>
#include <istream>
#include <ostream>
#include <sstream>

namespace chorus::algorithms {
namespace {

constexpr double kMicro = 1e-6;
constexpr double kNano = 1e-9;

struct Key {
  const char* name;
  double CostParameters::*plain;  // gamma
  LinkCost CostParameters::*link;
  double LinkCost::*field;
  double scale;
};

constexpr Key kKeys[] = {
    {"shm.alpha_us", nullptr, &CostParameters::shm, &LinkCost::alpha, kMicro},
    {"shm.beta_ns_per_byte", nullptr, &CostParameters::shm, &LinkCost::beta, kNano},
    {"tcp.alpha_us", nullptr, &CostParameters::tcp, &LinkCost::alpha, kMicro},
    {"tcp.beta_ns_per_byte", nullptr, &CostParameters::tcp, &LinkCost::beta, kNano},
    {"arena.alpha_us", nullptr, &CostParameters::arena, &LinkCost::alpha, kMicro},
    {"arena.beta_ns_per_byte", nullptr, &CostParameters::arena, &LinkCost::beta, kNano},
    {"gamma_ns_per_byte", &CostParameters::gamma, nullptr, nullptr, kNano},
};

double& slot(CostParameters& parameters, const Key& key) {
  return key.plain ? parameters.*key.plain : parameters.*key.link.*key.field;
}

}  // namespace

void write_tuning(std::ostream& out, const CostParameters& parameters) {
  out << "# chorus cost-model tuning (chorus-perf --tune); read via CHORUS_TUNING_FILE\n";
  CostParameters copy = parameters;
  for (const Key& key : kKeys) {
    out << key.name << ' ' << std::setprecision(17) << slot(copy, key) / key.scale << '\n';
  }
}

CostParameters read_tuning(std::istream& in, std::string_view source) {
  CostParameters parameters = CostParameters::defaults();
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
    slot(parameters, *found) = value * found->scale;
  }
  return parameters;
}

CostParameters load_tuning_file(const std::string& path) {
  if (path.empty()) return CostParameters::defaults();
  std::ifstream in(path);
  require_argument(in.good(), "CHORUS_TUNING_FILE '" + path + "' cannot be read");
  return read_tuning(in, path);
}

}  // namespace chorus::algorithms
