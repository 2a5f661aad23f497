// chorus-plan: the layouts of a GPT over a world, best first (docs/planner.md).
#include "options.hpp"

#include <chorus/error.hpp>

#include <cstdio>
#include <iostream>

int main(int argc, char** argv) {
  using namespace chorus;
  try {
    const plan_tool::Options options = plan_tool::parse_options(argc, argv);
    if (options.help) {
      std::cout << plan_tool::usage_text();
      return 0;
    }
    const plan::PlanResult result = plan::plan(options.request);
    if (!result.warning.empty()) std::cerr << "chorus-plan: warning: " << result.warning << "\n";
    const std::size_t limit = options.top_given ? options.top
                              : result.feasible.size() > plan_tool::kDefaultTop
                                  ? plan_tool::kDefaultTop
                                  : 0;
    if (options.json) {
      std::cout << plan::to_json(options.request, result, limit);
    } else {
      std::cout << plan::to_text(options.request, result, limit);
      if (options.explain && result.feasible.size() >= 2) {
        std::cout << "\n" << plan::explain(result.feasible[0], result.feasible[1]) << "\n";
      } else if (options.explain && result.feasible.size() == 1) {
        std::cout << "\nonly one layout is feasible: nothing to compare it with\n";
      }
    }
    if (result.feasible.empty()) {
      std::cerr << "chorus-plan: " << result.infeasible << "\n";
      return 1;
    }
    return 0;
  } catch (const Error& error) {
    std::cerr << "chorus-plan: " << error.what() << "\n";
    return 2;
  }
}
