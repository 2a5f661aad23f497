// CHORUS_* parsing: CHORUS_TIMEOUT's stated range and the one parser of boolean variables.
#include "core/env.hpp"
#include "scoped_env.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace chorus {
namespace {

using testing::ScopedEnv;

using namespace std::chrono_literals;

/// The sentence read_config throws with `name`=`value`; "" when it accepts it.
std::string config_error(const char* name, const char* value) {
  ScopedEnv env(name, value);
  try {
    read_config();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(Env, TimeoutStatesItsRange) {
  for (const char* bad :
       {"1e9", "10000001", "0", "-1", "0.0001", "abc", "5s", " 5", "0x10", "inf", "nan"}) {
    EXPECT_EQ(config_error("CHORUS_TIMEOUT", bad),
              "CHORUS_TIMEOUT must be a number of seconds from 0.001 to 10000000, got '" +
                  std::string(bad) + "'");
  }
  ScopedEnv most("CHORUS_TIMEOUT", "1e7");
  EXPECT_EQ(read_config().timeout, std::chrono::milliseconds(10'000'000'000));
  ScopedEnv least("CHORUS_TIMEOUT", "0.001");
  EXPECT_EQ(read_config().timeout, 1ms);
}

TEST(Env, FlagsAcceptZeroAndOneOnly) {
  EXPECT_TRUE(env_flag("CHORUS_TEST_FLAG", true));  // unset: the fallback
  {
    ScopedEnv on("CHORUS_TEST_FLAG", "1");
    EXPECT_TRUE(env_flag("CHORUS_TEST_FLAG", false));
  }
  {
    ScopedEnv off("CHORUS_TEST_FLAG", "0");
    EXPECT_FALSE(env_flag("CHORUS_TEST_FLAG", true));
  }
  for (const char* bad : {"abc", "true", "2", " 1", "01"}) {
    ScopedEnv env("CHORUS_TEST_FLAG", bad);
    try {
      env_flag("CHORUS_TEST_FLAG", false);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_EQ(std::string(e.what()),
                "CHORUS_TEST_FLAG must be 0 or 1, got '" + std::string(bad) + "'");
    }
  }
  EXPECT_EQ(config_error("CHORUS_CMA", "abc"), "CHORUS_CMA must be 0 or 1, got 'abc'");
}

}  // namespace
}  // namespace chorus
