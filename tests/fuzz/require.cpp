// The invariant check shared by the harnesses.
#include "harnesses.hpp"

#include <cstdio>
#include <cstdlib>

namespace chorus::fuzz {

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace chorus::fuzz
