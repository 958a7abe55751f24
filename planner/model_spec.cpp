#include "planner/model_spec.h"

#include "common/reference_models.h"
#include "common/transformer_flops.h"

#include <algorithm>
#include <cctype>

namespace flotilla::planner {
namespace {

using i64 = std::int64_t;

i64 embed_width(const ModelSpec& m) { return m.embed_proj_dim > 0 ? m.embed_proj_dim : m.hidden; }

// OPT-350M (the only preset with a projection) applies no final LayerNorm
// (do_layer_norm_before = false); every other preset has one.
i64 final_norm_params(const ModelSpec& m) {
  if (m.embed_proj_dim > 0) return 0;
  return m.family == ModelFamily::kGpt ? 2LL * m.hidden : m.hidden;
}

ModelSpec base_spec(std::string name, ModelFamily family, int layers, int hidden, int heads, int ffn, int vocab,
                    int seq, std::vector<std::string> aliases) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = family;
  m.num_layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.seq_len = seq;
  m.aliases = std::move(aliases);
  return m;
}

ModelSpec gpt(std::string name, int layers, int hidden, int heads, int vocab, int positions,
              std::vector<std::string> aliases) {
  ModelSpec m = base_spec(std::move(name), ModelFamily::kGpt, layers, hidden, heads, 4 * hidden, vocab, 2048,
                          std::move(aliases));
  m.max_position_embeddings = positions;
  m.tied_embeddings = true;
  return m;
}

ModelSpec llama(std::string name, int layers, int hidden, int heads, int kv_heads, int ffn,
                int vocab, int seq, std::vector<std::string> aliases) {
  ModelSpec m = base_spec(std::move(name), ModelFamily::kLlama, layers, hidden, heads, ffn, vocab, seq,
                          std::move(aliases));
  m.kv_heads = kv_heads;
  m.tied_embeddings = false;
  return m;
}

std::vector<ModelSpec> make_presets() {
  std::vector<ModelSpec> p;
  // OPT positions: 2048 + 2 offset rows (HF OPTLearnedPositionalEmbedding).
  ModelSpec opt350 = gpt("OPT-350M", 24, 1024, 16, 50272, 2050, {"OPT-350", "opt-350m", "opt350m"});
  opt350.embed_proj_dim = 512;
  p.push_back(opt350);
  p.push_back(gpt("GPT-Neo-2.7B", 32, 2560, 20, 50257, 2048,
                  {"GPT-Neo-2.7", "gpt-neo-2.7b", "gptneo-2.7b", "gpt-neo"}));
  ModelSpec opt30 = gpt("OPT-30B", 48, 7168, 56, 50272, 2050, {"OPT-30", "opt30b"});
  p.push_back(opt30);
  p.push_back(llama("Llama-3-8B", 32, 4096, 32, 8, 14336, 128256, 8192,
                    {"LLAMA-3-8", "llama3-8b", "meta-llama-3-8b"}));
  p.push_back(llama("Llama-2-7B", 32, 4096, 32, 32, 11008, 32000, 4096, {"llama2-7b", "LLAMA-2-7"}));
  p.push_back(llama("Llama-2-13B", 40, 5120, 40, 40, 13824, 32000, 4096, {"llama2-13b", "LLAMA-2-13"}));
  p.push_back(llama("Llama-2-70B", 80, 8192, 64, 8, 28672, 32000, 4096, {"llama2-70b", "LLAMA-2-70"}));
  p.push_back(gpt("GPT-3-175B", 96, 12288, 96, 50257, 2048, {"gpt3-175b", "GPT-3", "gpt3"}));
  // The reference worker's models (common/reference_models.h): what a TrainingJob's pods train.
  for (const ReferenceModelShape& r : kReferenceModels) {
    ModelSpec m = base_spec(std::string(r.name), ModelFamily::kGpt, r.num_layers, r.hidden, r.heads, 4 * r.hidden,
                            r.vocab, r.seq_len, {});
    m.max_position_embeddings = r.seq_len;
    m.tied_embeddings = false;
    p.push_back(m);
  }
  return p;
}

}  // namespace

namespace {
char normalized_char(char c) {
  if (c == '_' || c == ' ') return '-';
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace

std::string normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) out.push_back(normalized_char(c));
  return out;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (normalized_char(a[i]) != normalized_char(b[i])) return false;
  return true;
}

bool name_less(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char ca = normalized_char(a[i]), cb = normalized_char(b[i]);
    if (ca != cb) return ca < cb;
  }
  return a.size() < b.size();
}

std::int64_t embedding_params(const ModelSpec& m) {
  i64 n = static_cast<i64>(m.vocab) * embed_width(m);
  if (m.family == ModelFamily::kGpt) n += static_cast<i64>(m.max_position_embeddings) * m.hidden;
  if (m.embed_proj_dim > 0) n += static_cast<i64>(m.embed_proj_dim) * m.hidden;  // project_in
  return n;
}

std::int64_t transformer_layer_params(const ModelSpec& m) {
  const i64 h = m.hidden;
  const i64 kv = static_cast<i64>(m.effective_kv_heads()) * m.head_dim;
  const i64 q = static_cast<i64>(m.heads) * m.head_dim;
  const i64 f = m.ffn_hidden;
  if (m.family == ModelFamily::kGpt) {
    // q,k,v,o weights and biases; 2 LayerNorms (weight + bias); fc1/fc2 with biases.
    return h * (q + 2 * kv) + (q + 2 * kv) + q * h + h + 4 * h + 2 * h * f + f + h;
  }
  // Llama: no biases, 2 RMSNorm weights, SwiGLU (gate, up, down).
  return h * (q + 2 * kv) + q * h + 2 * h + 3 * h * f;
}

std::int64_t head_matrix_params(const ModelSpec& m) { return static_cast<i64>(m.vocab) * embed_width(m); }

std::int64_t head_params(const ModelSpec& m) {
  i64 n = final_norm_params(m);
  if (m.embed_proj_dim > 0) n += static_cast<i64>(m.hidden) * m.embed_proj_dim;  // project_out
  if (!m.tied_embeddings) n += head_matrix_params(m);
  return n;
}

std::int64_t total_params(const ModelSpec& m) {
  return embedding_params(m) + m.num_layers * transformer_layer_params(m) + head_params(m);
}

std::int64_t block_params(const ModelSpec& m, int block) {
  if (block == 0) return embedding_params(m);
  if (block == m.num_layers + 1) return head_params(m);
  return transformer_layer_params(m);
}

double block_forward_flops(const ModelSpec& m, int block, int seq_len) {
  if (block == 0) return 0.0;  // a table lookup (+ OPT's small projection, negligible)
  if (block == m.num_layers + 1) return lm_head_forward_flops(seq_len, static_cast<double>(head_matrix_params(m)));
  const double q = static_cast<double>(m.heads) * m.head_dim;
  const double kv = static_cast<double>(m.effective_kv_heads()) * m.head_dim;
  const double mlp_mats = m.family == ModelFamily::kGpt ? 2.0 : 3.0;
  return transformer_layer_forward_flops(seq_len, m.hidden, q, kv, m.ffn_hidden, mlp_mats);
}

std::string preset_names() {
  std::string names;
  for (const ModelSpec& m : model_presets()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

const std::vector<ModelSpec>& model_presets() {
  static const std::vector<ModelSpec> presets = make_presets();
  return presets;
}

std::optional<ModelSpec> find_preset(std::string_view name) {
  for (const ModelSpec& m : model_presets()) {
    if (same_name(m.name, name)) return m;
    for (const std::string& alias : m.aliases) {
      if (same_name(alias, name)) return m;
    }
  }
  return std::nullopt;
}

}  // namespace flotilla::planner
