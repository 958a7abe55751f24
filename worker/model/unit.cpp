#include "worker/model/unit.h"

#include <cmath>
#include <numbers>
#include <new>
#include <stdexcept>

namespace flotilla::worker {
namespace {

// splitmix64: a tiny, portable, counter-style generator (std::normal_distribution is
// implementation-defined, so it cannot give cross-platform identical weights).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform_open() {  // (0, 1)
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  double normal() {  // Box-Muller, one value per call (simple beats fast here)
    const double u1 = uniform_open();
    const double u2 = uniform_open();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
};

void add(std::vector<ParamTensor>& out, std::string name, std::vector<int> shape, bool decay) {
  std::size_t count = 1;
  for (int d : shape) count *= static_cast<std::size_t>(d);
  const std::size_t offset = out.empty() ? 0 : out.back().offset + out.back().count;
  out.push_back({std::move(name), offset, count, std::move(shape), decay});
}

std::vector<std::int32_t> check_tokens(const std::int32_t* tokens, std::size_t n, int vocab,
                                       const char* what) {
  if (!tokens) throw std::invalid_argument(std::string("micro-batch has no ") + what);
  std::vector<std::int32_t> copy(tokens, tokens + n);
  for (std::int32_t t : copy)
    if (t < 0 || t >= vocab)
      throw std::invalid_argument(std::string(what) + " id " + std::to_string(t) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  return copy;
}

struct EmbeddingActs final : UnitActivations {
  DeviceBuffer<std::int32_t> tokens;
};

struct BlockActs final : UnitActivations {
  DeviceBuffer<float> x, ln1, ln1_mean, ln1_rstd, qkv, att, atty, res1, ln2, ln2_mean, ln2_rstd,
      fch, fch_gelu;
};

struct HeadActs final : UnitActivations {
  DeviceBuffer<float> x, lnf, lnf_mean, lnf_rstd, probs;
  DeviceBuffer<std::int32_t> targets;
};

}  // namespace

UnitKind unit_kind(const GPTConfig& config, int unit_index) {
  if (unit_index < 0 || unit_index >= config.num_units())
    throw std::out_of_range("unit index " + std::to_string(unit_index) + " outside [0, " +
                            std::to_string(config.num_units()) + ")");
  if (unit_index == 0) return UnitKind::kEmbedding;
  if (unit_index == config.num_units() - 1) return UnitKind::kHead;
  return UnitKind::kBlock;
}

std::string unit_name(const GPTConfig& config, int unit_index) {
  switch (unit_kind(config, unit_index)) {
    case UnitKind::kEmbedding: return "embedding";
    case UnitKind::kHead: return "head";
    case UnitKind::kBlock: break;
  }
  return "block" + std::to_string(unit_index - 1);
}

std::vector<ParamTensor> unit_param_layout(const GPTConfig& c, int unit_index) {
  std::vector<ParamTensor> out;
  const int C = c.hidden;
  switch (unit_kind(c, unit_index)) {
    case UnitKind::kEmbedding:
      add(out, "wte", {c.vocab, C}, true);
      add(out, "wpe", {c.seq_len, C}, true);
      break;
    case UnitKind::kBlock:
      add(out, "ln1.weight", {C}, false);
      add(out, "ln1.bias", {C}, false);
      add(out, "qkv.weight", {C, 3 * C}, true);
      add(out, "qkv.bias", {3 * C}, false);
      add(out, "proj.weight", {C, C}, true);
      add(out, "proj.bias", {C}, false);
      add(out, "ln2.weight", {C}, false);
      add(out, "ln2.bias", {C}, false);
      add(out, "fc.weight", {C, c.ffn_hidden()}, true);
      add(out, "fc.bias", {c.ffn_hidden()}, false);
      add(out, "fcproj.weight", {c.ffn_hidden(), C}, true);
      add(out, "fcproj.bias", {C}, false);
      break;
    case UnitKind::kHead:
      add(out, "lnf.weight", {C}, false);
      add(out, "lnf.bias", {C}, false);
      add(out, "lm_head.weight", {C, c.vocab}, true);
      break;
  }
  return out;
}

std::size_t unit_param_count(const GPTConfig& config, int unit_index) {
  const auto layout = unit_param_layout(config, unit_index);
  return layout.back().offset + layout.back().count;
}

std::vector<float> init_unit_params(const GPTConfig& config, int unit_index, std::uint64_t seed) {
  const auto layout = unit_param_layout(config, unit_index);
  std::vector<float> params(layout.back().offset + layout.back().count, 0.0f);
  SplitMix64 rng{seed * 0x100000001B3ULL + 0x632BE59BD9B4E019ULL *
                                               (static_cast<std::uint64_t>(unit_index) + 1)};
  const double residual_std = 0.02 / std::sqrt(2.0 * config.num_layers);
  for (const ParamTensor& t : layout) {
    float* p = params.data() + t.offset;
    const bool is_ln_weight = t.name.ends_with("ln1.weight") || t.name.ends_with("ln2.weight") ||
                              t.name == "lnf.weight";
    if (is_ln_weight) {
      for (std::size_t i = 0; i < t.count; ++i) p[i] = 1.0f;
    } else if (t.shape.size() >= 2) {
      const double std = (t.name == "proj.weight" || t.name == "fcproj.weight") ? residual_std
                                                                                : 0.02;
      for (std::size_t i = 0; i < t.count; ++i) p[i] = static_cast<float>(std * rng.normal());
    }
    // biases stay 0
  }
  return params;
}

Unit::Unit(const GPTConfig& config, int unit_index, std::uint64_t seed, Backend& backend)
    : config_(config), index_(unit_index), kind_(unit_kind(config, unit_index)),
      backend_(&backend) {
  try {
    allocate_state(seed);
  } catch (const std::bad_alloc&) {
    throw_out_of_memory("host");
  } catch (const OutOfMemoryError&) {
    throw_out_of_memory(std::string(backend.memory_kind()), out_of_memory_note(backend));
  }
}

// What a unit holds: params, grads, AdamW m and v (4 floats per parameter) on its backend, a
// byte of weight-decay mask, and during construction the initial weights on the host.
void Unit::throw_out_of_memory(const std::string& memory, const std::string& note) const {
  const std::size_t n = unit_param_count(config_, index_);
  throw OutOfMemoryError("out of " + memory + " memory allocating unit '" + unit_name(config_, index_) + "' (" +
                         std::to_string(n) + " parameters: params, grads, AdamW m and v need " +
                         bytes_text(n * (4 * sizeof(float) + 1)) +
                         "); this rank cannot hold its share of the model: use a smaller model or more pipeline "
                         "stages (--pp) so each rank holds fewer layers" +
                         note);
}

void Unit::allocate_state(std::uint64_t seed) {
  Backend& backend = *backend_;
  // The backend buffers first, so a model that does not fit fails at once instead of after
  // drawing all of its initial weights (a minute for a billion parameters).
  const std::size_t n = unit_param_count(config_, index_);
  params_ = DeviceBuffer<float>(backend, n);
  grads_ = DeviceBuffer<float>(backend, n);
  m_ = DeviceBuffer<float>(backend, n);
  v_ = DeviceBuffer<float>(backend, n);
  decay_mask_ = DeviceBuffer<std::uint8_t>(backend, n);
  {
    std::vector<std::uint8_t> mask(n, 0);
    for (const ParamTensor& t : unit_param_layout(config_, index_))
      for (std::size_t i = 0; i < t.count; ++i) mask[t.offset + i] = t.weight_decay ? 1 : 0;
    backend.copy_from_host(decay_mask_.data(), mask.data(), mask.size());
  }
  const std::vector<float> init = init_unit_params(config_, index_, seed);
  backend.copy_from_host(params_.data(), init.data(), params_.bytes());
}

Unit::~Unit() = default;
Unit::Unit(Unit&&) noexcept = default;
Unit& Unit::operator=(Unit&&) noexcept = default;

void Unit::get_state(std::vector<float>* params, std::vector<float>* m, std::vector<float>* v) {
  const std::size_t n = param_count();
  if (params) {
    params->resize(n);
    backend_->copy_to_host(params->data(), params_.data(), n * sizeof(float));
  }
  if (m) {
    m->resize(n);
    backend_->copy_to_host(m->data(), m_.data(), n * sizeof(float));
  }
  if (v) {
    v->resize(n);
    backend_->copy_to_host(v->data(), v_.data(), n * sizeof(float));
  }
}

void Unit::set_state(const std::vector<float>& params, const std::vector<float>& m,
                     const std::vector<float>& v) {
  const std::size_t n = param_count();
  if (params.size() != n || m.size() != n || v.size() != n)
    throw std::invalid_argument(unit_name(config_, index_) + ": state has " +
                                std::to_string(params.size()) + "/" + std::to_string(m.size()) +
                                "/" + std::to_string(v.size()) + " floats, expected " +
                                std::to_string(n));
  backend_->copy_from_host(params_.data(), params.data(), n * sizeof(float));
  backend_->copy_from_host(m_.data(), m.data(), n * sizeof(float));
  backend_->copy_from_host(v_.data(), v.data(), n * sizeof(float));
}

void Unit::get_grads(std::vector<float>* grads) {
  grads->resize(param_count());
  backend_->copy_to_host(grads->data(), grads_.data(), param_count() * sizeof(float));
}

void Unit::set_grads(const std::vector<float>& grads) {
  if (grads.size() != param_count())
    throw std::invalid_argument(unit_name(config_, index_) + ": grads have " +
                                std::to_string(grads.size()) + " floats, expected " +
                                std::to_string(param_count()));
  backend_->copy_from_host(grads_.data(), grads.data(), param_count() * sizeof(float));
}

std::unique_ptr<UnitActivations> Unit::forward(const MicroBatch& batch, const float* in,
                                               float* out, float* loss) {
  Backend& be = *backend_;
  const int B = batch.batch_size;
  const int T = config_.seq_len;
  const int C = config_.hidden;
  const int F = config_.ffn_hidden();
  const int NH = config_.heads;
  const int V = config_.vocab;
  const int N = B * T;
  const std::size_t NC = static_cast<std::size_t>(N) * C;
  if (B < 1) throw std::invalid_argument("micro-batch size must be >= 1");
  const auto layout = unit_param_layout(config_, index_);
  auto P = [&](std::size_t i) { return params_.data() + layout[i].offset; };

  if (kind_ == UnitKind::kEmbedding) {
    auto acts = std::make_unique<EmbeddingActs>();
    const auto tokens = check_tokens(batch.tokens, static_cast<std::size_t>(N), V, "token");
    acts->tokens = DeviceBuffer<std::int32_t>(be, tokens.size());
    be.copy_from_host(acts->tokens.data(), tokens.data(), acts->tokens.bytes());
    be.embedding_forward(out, acts->tokens.data(), P(0), P(1), B, T, C);
    return acts;
  }
  if (kind_ == UnitKind::kBlock) {
    auto a = std::make_unique<BlockActs>();
    a->x = DeviceBuffer<float>(be, NC);
    be.copy_device(a->x.data(), in, a->x.bytes());
    a->ln1 = DeviceBuffer<float>(be, NC);
    a->ln1_mean = DeviceBuffer<float>(be, N);
    a->ln1_rstd = DeviceBuffer<float>(be, N);
    be.layernorm_forward(a->ln1.data(), a->ln1_mean.data(), a->ln1_rstd.data(), a->x.data(), P(0),
                         P(1), N, C);
    a->qkv = DeviceBuffer<float>(be, 3 * NC);
    be.matmul_forward(a->qkv.data(), a->ln1.data(), P(2), P(3), N, C, 3 * C);
    a->att = DeviceBuffer<float>(be, static_cast<std::size_t>(B) * NH * T * T);
    a->atty = DeviceBuffer<float>(be, NC);
    be.attention_forward(a->atty.data(), a->att.data(), a->qkv.data(), B, T, C, NH);
    DeviceBuffer<float> attproj(be, NC);
    be.matmul_forward(attproj.data(), a->atty.data(), P(4), P(5), N, C, C);
    a->res1 = DeviceBuffer<float>(be, NC);
    be.residual_forward(a->res1.data(), a->x.data(), attproj.data(), NC);
    a->ln2 = DeviceBuffer<float>(be, NC);
    a->ln2_mean = DeviceBuffer<float>(be, N);
    a->ln2_rstd = DeviceBuffer<float>(be, N);
    be.layernorm_forward(a->ln2.data(), a->ln2_mean.data(), a->ln2_rstd.data(), a->res1.data(),
                         P(6), P(7), N, C);
    a->fch = DeviceBuffer<float>(be, static_cast<std::size_t>(N) * F);
    be.matmul_forward(a->fch.data(), a->ln2.data(), P(8), P(9), N, C, F);
    a->fch_gelu = DeviceBuffer<float>(be, static_cast<std::size_t>(N) * F);
    be.gelu_forward(a->fch_gelu.data(), a->fch.data(), static_cast<std::size_t>(N) * F);
    DeviceBuffer<float> fcproj(be, NC);
    be.matmul_forward(fcproj.data(), a->fch_gelu.data(), P(10), P(11), N, F, C);
    be.residual_forward(out, a->res1.data(), fcproj.data(), NC);
    return a;
  }
  // Head.
  auto a = std::make_unique<HeadActs>();
  const auto targets = check_tokens(batch.targets, static_cast<std::size_t>(N), V, "target");
  a->targets = DeviceBuffer<std::int32_t>(be, targets.size());
  be.copy_from_host(a->targets.data(), targets.data(), a->targets.bytes());
  a->x = DeviceBuffer<float>(be, NC);
  be.copy_device(a->x.data(), in, a->x.bytes());
  a->lnf = DeviceBuffer<float>(be, NC);
  a->lnf_mean = DeviceBuffer<float>(be, N);
  a->lnf_rstd = DeviceBuffer<float>(be, N);
  be.layernorm_forward(a->lnf.data(), a->lnf_mean.data(), a->lnf_rstd.data(), a->x.data(), P(0),
                       P(1), N, C);
  DeviceBuffer<float> logits(be, static_cast<std::size_t>(N) * V);
  be.matmul_forward(logits.data(), a->lnf.data(), P(2), nullptr, N, C, V);
  a->probs = DeviceBuffer<float>(be, static_cast<std::size_t>(N) * V);
  DeviceBuffer<float> losses(be, N);
  be.cross_entropy_forward(losses.data(), a->probs.data(), logits.data(), a->targets.data(), N, V);
  std::vector<float> host_losses(N);
  be.copy_to_host(host_losses.data(), losses.data(), losses.bytes());
  double sum = 0.0;
  for (float l : host_losses) sum += l;
  if (loss) *loss = static_cast<float>(sum / N);
  return a;
}

void Unit::backward(std::unique_ptr<UnitActivations> saved, const float* dout, float* din,
                    float dloss) {
  Backend& be = *backend_;
  if (!saved) throw std::invalid_argument("Unit::backward without saved activations");
  const int T = config_.seq_len;
  const int C = config_.hidden;
  const int F = config_.ffn_hidden();
  const int NH = config_.heads;
  const int V = config_.vocab;
  const auto layout = unit_param_layout(config_, index_);
  auto P = [&](std::size_t i) { return params_.data() + layout[i].offset; };
  auto G = [&](std::size_t i) { return grads_.data() + layout[i].offset; };

  if (kind_ == UnitKind::kEmbedding) {
    auto& a = static_cast<EmbeddingActs&>(*saved);
    const int N = static_cast<int>(a.tokens.size());
    be.embedding_backward(G(0), G(1), dout, a.tokens.data(), N / T, T, C, V);
    return;
  }
  if (kind_ == UnitKind::kBlock) {
    auto& a = static_cast<BlockActs&>(*saved);
    const int N = static_cast<int>(a.x.size()) / C;
    const int B = N / T;
    const std::size_t NC = a.x.size();
    const std::size_t NF = static_cast<std::size_t>(N) * F;
    // out = res1 + fcproj(gelu(fc(ln2(res1))))
    DeviceBuffer<float> dres1(be, NC);
    be.copy_device(dres1.data(), dout, dres1.bytes());
    DeviceBuffer<float> dfch_gelu(be, NF);
    be.matmul_backward(dfch_gelu.data(), G(10), G(11), dout, a.fch_gelu.data(), P(10), N, F, C);
    DeviceBuffer<float> dfch(be, NF);
    be.gelu_backward(dfch.data(), a.fch.data(), dfch_gelu.data(), NF);
    DeviceBuffer<float> dln2(be, NC);
    be.matmul_backward(dln2.data(), G(8), G(9), dfch.data(), a.ln2.data(), P(8), N, C, F);
    be.layernorm_backward(dres1.data(), G(6), G(7), dln2.data(), a.res1.data(), P(6),
                          a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
    // res1 = x + proj(attn(qkv(ln1(x))))
    DeviceBuffer<float> datty(be, NC);
    be.matmul_backward(datty.data(), G(4), G(5), dres1.data(), a.atty.data(), P(4), N, C, C);
    DeviceBuffer<float> dqkv(be, 3 * NC);
    be.attention_backward(dqkv.data(), datty.data(), a.qkv.data(), a.att.data(), B, T, C, NH);
    DeviceBuffer<float> dln1(be, NC);
    be.matmul_backward(dln1.data(), G(2), G(3), dqkv.data(), a.ln1.data(), P(2), N, C, 3 * C);
    // x feeds both the residual path (dres1) and LN1: din += dres1 + dLN1
    be.layernorm_backward(dres1.data(), G(0), G(1), dln1.data(), a.x.data(), P(0),
                          a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
    be.accumulate(din, dres1.data(), NC);
    return;
  }
  auto& a = static_cast<HeadActs&>(*saved);
  const int N = static_cast<int>(a.targets.size());
  DeviceBuffer<float> dlogits(be, static_cast<std::size_t>(N) * V);
  be.cross_entropy_backward(dlogits.data(), a.probs.data(), a.targets.data(), dloss / N, N, V);
  DeviceBuffer<float> dlnf(be, static_cast<std::size_t>(N) * C);
  be.matmul_backward(dlnf.data(), G(2), nullptr, dlogits.data(), a.lnf.data(), P(2), N, C, V);
  be.layernorm_backward(din, G(0), G(1), dlnf.data(), a.x.data(), P(0), a.lnf_mean.data(),
                        a.lnf_rstd.data(), N, C);
}

double Unit::grad_sum_squares() { return backend_->sum_squares(grads_.data(), grads_.size()); }

void Unit::adamw_step(const TrainConfig& train, std::int64_t step, float lr, float grad_scale) {
  backend_->adamw(params_.data(), grads_.data(), m_.data(), v_.data(), decay_mask_.data(),
                  param_count(), lr, train.beta1, train.beta2, train.eps, train.weight_decay,
                  grad_scale, step + 1);
}

}  // namespace flotilla::worker
