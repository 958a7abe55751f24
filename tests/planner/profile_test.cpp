// The profile fit against hand-computed lines, and stage sums against per-block sums.
#include <gtest/gtest.h>

#include "planner/profile.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"

namespace fp = flotilla::planner;

TEST(Profile, LinearFitRecoversAnExactLine) {
  // A 4-block toy model whose block times are exactly 1 ms + 2 ms per sample (fwd), twice that bwd.
  fp::GpuProfile p;
  p.model = "GPT-3-175B";
  p.gpu = "A100-40";
  for (int mbs : {1, 2, 4, 8}) {
    std::vector<fp::LayerTimes> blocks(4, fp::LayerTimes{1e-3 + 2e-3 * mbs, 2e-3 + 4e-3 * mbs, 5e-4});
    p.by_mbs_tp[mbs][2] = blocks;
  }
  fp::ProfileSet set;
  set.add(p);
  fp::ModelSpec m = *fp::find_preset("gpt-3-175b");
  m.num_layers = 2;  // 4 blocks
  const fp::GpuType gpu = *fp::builtin_gpu_catalog().find("A100-40");
  fp::ComputeModel cm(&set);
  const fp::LayerTimes t = cm.block_times(m, gpu, 1, 2, 16);  // extrapolated along the line
  EXPECT_NEAR(t.forward_s, 1e-3 + 32e-3, 1e-12);
  EXPECT_NEAR(t.backward_s, 2e-3 + 64e-3, 1e-12);
  EXPECT_NEAR(t.update_s, 5e-4, 1e-15);
  const fp::LayerTimes s = cm.stage_times(m, gpu, 1, 4, 2, 3);
  EXPECT_NEAR(s.forward_s, 3 * (1e-3 + 6e-3), 1e-12);
  // No profile for TP 4: the FLOP estimate, summed per block, equals the stage estimate.
  const fp::LayerTimes e = cm.stage_times(m, gpu, 0, 4, 4, 2);
  double sum = 0;
  for (int b = 0; b < 4; ++b) sum += cm.block_times(m, gpu, b, 4, 2).forward_s;
  EXPECT_NEAR(e.forward_s, sum, 1e-12);
  EXPECT_FALSE(fp::parse_profile_json(R"({"1": {"1": {"0": [1, -2, 3]}}})", "x", "y").ok());
  EXPECT_FALSE(fp::parse_profile_json("[", "x", "y").ok());
}

// A profile of the wrong shape used to say only "does not parse: stoi"; it names the format.
TEST(ProfileIo, WrongShapeNamesTheExpectedFormat) {
  const auto p = fp::parse_profile_json(R"({"1": 5})", "OPT-350M", "A100-40");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("{mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}"), std::string::npos) << p.error();
}

// gcp_communication_cost.json as a list used to load silently as zones "0" and "1".
TEST(NetworkIo, ZoneCostsMustBeAnObjectOfObjects) {
  EXPECT_FALSE(fp::parse_zone_costs("[1, 2]", fp::default_network_model()));
  EXPECT_FALSE(fp::parse_zone_costs(R"({"us-central1-a": 0.01})", fp::default_network_model()));
  const auto ok = fp::parse_zone_costs(R"({"a": {"b": 0.02}})", fp::default_network_model());
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_DOUBLE_EQ(ok.value().usd_per_gb.at("a").at("b"), 0.02);
}
