#include "common/data_path.h"

#include <gtest/gtest.h>

#include <cstdlib>

TEST(DataPath, EnvironmentOverridesDefault) {
  ::setenv("FLOTILLA_DATA", "/definitely/not/here", 1);
  EXPECT_FALSE(flotilla::data_dir().has_value());
  EXPECT_NE(flotilla::data_missing_message("sailor").find("/definitely/not/here/sailor"),
            std::string::npos);
  // The fix names the data folder itself (it holds sailor/), not a folder above it.
  EXPECT_NE(flotilla::data_missing_message("sailor").find("FLOTILLA_DATA to the shared/data folder itself"),
            std::string::npos);
  ::setenv("FLOTILLA_DATA", FLOTILLA_SOURCE_DIR, 1);
  auto dir = flotilla::data_dir();
  ASSERT_TRUE(dir.has_value());
  EXPECT_TRUE(flotilla::data_path("CMakeLists.txt").has_value());
  EXPECT_FALSE(flotilla::data_path("no-such-file").has_value());
  ::unsetenv("FLOTILLA_DATA");
}
