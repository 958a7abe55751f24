// memory_headroom.h: what a job learns from a worker that ran out of GPU memory or measured more
// than predicted, on hand-computed numbers, and that the planner then predicts exactly that much
// more per rank of the type (and nothing more, nowhere else).
#include "operator/memory_headroom.h"

#include <gtest/gtest.h>

#include "planner/evaluate.h"
#include "planner/model_spec_io.h"
#include "planner/network.h"
#include "planner/profile.h"

namespace fo = flotilla::op;
namespace fp = flotilla::planner;

namespace {

// An 11 GB consumer GPU (the issue's RTX-2080 Ti) beside a 16 GB one.
fp::GpuCatalog catalog() {
  return fp::apply_catalog_override(fp::builtin_gpu_catalog(), R"(gpus:
  gpu-11: {memory_bytes: 11000000000, peak_bf16_tflops: 100, gpus_per_node: 8}
  gpu-16: {memory_bytes: 16000000000, peak_bf16_tflops: 100, gpus_per_node: 8}
)")
      .value();
}

// Two stages: pod "a" (gpu-16) runs stage 0 predicted at 6 GB; pod "b" (gpu-11) runs stage 1 at
// 9 GB, and pod "c" (gpu-11) runs both stages' second replicas. The pods record no prediction of
// their own (a status written before they did), so theirs is their stages' largest; the gpu-11
// pods were planned with `gpu11_headroom_bytes` in it.
fo::JobPlan two_stage_plan(std::int64_t stage1_peak_bytes = 9'000'000'000, std::int64_t gpu11_headroom_bytes = 0) {
  fo::JobPlan plan;
  plan.epoch = 3;
  plan.pods = {{"a", "n0", "gpu-16", 1, {0}},
               {"b", "n1", "gpu-11", 1, {1}, 0, gpu11_headroom_bytes},
               {"c", "n2", "gpu-11", 2, {2, 3}, 0, gpu11_headroom_bytes}};
  fo::PlanStage s0;
  s0.gpu_type = "gpu-16";
  s0.pods = {"a", "c"};
  s0.predicted_peak_bytes = 6'000'000'000;
  fo::PlanStage s1;
  s1.gpu_type = "gpu-11";
  s1.pods = {"b", "c"};
  s1.predicted_peak_bytes = stage1_peak_bytes;
  plan.stages = {s0, s1};
  return plan;
}

}  // namespace

TEST(MemoryHeadroom, RecognisesOutOfGpuMemoryLinesOnly) {
  EXPECT_TRUE(flotilla::is_out_of_memory(
      "out of GPU memory: could not allocate 0.00 GiB (1024 bytes) (emulated emu-small: 0.00 GiB in use of ...)"));
  EXPECT_TRUE(flotilla::is_out_of_memory("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."));
  EXPECT_TRUE(flotilla::is_out_of_memory("RuntimeError: CUDA error: out of memory"));
  EXPECT_FALSE(flotilla::is_out_of_memory("out of host memory: could not allocate 1.00 GiB"));
  EXPECT_FALSE(flotilla::is_out_of_memory("cannot start the workers: data file '/data/t.txt' not found"));
}

// Pod b (gpu-11, 11 GB) ran out at a predicted 9 GB: a gpu-11 rank may now hold 0.9 x 9 = 8.1 GB
// of what the planner predicts, i.e. 11 - 8.1 = 2.9 GB of headroom. Pod c runs ranks of both
// stages: its prediction is the larger, 9 GB, the same answer.
TEST(MemoryHeadroom, AnOutOfMemoryRulesOutTheFailedPlanByATenthOfItsNeed) {
  const fp::GpuCatalog cat = catalog();
  for (const char* pod : {"b", "c"}) {
    const auto t = fo::after_out_of_memory(two_stage_plan(), pod, "out of GPU memory: ...", {}, cat);
    ASSERT_TRUE(t) << pod;
    EXPECT_EQ(t->gpu_type, "gpu-11");
    EXPECT_EQ(t->bytes, 2'900'000'000) << pod;
    EXPECT_EQ(t->reason, "OutOfMemory");
    EXPECT_EQ(t->epoch, 3);
    EXPECT_NE(t->message.find(std::string(pod) + " ran out of memory on gpu-11 (predicted peak 9 GB of 11 GB"),
              std::string::npos)
        << t->message;
    EXPECT_NE(t->message.find("a rank may hold 8.1 GB"), std::string::npos) << t->message;
  }
  // The re-plan, with 2.9 GB kept, ran out again at a predicted 10 GB (7.1 GB raw): it may hold
  // 0.9 x 7.1 = 6.39 GB, headroom 11 - 6.39 = 4.61 GB (at least 2.9 + 0.71 = 3.61 GB: it grows).
  fo::MemoryHeadroom before;
  before.set({"gpu-11", 2'900'000'000, "OutOfMemory", "", 3});
  const auto again =
      fo::after_out_of_memory(two_stage_plan(10'000'000'000, 2'900'000'000), "b", "CUDA out of memory", before, cat);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->bytes, 4'610'000'000);
  // Pod a (gpu-16) at 6 GB: 16 - 5.4 = 10.6 GB on gpu-16 only.
  const auto a = fo::after_out_of_memory(two_stage_plan(), "a", "out of GPU memory", before, cat);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->gpu_type, "gpu-16");
  EXPECT_EQ(a->bytes, 10'600'000'000);
  // Nothing to learn from a pod the plan does not have.
  EXPECT_FALSE(fo::after_out_of_memory(two_stage_plan(), "zz", "out of GPU memory", {}, cat));
}

TEST(MemoryHeadroom, AMeasuredPeakAboveThePredictionIsKeptUnlessItIsNoise) {
  const fp::GpuCatalog cat = catalog();
  // 9.5 GB measured where 9 GB was predicted: 0.5 GB more, above 1 % of 11 GB (0.11 GB).
  const auto t = fo::after_measured_peak(two_stage_plan(), "b", 9'500'000'000, {}, cat);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bytes, 500'000'000);
  EXPECT_EQ(t->reason, "MeasuredAbovePrediction");
  // Under 1 % of the GPU's memory above the prediction, or below it: nothing.
  EXPECT_FALSE(fo::after_measured_peak(two_stage_plan(), "b", 9'100'000'000, {}, cat));
  EXPECT_FALSE(fo::after_measured_peak(two_stage_plan(), "b", 8'000'000'000, {}, cat));
  // Learned, but the running plan was made before (it carries none): the same 9.5 GB again is
  // covered by the 0.5 GB now kept, so nothing new (not 0.5 GB more on top).
  fo::MemoryHeadroom before;
  before.set(*t);
  EXPECT_FALSE(fo::after_measured_peak(two_stage_plan(), "b", 9'500'000'000, before, cat));
  // A plan made with the 0.5 GB (9 GB in all, 8.5 GB the model's): 9.8 GB measured, 1.3 GB.
  const auto more =
      fo::after_measured_peak(two_stage_plan(9'000'000'000, 500'000'000), "b", 9'800'000'000, before, cat);
  ASSERT_TRUE(more);
  EXPECT_EQ(more->bytes, 1'300'000'000);
}

TEST(MemoryHeadroom, RoundTripsThroughStatusAndIgnoresMalformedEntries) {
  fo::MemoryHeadroom h;
  h.set({"gpu-16", 7, "MeasuredAbovePrediction", "m", 2});
  h.set({"gpu-11", 5, "OutOfMemory", "why", 1});
  h.set({"gpu-16", 9, "OutOfMemory", "later", 4});  // replaces its type's entry
  nlohmann::json status;
  status["memoryHeadroom"] = h.to_status();
  status["memoryHeadroom"].push_back({{"gpuType", ""}, {"bytes", 3}});
  status["memoryHeadroom"].push_back("not an object");
  status["memoryHeadroom"].push_back({{"gpuType", "H100-80"}, {"bytes", std::int64_t{1} << 62}});  // no GPU's
  status["memoryHeadroom"].push_back({{"gpuType", "A100-40"}, {"bytes", "12"}});                   // not a number
  const fo::MemoryHeadroom back = fo::MemoryHeadroom::from_status(status);
  ASSERT_EQ(back.types.size(), 2u);
  EXPECT_EQ(back.signature(), "gpu-11=5,gpu-16=9");
  EXPECT_EQ(back.find("gpu-16")->message, "later");
  EXPECT_EQ(back.bytes_for("gpu-11"), 5);
  EXPECT_EQ(back.bytes_for("H100-80"), 0);
  EXPECT_TRUE(fo::MemoryHeadroom::from_status(nlohmann::json::object()).empty());
}

// The planner then predicts exactly E more on every rank of the type and nothing more on others:
// a two-stage plan, stage 0 on gpu-16 and stage 1 on gpu-11, evaluated with and without 1.5 GB
// of gpu-11 headroom.
TEST(MemoryHeadroom, ThePlannerPredictsExactlyTheHeadroomMoreOnItsTypeOnly) {
  const fp::GpuCatalog base = catalog();
  fo::MemoryHeadroom h;
  h.set({"gpu-11", 1'500'000'000, "OutOfMemory", "", 1});
  const fp::GpuCatalog learned = fo::with_headroom(base, h);
  const fp::ModelSpec model = fp::resolve_model("OPT-350M").value();
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 8;
  const int half = model.num_blocks() / 2;
  plan.stages = {{0, half, 1, {{"gpu-16", "z", 1}, {"gpu-16", "z", 1}}},
                 {half, model.num_blocks(), 1, {{"gpu-11", "z", 1}, {"gpu-11", "z", 1}}}};
  const fp::ComputeModel compute{nullptr};
  const fp::NetworkModel network = fp::default_network_model();
  fp::EvalContext ctx;
  ctx.compute = &compute;
  ctx.network = &network;
  ctx.catalog = &base;
  const fp::Evaluation before = fp::evaluate(plan, model, ctx);
  ctx.catalog = &learned;
  const fp::Evaluation after = fp::evaluate(plan, model, ctx);
  ASSERT_EQ(before.ranks.size(), after.ranks.size());
  for (std::size_t r = 0; r < before.ranks.size(); ++r) {
    const std::int64_t extra = before.ranks[r].gpu_type == "gpu-11" ? 1'500'000'000 : 0;
    EXPECT_EQ(after.ranks[r].memory.peak_bytes - before.ranks[r].memory.peak_bytes, extra) << "rank " << r;
  }
  EXPECT_EQ(after.stages[1].peak_bytes - before.stages[1].peak_bytes, 1'500'000'000);
  EXPECT_EQ(after.stages[0].peak_bytes, before.stages[0].peak_bytes);
  EXPECT_EQ(after.iter_seconds, before.iter_seconds) << "headroom is memory only";
}

TEST(MemoryHeadroom, BytesReadAsAPersonWouldWriteThem) {
  EXPECT_EQ(fo::bytes_text(4'600'000), "4.6 MB");
  EXPECT_EQ(fo::bytes_text(2'900'000'000), "2.9 GB");
  EXPECT_EQ(fo::bytes_text(12'345'678'901), "12.3 GB");
  EXPECT_EQ(fo::bytes_text(512), "512 B");
}

// The reference worker's line names what an emulated GPU offered; a GPU that offered far less
// than the raw prediction is learned in one OOM: a rank may hold 0.9 of what it offered.
TEST(MemoryHeadroom, AGpuThatSaysWhatItOfferedIsLearnedInOneOutOfMemory) {
  const std::string line =
      "step 0: out of GPU memory allocating unit 'embedding' (1234 parameters: ...); this rank cannot hold its "
      "share of the model: use a smaller model or more pipeline stages (--pp) so each rank holds fewer layers; "
      "usable GPU memory 1000000000 bytes";
  EXPECT_EQ(fo::usable_bytes_in(line), 1'000'000'000);
  EXPECT_FALSE(fo::usable_bytes_in("usable GPU memory lots"));
  EXPECT_FALSE(fo::usable_bytes_in("CUDA out of memory"));
  // Pod b: 9 GB predicted on 11 GB, the GPU offered 1 GB: 11 - 0.9 = 10.1 GB of headroom.
  const auto t = fo::after_out_of_memory(two_stage_plan(), "b", line, {}, catalog());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bytes, 10'100'000'000);
  // Offered more than the raw prediction (the model under-predicts): the 10 % rule, 2.9 GB.
  const auto u = fo::after_out_of_memory(two_stage_plan(), "b",
                                         "out of GPU memory ...; usable GPU memory 10500000000 bytes", {}, catalog());
  ASSERT_TRUE(u);
  EXPECT_EQ(u->bytes, 2'900'000'000);
}

// PyTorch's own out-of-memory lines (its CUDA caching allocator's formats, 2.x and 1.x, as a
// Megatron worker prints them): what the process held plus what was free is what it was offered.
TEST(MemoryHeadroom, PyTorchOutOfMemoryLinesSayWhatTheGpuOffered) {
  const std::string torch2 =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
      "23.69 GiB of which 10.75 MiB is free. Process 4242 has 2.00 GiB memory in use. Including non-PyTorch "
      "memory, this process has 21.67 GiB memory in use. Of the allocated memory 20.90 GiB is allocated by "
      "PyTorch, and 418.11 MiB is reserved by PyTorch but unallocated.";
  EXPECT_TRUE(flotilla::is_out_of_memory(torch2));
  // 21.67 GiB + 10.75 MiB.
  const double expected2 = 21.67 * 1024 * 1024 * 1024 + 10.75 * 1024 * 1024;
  ASSERT_TRUE(fo::usable_bytes_in(torch2));
  EXPECT_NEAR(static_cast<double>(*fo::usable_bytes_in(torch2)), expected2, 1.0);
  const std::string torch1 =
      "RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total capacity; 130.35 MiB "
      "already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch)";
  ASSERT_TRUE(fo::usable_bytes_in(torch1));
  EXPECT_NEAR(static_cast<double>(*fo::usable_bytes_in(torch1)), (47.06 + 188.00) * 1024 * 1024, 1.0);
  EXPECT_FALSE(fo::usable_bytes_in("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."));
}

// A stage may mix GPU types: a pod's own prediction (its type's ranks) is what the evidence is
// compared with, not the stage's largest. Pod "x" (gpu-16, 14 GB) and pod "y" (gpu-11, 9 GB) run
// one stage predicted at 14 GB; y's OOM gives gpu-11 11 - 0.9 x 9 = 2.9 GB (the stage's 14 GB
// would have given 11 - 12.6 < 0: nothing learned, and the same plan relaunched).
TEST(MemoryHeadroom, APodOfAMixedStageIsJudgedByItsOwnPrediction) {
  fo::JobPlan plan;
  plan.epoch = 2;
  plan.pods = {{"x", "n0", "gpu-16", 1, {0}, 14'000'000'000, 0}, {"y", "n1", "gpu-11", 1, {1}, 9'000'000'000, 0}};
  fo::PlanStage stage;
  stage.gpu_type = "gpu-16";
  stage.pods = {"x", "y"};
  stage.predicted_peak_bytes = 14'000'000'000;
  plan.stages = {stage};
  const auto t = fo::after_out_of_memory(plan, "y", "CUDA out of memory", {}, catalog());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->gpu_type, "gpu-11");
  EXPECT_EQ(t->bytes, 2'900'000'000);
  // A pod planned with 1 GB of headroom (its own record): raw 8 GB, 11 - 7.2 = 3.8 GB.
  plan.pods[1].predicted_peak_bytes = 9'000'000'000;
  plan.pods[1].headroom_bytes = 1'000'000'000;
  fo::MemoryHeadroom before;
  before.set({"gpu-11", 1'000'000'000, "OutOfMemory", "", 1});
  const auto u = fo::after_out_of_memory(plan, "y", "CUDA out of memory", before, catalog());
  ASSERT_TRUE(u);
  EXPECT_EQ(u->bytes, 3'800'000'000);
}

TEST(MemoryHeadroom, HoldsForOneModelAndWorkerKind) {
  fo::MemoryHeadroom h;
  h.set({"gpu-11", 5, "OutOfMemory", "", 1, "small|flotilla"});
  h.set({"gpu-16", 7, "OutOfMemory", "", 1, "tiny|flotilla"});
  EXPECT_TRUE(h.keep_only("small|flotilla"));
  EXPECT_EQ(h.signature(), "gpu-11=5");
  EXPECT_FALSE(h.keep_only("small|flotilla"));
}
