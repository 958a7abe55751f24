// bench_worker_gpu: training throughput of the reference GPT on one GPU.
//
// Runs full training steps (forward, backward, AdamW) of the gpt-125m preset (12 layers, 768
// hidden, 12 heads, 1024 tokens, vocab 32000, 135M parameters) on the CUDA backend, twice:
// with FP32 GEMMs (the baseline, as exact as the CPU reference) and with TF32 tensor cores, and
// prints the ratio between them. MFU uses the PaLM/llm.c count of training FLOPs per token,
// 6 * (matmul parameters: all but the embedding tables) + 12 * layers * hidden * seq_len
// (attention scores and values), divided by
// the GPU's dense peak for the math mode used (and, for comparison with published MFU numbers,
// by the BF16 dense peak). Where the time goes: per-unit forward/backward and optimizer times,
// measured with a device synchronize around each (which itself costs a little).
//
// Usage: bench_worker_gpu [--batch B] [--steps N] [--layers L] [--peak-fp32 TF] [--peak-tf32 TF]
//                         [--peak-bf16 TF] [--json FILE]
// --json FILE also writes the numbers as one JSON object (scripts/gpu-check.sh collects it);
// without a GPU the object says {"skipped": true, "reason": ...}.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/cuda/cuda_backend.h"
#include "worker/model/backend.h"
#include "worker/model/config.h"
#include "worker/model/optimizer.h"
#include "worker/model/unit.h"

namespace fw = flotilla::worker;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Peaks {  // dense TFLOP/s
  double fp32 = 0, tf32 = 0, bf16 = 0;
};

// Published dense peaks (NVIDIA data sheets, without sparsity).
Peaks peaks_for(const std::string& name) {
  if (name.find("H100") != std::string::npos && name.find("PCIe") != std::string::npos)
    return {51.2, 378.0, 756.0};
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos)
    return {66.9, 494.7, 989.4};
  if (name.find("A100") != std::string::npos) return {19.5, 156.0, 312.0};
  return {};
}

struct Result {
  double step_seconds = 0;
  double tokens_per_second = 0;
  std::vector<double> forward_seconds, backward_seconds;  // per unit, mean per step
  double optimizer_seconds = 0;
  float last_loss = 0;
};

Result run(fw::Backend& be, const fw::GPTConfig& c, int B, int steps, bool per_unit_timing) {
  fw::TrainConfig train;
  std::vector<fw::Unit> units;
  for (int u = 0; u < c.num_units(); ++u) units.emplace_back(c, u, train.seed, be);
  const std::size_t N = static_cast<std::size_t>(B) * c.seq_len;
  std::vector<std::int32_t> tokens(N), targets(N);
  for (std::size_t i = 0; i < N; ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 2654435761ULL) % c.vocab);
    targets[i] = static_cast<std::int32_t>(((i + 1) * 2654435761ULL) % c.vocab);
  }
  const fw::MicroBatch mb{B, tokens.data(), targets.data()};
  const std::size_t act = N * c.hidden;
  Result r;
  r.forward_seconds.assign(units.size(), 0.0);
  r.backward_seconds.assign(units.size(), 0.0);
  const int warmup = 2;
  Clock::time_point start;
  for (int step = 0; step < warmup + steps; ++step) {
    if (step == warmup) {
      be.synchronize();
      start = Clock::now();
    }
    const bool timed = per_unit_timing && step >= warmup;
    for (auto& u : units) u.zero_grads();
    std::vector<fw::DeviceBuffer<float>> acts;
    acts.emplace_back(be, act);
    std::vector<std::unique_ptr<fw::UnitActivations>> saved;
    for (std::size_t k = 0; k < units.size(); ++k) {
      auto t0 = Clock::now();
      fw::DeviceBuffer<float> out(be, units[k].kind() == fw::UnitKind::kHead ? 0 : act);
      saved.push_back(units[k].forward(mb, acts.back().data(), out.data(), &r.last_loss));
      acts.push_back(std::move(out));
      if (timed) {
        be.synchronize();
        r.forward_seconds[k] += seconds_since(t0);
      }
    }
    acts.clear();
    fw::DeviceBuffer<float> dcur;
    for (std::size_t k = units.size(); k-- > 0;) {
      auto t0 = Clock::now();
      fw::DeviceBuffer<float> din(be, units[k].kind() == fw::UnitKind::kEmbedding ? 0 : act);
      units[k].backward(std::move(saved[k]), dcur.data(), din.data(), 1.0f);
      dcur = std::move(din);
      if (timed) {
        be.synchronize();
        r.backward_seconds[k] += seconds_since(t0);
      }
    }
    auto t0 = Clock::now();
    std::vector<double> sumsq;
    for (auto& u : units) sumsq.push_back(u.grad_sum_squares());
    const float scale = fw::clip_scale(fw::grad_norm(sumsq), train.grad_clip_norm);
    for (auto& u : units) u.adamw_step(train, step, fw::learning_rate(train, step), scale);
    if (timed) {
      be.synchronize();
      r.optimizer_seconds += seconds_since(t0);
    }
  }
  be.synchronize();
  r.step_seconds = seconds_since(start) / steps;
  r.tokens_per_second = static_cast<double>(N) / r.step_seconds;
  for (auto& s : r.forward_seconds) s /= steps;
  for (auto& s : r.backward_seconds) s /= steps;
  r.optimizer_seconds /= steps;
  return r;
}

}  // namespace

int bench_main(int argc, char** argv) {
  int B = 8, steps = 10, layers = 12;
  double peak_fp32 = 0, peak_tf32 = 0, peak_bf16 = 0;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--batch") B = std::atoi(v);
    else if (flag == "--steps") steps = std::atoi(v);
    else if (flag == "--layers") layers = std::atoi(v);
    else if (flag == "--peak-fp32") peak_fp32 = std::atof(v);
    else if (flag == "--peak-tf32") peak_tf32 = std::atof(v);
    else if (flag == "--peak-bf16") peak_bf16 = std::atof(v);
    else if (flag == "--json") json_path = v;
    else {
      std::fprintf(stderr, "unknown flag %s (use --batch, --steps, --layers, --peak-*, --json)\n",
                   argv[i]);
      return 2;
    }
  }
  if (B < 1 || steps < 1 || layers < 1) {
    std::fprintf(stderr, "--batch, --steps and --layers must be >= 1\n");
    return 2;
  }
  nlohmann::json report;
  auto write_json = [&] {
    if (json_path.empty()) return true;
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) std::fprintf(stderr, "bench_worker_gpu: cannot write %s\n", json_path.c_str());
    return static_cast<bool>(out);
  };
  if (fw::cuda_visible_device_count() == 0) {
    std::printf("bench_worker_gpu: SKIPPED: no CUDA device visible on this machine; nothing "
                "was measured.\n");
    report = {{"skipped", true}, {"reason", "no CUDA device visible"}};
    return write_json() ? 0 : 1;
  }
  const std::string gpu = fw::cuda_device_name();
  Peaks peaks = peaks_for(gpu);
  if (peak_fp32 > 0) peaks.fp32 = peak_fp32;
  if (peak_tf32 > 0) peaks.tf32 = peak_tf32;
  if (peak_bf16 > 0) peaks.bf16 = peak_bf16;

  fw::GPTConfig c = *fw::gpt_preset("gpt-125m");
  c.num_layers = layers;
  const double params = static_cast<double>(c.parameter_count());
  // Embedding lookups are not multiplications: count the matmul parameters only (blocks and
  // the untied LM head), so MFU is not flattered by the 25M-entry token table.
  const double matmul_params = params - static_cast<double>(fw::unit_param_count(c, 0));
  const double flops_per_token =
      6.0 * matmul_params + 12.0 * c.num_layers * static_cast<double>(c.hidden) * c.seq_len;
  std::printf("bench_worker_gpu on %s: GPT %d layers, hidden %d, heads %d, seq %d, vocab %d "
              "(%.1fM params), micro-batch %d x %d tokens, %d timed steps\n",
              gpu.c_str(), c.num_layers, c.hidden, c.heads, c.seq_len, c.vocab, params / 1e6, B,
              c.seq_len, steps);
  std::printf("training FLOPs per token (6 * %.1fM matmul params + 12*L*C*T): %.3g\n",
              matmul_params / 1e6, flops_per_token);

  report = {{"skipped", false},
            {"gpu", gpu},
            {"model", {{"layers", c.num_layers}, {"hidden", c.hidden}, {"heads", c.heads},
                       {"seq_len", c.seq_len}, {"vocab", c.vocab}, {"parameters", params}}},
            {"micro_batch", B},
            {"timed_steps", steps},
            {"flops_per_token", flops_per_token},
            {"peaks_tflops", {{"fp32", peaks.fp32}, {"tf32", peaks.tf32}, {"bf16", peaks.bf16}}},
            {"modes", nlohmann::json::object()}};
  std::string error;
  Result results[2];
  const char* modes[2] = {"cuda", "cuda-tf32"};
  for (int m = 0; m < 2; ++m) {
    auto be = fw::make_backend(modes[m], &error);
    if (!be) {
      std::fprintf(stderr, "bench_worker_gpu: backend %s unavailable: %s\n", modes[m], error.c_str());
      return 1;
    }
    results[m] = run(*be, c, B, steps, /*per_unit_timing=*/false);
    const Result timed = run(*be, c, B, 2, /*per_unit_timing=*/true);
    results[m].forward_seconds = timed.forward_seconds;
    results[m].backward_seconds = timed.backward_seconds;
    results[m].optimizer_seconds = timed.optimizer_seconds;
    const double achieved_tflops = results[m].tokens_per_second * flops_per_token / 1e12;
    const double peak_mode = m == 0 ? peaks.fp32 : peaks.tf32;
    std::printf("\n[%s] %.1f ms/step, %.0f tokens/s, %.1f TFLOP/s achieved, last loss %.3f\n",
                modes[m], results[m].step_seconds * 1e3, results[m].tokens_per_second,
                achieved_tflops, results[m].last_loss);
    if (peak_mode > 0)
      std::printf("[%s] MFU %.1f%% of the %.1f TFLOP/s dense %s peak; %.1f%% of the %.1f TFLOP/s "
                  "BF16 dense peak\n",
                  modes[m], 100.0 * achieved_tflops / peak_mode, peak_mode,
                  m == 0 ? "FP32" : "TF32", 100.0 * achieved_tflops / peaks.bf16, peaks.bf16);
    else
      std::printf("[%s] MFU not computed: unknown GPU peak (pass --peak-fp32/--peak-tf32/--peak-bf16)\n",
                  modes[m]);
    // Where the time goes (synchronized per unit, so the sum slightly exceeds the step time).
    double blocks_f = 0, blocks_b = 0;
    for (int u = 1; u <= c.num_layers; ++u) {
      blocks_f += results[m].forward_seconds[u];
      blocks_b += results[m].backward_seconds[u];
    }
    const int head = c.num_units() - 1;
    std::printf("[%s] time per step: embedding fwd %.2f ms bwd %.2f ms | %d blocks fwd %.1f ms "
                "bwd %.1f ms | head (LN+LM head+loss) fwd %.1f ms bwd %.1f ms | grad norm + "
                "AdamW %.1f ms\n",
                modes[m], results[m].forward_seconds[0] * 1e3,
                results[m].backward_seconds[0] * 1e3, c.num_layers, blocks_f * 1e3,
                blocks_b * 1e3, results[m].forward_seconds[head] * 1e3,
                results[m].backward_seconds[head] * 1e3, results[m].optimizer_seconds * 1e3);
    report["modes"][modes[m]] = {
        {"step_seconds", results[m].step_seconds},
        {"tokens_per_second", results[m].tokens_per_second},
        {"achieved_tflops", achieved_tflops},
        {"mfu_vs_mode_peak", peak_mode > 0 ? achieved_tflops / peak_mode : 0.0},
        {"mfu_vs_bf16_peak", peaks.bf16 > 0 ? achieved_tflops / peaks.bf16 : 0.0},
        {"last_loss", results[m].last_loss},
        {"embedding_forward_seconds", results[m].forward_seconds[0]},
        {"embedding_backward_seconds", results[m].backward_seconds[0]},
        {"blocks_forward_seconds", blocks_f},
        {"blocks_backward_seconds", blocks_b},
        {"head_forward_seconds", results[m].forward_seconds[head]},
        {"head_backward_seconds", results[m].backward_seconds[head]},
        {"optimizer_seconds", results[m].optimizer_seconds}};
  }
  report["tf32_over_fp32_tokens_per_second"] =
      results[1].tokens_per_second / results[0].tokens_per_second;
  std::printf("\nratio: TF32 tensor cores vs FP32 baseline (same run): %.2fx tokens/s\n",
              results[1].tokens_per_second / results[0].tokens_per_second);
  std::printf("note: FP32 activations and weights throughout (no BF16 mixed precision, no fused "
              "or flash attention: the T x T attention matrix is materialized), so MFU against "
              "the BF16 peak is low by design; the CUDA backend's goal is matching the CPU "
              "reference, not peak speed.\n");
  return write_json() ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const std::exception& e) {  // a CUDA/cuBLAS error or out of GPU memory: one line
    std::fprintf(stderr, "bench_worker_gpu: error: %s\n", e.what());
    return 1;
  }
}
