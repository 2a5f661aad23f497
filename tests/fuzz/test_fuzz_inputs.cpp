// Replays the committed fuzz inputs (seed corpus and the crashes found so far,
// tests/fuzz/{corpus,regressions}/<harness>/) through the harnesses in the normal
// build, so a fixed crash stays fixed. A harness aborts on a finding, so a
// failure here is a crash of this binary that names the file in its output.
#include "harnesses.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Harness = void (*)(const std::uint8_t*, std::size_t);

/// Feeds every file under corpus/<name> and regressions/<name>; returns how many.
int replay(const std::string& name, Harness harness) {
  int files = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    fs::path folder = fs::path(CHORUS_FUZZ_INPUTS) / kind / name;
    if (!fs::is_directory(folder)) continue;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (!entry.is_regular_file() || entry.path().filename().string().front() == '.') continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      std::cerr << "replaying " << entry.path() << " (" << bytes.size() << " bytes)\n";
      harness(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++files;
    }
  }
  return files;
}

TEST(FuzzInputs, StoreRequest) {
  EXPECT_GT(replay("store_request", chorus::fuzz::store_request), 0);
}
TEST(FuzzInputs, Handshake) { EXPECT_GT(replay("handshake", chorus::fuzz::handshake), 0); }
TEST(FuzzInputs, Frames) { EXPECT_GT(replay("frames", chorus::fuzz::frames), 0); }

}  // namespace
