// An environment variable set for a test's scope.
#pragma once

#include <cstdlib>

namespace chorus::testing {

/// Sets `name` to `value` while it lives, then unsets it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace chorus::testing
