// The catalog's efficiency factors are reproducible from Sailor's profiles (fitted once per
// GPU type over all profiles); prints the fit and its error against every profile entry.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/data_path.h"
#include "planner/calibration.h"
#include "planner/profile_io.h"

namespace fp = flotilla::planner;

TEST(Calibration, CatalogEfficiencyMatchesProfiles) {
  auto dir = flotilla::data_path("sailor/profiles");
  if (!dir) GTEST_SKIP() << flotilla::data_missing_message("sailor/profiles");
  auto profiles = fp::load_profile_dir(dir->string());
  ASSERT_TRUE(profiles.ok()) << profiles.error();
  const auto catalog = fp::builtin_gpu_catalog();
  const auto fits = fp::fit_compute_efficiency(*profiles, catalog);
  ASSERT_GE(fits.size(), 5u);
  std::printf("%-10s %10s %8s %10s %10s %12s\n", "gpu", "efficiency", "entries", "mean err", "max err", "mean err>=8");
  for (const auto& f : fits) {
    std::printf("%-10s %10.3f %8d %9.1f%% %9.1f%% %11.1f%%\n", f.gpu.c_str(), f.efficiency, f.entries,
                100 * f.mean_rel_error, 100 * f.max_rel_error, 100 * f.mean_rel_error_mbs8);
    EXPECT_GT(f.efficiency, 0.01);
    EXPECT_LT(f.efficiency, 1.0);
    EXPECT_NEAR(catalog.find(f.gpu)->compute_efficiency / f.efficiency, 1.0, 0.05)
        << f.gpu << ": the catalog's efficiency no longer matches the fit over the profiles";
  }
}
