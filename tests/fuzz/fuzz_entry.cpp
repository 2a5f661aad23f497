// The libFuzzer entry point of one harness; CHORUS_FUZZ_HARNESS names it
// (a function of harnesses.hpp), set by tests/fuzz/CMakeLists.txt.
#include "harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  chorus::fuzz::CHORUS_FUZZ_HARNESS(data, size);
  return 0;
}
