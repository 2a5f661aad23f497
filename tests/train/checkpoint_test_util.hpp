// Shared pieces of the checkpoint tests: a fresh directory per test, and the sentence of the
// error a refused call throws.
#pragma once

#include <chorus/error.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace chorus::testing {

/// A fresh directory for one test's files, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("chorus_ckpt_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// The names of the files in the directory, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

/// The sentence of the chorus::Error `action` throws ("" and a failure when it throws none),
/// checking its status and that it is one line.
template <class Action>
std::string error_of(Status status, Action&& action) {
  try {
    action();
  } catch (const chorus::Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no chorus::Error thrown";
  return "";
}

}  // namespace chorus::testing
