// Command line of chorus-plan (docs/planner.md).
#pragma once

#include "plan/planner.hpp"

#include <cstddef>
#include <string>

namespace chorus::plan_tool {

struct Options {
  plan::PlanRequest request;
  std::size_t top = 0;  ///< layouts printed; 0: all (the default prints all up to kDefaultTop)
  bool top_given = false;
  bool json = false;
  bool explain = false;
  bool help = false;
};

/// Layouts printed without --top when there are more.
inline constexpr std::size_t kDefaultTop = 20;

/// Parses argv[1..argc) and reads the files it names; throws chorus::Error(InvalidArgument)
/// naming the option and its value.
Options parse_options(int argc, const char* const argv[]);

std::string usage_text();

}  // namespace chorus::plan_tool
