// Machine profiles, tuning files and compute profiles (machine.hpp).
#include "plan/machine.hpp"

#include "plan/compute_profile.hpp"

#include <chorus/error.hpp>

#include <fstream>
#include <sstream>

namespace chorus::plan {
namespace {

std::ifstream open(const std::string& path, const char* what) {
  std::ifstream in(path);
  require_argument(in.good(), std::string(what) + " '" + path + "' cannot be read");
  return in;
}

double rate(const CostLine& line) { return line.per_unit > 0 ? 1 / line.per_unit : 0; }

}  // namespace

double Machine::forward_flops_per_second() const {
  return measured ? rate(measured->block_forward) : peak_flops * efficiency;
}

bool Machine::times_compute() const {
  if (measured) return measured->block_forward.measured() && measured->block_backward.measured();
  return peak_flops * efficiency > 0;
}

double Machine::backward_flops_per_second() const {
  return measured ? rate(measured->block_backward) : peak_flops * efficiency;
}

double Machine::memory_seconds(double bytes) const {
  if (memory_bandwidth <= 0 || measured) return 0;
  return bytes / memory_bandwidth;
}

Machine read_machine_profile(std::istream& in, std::string_view source) {
  Machine machine;
  std::ostringstream tuning_lines;  // planner lines blanked, so line numbers stay right
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = std::string(source) + ":" + std::to_string(number);
    std::istringstream fields(line.substr(0, line.find('#')));
    std::string key, value, rest;
    if (!(fields >> key) || key.find('.') != std::string::npos || key == "gamma_ns_per_byte") {
      tuning_lines << line << '\n';
      continue;
    }
    tuning_lines << '\n';
    require_argument(static_cast<bool>(fields >> value) && !(fields >> rest),
                     where + ": expected '" + key + " <value>'");
    if (key == "name") {
      machine.name = value;
    } else if (key == "precision") {
      require_argument(value == "fp32" || value == "bf16",
                       where + ": precision '" + value + "' is not fp32 or bf16");
      machine.precision = value == "bf16" ? Precision::bf16() : Precision::fp32();
    } else if (key == "peak_tflops") {
      machine.peak_flops = positive_number(where, key, value) * 1e12;
    } else if (key == "efficiency") {
      machine.efficiency = positive_number(where, key, value);
      require_argument(machine.efficiency <= 1, where + ": efficiency " + value + " is above 1");
    } else if (key == "memory_gb_per_s") {
      machine.memory_bandwidth = positive_number(where, key, value) * 1e9;
    } else if (key == "memory_gib") {
      machine.memory_bytes = positive_number(where, key, value) * 1024.0 * 1024 * 1024;
    } else {
      throw Error(Status::InvalidArgument, where + ": unknown machine profile key '" + key + "'");
    }
  }
  std::istringstream tuning(tuning_lines.str());
  machine.links = algorithms::read_tuning(tuning, source).parameters;
  return machine;
}

Machine load_machine_profile(const std::string& path) {
  std::ifstream in = open(path, "machine profile");
  return read_machine_profile(in, path);
}

void load_tuning(Machine& machine, const std::string& path) {
  std::ifstream in = open(path, "tuning file");
  machine.links = algorithms::read_tuning(in, path).parameters;
}

void read_compute_profile(Machine& machine, std::istream& in, std::string_view source) {
  machine.measured = fit_compute_model(parse_compute_profile(in, source), source);
}

void load_compute_profile(Machine& machine, const std::string& path) {
  std::ifstream in = open(path, "compute profile");
  read_compute_profile(machine, in, path);
}

}  // namespace chorus::plan
