// Runtime overheads (CUDA context, NCCL buffers, cuBLAS workspace) and the fit of the memory
// constants, hand-computed: NCCL's default buffer sizes (NCCL_BUFFSIZE 4 MiB, LL 512 KiB, LL128
// 4,915,200 B) and PyTorch's cuBLAS workspace (:4096:2:16:8 = 8.125 MiB, 32 MiB on Hopper).
#include <gtest/gtest.h>

#include <cmath>

#include "planner/calibration.h"
#include "planner/gpu_catalog.h"
#include "planner/runtime_overhead.h"

namespace fp = flotilla::planner;

TEST(RuntimeOverhead, NcclBuffersAndWorkspaceHandCounted) {
  const fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  // GH200 (NVLink: 16 channels, LL128 on), TP 4 inside a 4-GPU node, DP 8 across nodes, a
  // middle stage (two pipeline neighbours).
  const fp::GpuType& gh = *catalog.find("GH200-96");
  const fp::RankCommunicators mid = fp::stage_communicators(5, 12, 26, 4, 8, 4);
  EXPECT_FALSE(mid.tp_spans_nodes);
  EXPECT_TRUE(mid.dp_spans_nodes);
  EXPECT_EQ(mid.pipeline_neighbours, 2);
  const fp::RuntimeOverhead o = fp::runtime_overhead(gh, mid);
  const std::int64_t per_connection = 4194304 + 524288 + 4915200;  // 9,633,792 B
  const std::int64_t tp_group = 16 * 2 * per_connection;           // 308,281,344 B
  const std::int64_t dp_group = 2 * 2 * per_connection;            // across nodes: 2 channels
  const std::int64_t p2p = 2 /*neighbours*/ * 2 /*send, recv*/ * 2 /*channels*/ * 4194304;
  EXPECT_EQ(o.nccl_bytes, tp_group + dp_group + p2p);
  EXPECT_EQ(o.nccl_bytes, 380370944);
  EXPECT_EQ(o.cublas_workspace_bytes, 32LL << 20);
  EXPECT_EQ(o.cuda_context_bytes, gh.cuda_context_bytes);
  EXPECT_EQ(o.total_bytes(), gh.cuda_context_bytes + 380370944 + 33554432);

  // RTX-3090 (PCIe: 2 channels, no LL128), TP 8 filling an 8-GPU node, DP 4 across nodes, one
  // stage (no neighbours).
  const fp::GpuType& rtx = *catalog.find("RTX-3090");
  const fp::RuntimeOverhead c = fp::runtime_overhead(rtx, fp::stage_communicators(0, 26, 26, 8, 4, 8));
  EXPECT_EQ(c.nccl_bytes, 2 * (2 * 2 * (4194304 + 524288)));     // 37,748,736 B
  EXPECT_EQ(c.cublas_workspace_bytes, 2 * 4194304 + 8 * 16384);  // 8,519,680 B

  // One GPU, no parallelism: no communicator at all.
  EXPECT_EQ(fp::runtime_overhead(rtx, fp::stage_communicators(0, 26, 26, 1, 1, 8)).nccl_bytes, 0);
  // DP 2 at TP 2 stays inside an 8-GPU node: the node's channel count.
  const fp::RankCommunicators in_node = fp::stage_communicators(0, 26, 26, 2, 2, 8);
  EXPECT_FALSE(in_node.dp_spans_nodes);
  EXPECT_EQ(fp::runtime_overhead(gh, in_node).nccl_bytes, 2 * tp_group);

  // An emulated type (the reference worker on the CPU) has no NCCL and no cuBLAS.
  fp::GpuType emulated = rtx;
  emulated.emulated = true;
  emulated.cuda_context_bytes = 0;
  EXPECT_EQ(fp::runtime_overhead(emulated, mid).total_bytes(), 0);
}

TEST(RuntimeOverhead, CatalogOverrideSetsTheTerms) {
  auto c = fp::apply_catalog_override(fp::builtin_gpu_catalog(),
                                      "RTX-3090: {cuda_context_bytes: 1e9, nccl_channels: 4, nccl_ll128: true, "
                                      "cublas_workspace_bytes: 0}\nL4: {runtime_overhead_bytes: 7}\n");
  ASSERT_TRUE(c.ok()) << c.error();
  const fp::GpuType& g = *c->find("RTX-3090");
  EXPECT_EQ(g.cuda_context_bytes, 1000000000);
  EXPECT_EQ(fp::nccl_collective_communicator_bytes(g, false), 4 * 2 * (4194304 + 524288 + 4915200));
  EXPECT_EQ(g.cublas_workspace_bytes, 0);
  EXPECT_EQ(c->find("L4")->cuda_context_bytes, 7);  // the older key still works
}

namespace {
// A run whose true peak is modelled + fraction * dynamic + context, times (1 + noise).
fp::MemoryFitSample run(const std::string& gpu, double modelled, double dynamic, double fraction, double context,
                        double noise = 0) {
  return {"g", gpu, (modelled + fraction * dynamic + context) * (1 + noise), modelled, dynamic};
}
}  // namespace

TEST(Calibration, MemoryOverheadFitRecoversKnownConstants) {
  std::vector<fp::MemoryFitSample> s;
  for (double dyn : {2e9, 8e9, 20e9, 40e9}) s.push_back(run("GH200-96", 5e9, dyn, 0.04, 4.5e9));
  // Two runs of another type: too few for its own context (never fitted to one or two runs).
  s.push_back(run("RTX-3090", 1e9, 3e9, 0.04, 2.5e9));
  s.push_back(run("RTX-3090", 1e9, 4e9, 0.04, 2.5e9));
  const fp::MemoryOverheadFit fit = fp::fit_memory_overheads(s);
  EXPECT_NEAR(fit.allocator_fraction, 0.04, 1e-6);
  ASSERT_EQ(fit.cuda_context_bytes.count("GH200-96"), 1u);
  EXPECT_NEAR(fit.cuda_context_bytes.at("GH200-96"), 4.5e9, 1e3);
  EXPECT_EQ(fit.cuda_context_bytes.count("RTX-3090"), 0u);
  EXPECT_NEAR(fp::predicted_bytes(s[4], fit, 2.5e9), s[4].measured_bytes, 1e3);  // the fallback context

  // Runs without a context (allocated/reserved only) inform the fraction alone.
  std::vector<fp::MemoryFitSample> reserved;
  for (double dyn : {1e9, 5e9, 9e9}) reserved.push_back(run("", 2e9, dyn, 0.1, 0));
  EXPECT_NEAR(fp::fit_memory_overheads(reserved).allocator_fraction, 0.1, 1e-6);
}

TEST(Calibration, MemoryOverheadFitNeverUnderPredictsAFittedRunBeyondTheBound) {
  // Noise of +-6 % on runs of the same shape: least squares alone would leave the -6 % runs
  // under-predicted by about 6 %.
  std::vector<fp::MemoryFitSample> s;
  const double noise[] = {0.06, -0.06, 0.0, 0.03, -0.02, 0.06, -0.06};
  const double dyn[] = {2e9, 2e9, 10e9, 20e9, 30e9, 40e9, 40e9};
  for (int i = 0; i < 7; ++i) s.push_back(run("GH200-96", 5e9, dyn[i], 0.04, 4.5e9, noise[i]));
  const fp::MemoryOverheadFit loose = fp::fit_memory_overheads(s, 3, 1.0);  // effectively unconstrained
  const fp::MemoryOverheadFit safe = fp::fit_memory_overheads(s, 3, 0.04);
  double worst_loose = 0, worst_safe = 0;
  for (const auto& r : s) {
    worst_loose = std::min(worst_loose, fp::predicted_bytes(r, loose, 0) / r.measured_bytes - 1);
    worst_safe = std::min(worst_safe, fp::predicted_bytes(r, safe, 0) / r.measured_bytes - 1);
  }
  EXPECT_LT(worst_loose, -0.04);
  EXPECT_GE(worst_safe, -0.04 - 1e-9);
  EXPECT_NEAR(worst_safe, -0.04, 1e-6);  // the bound binds, no more margin than it needs
}
