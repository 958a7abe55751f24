#include <gtest/gtest.h>

#include "planner/gpu_catalog.h"

namespace fp = flotilla::planner;

TEST(GpuCatalog, BuiltinsAndAliases) {
  const auto c = fp::builtin_gpu_catalog();
  for (const char* n : {"A100-40", "A100-80", "H100-80", "H200", "GH200-96", "V100-16", "V100-32", "L4", "A10G", "T4",
                        "RTX-2080", "RTX-3090", "RTX-4090", "Titan-RTX"}) {
    const fp::GpuType* g = c.find(n);
    ASSERT_NE(g, nullptr) << n;
    EXPECT_GT(g->memory_bytes, 0);
    EXPECT_GT(g->peak_bf16_tflops, 0);
    EXPECT_GT(g->usd_per_hour, 0);
  }
  EXPECT_EQ(c.find("gh-96")->name, "GH200-96");
  // Sailor's prices (data README).
  EXPECT_DOUBLE_EQ(c.find("A100-40")->usd_per_hour, 3.673);
  EXPECT_DOUBLE_EQ(c.find("V100-16")->usd_per_hour, 2.86);
  EXPECT_DOUBLE_EQ(c.find("GH-96")->usd_per_hour, 11.06);
  EXPECT_EQ(c.find("GH-96")->memory_bytes, 102625181696LL);  // Sailor's basic_cluster_config
}

TEST(GpuCatalog, OverrideReplacesAndAdds) {
  auto r = fp::apply_catalog_override(fp::builtin_gpu_catalog(),
                                      "A100-40: {usd_per_hour: 1.5}\nMI300X: {memory_bytes: 206158430208, "
                                      "peak_bf16_tflops: 1307, gpus_per_node: 8, usd_per_hour: 4}\n");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_DOUBLE_EQ(r->find("a100-40")->usd_per_hour, 1.5);
  EXPECT_EQ(r->find("A100-40")->memory_bytes, 42338615296LL);  // untouched fields kept
  ASSERT_NE(r->find("MI300X"), nullptr);
  EXPECT_FALSE(fp::apply_catalog_override(fp::builtin_gpu_catalog(), "A100-40: {usd_per_hour: -1}").ok());
  EXPECT_FALSE(fp::apply_catalog_override(fp::builtin_gpu_catalog(), "A100-40: {colour: 3}").ok());
  EXPECT_FALSE(fp::apply_catalog_override(fp::builtin_gpu_catalog(), "X1: {usd_per_hour: 1}").ok());
}
