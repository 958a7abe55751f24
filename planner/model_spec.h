// Transformer model hyper-parameters, derived parameter counts, and the built-in presets.
//
// Guarantees: param counts are exact functions of the spec (no rounding); presets reproduce the
//   published sizes (see tests/planner/model_spec_test.cpp for the tolerances); find_preset()
//   is case-insensitive and accepts aliases ("llama-3-8b", "LLAMA-3-8", "OPT-350", "opt-350m").
// Assumes: decoder-only GPT-style (LayerNorm with biases, GELU MLP with 2 matrices, learned
//   positions) or Llama-style (RMSNorm, SwiGLU MLP with 3 matrices, rotary, no biases, GQA).
// Caveats: model "blocks" are indexed as in Sailor's profiles: block 0 = embedding (+ positions,
//   + OPT's 512->hidden projection), blocks 1..num_layers = transformer layers, block
//   num_layers+1 = final norm + LM head (+ OPT's hidden->512 projection). With tied embeddings
//   the head owns no separate weight in the *model* count, but a pipeline whose last stage is
//   not the first stage holds its own copy (Megatron), which the memory model counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::planner {

enum class ModelFamily { kGpt, kLlama };

struct ModelSpec {
  std::string name;
  ModelFamily family = ModelFamily::kGpt;
  int num_layers = 0;
  int hidden = 0;
  int heads = 0;
  int head_dim = 0;       // hidden / heads for all presets
  int kv_heads = 0;       // grouped-query attention; 0 means = heads
  int ffn_hidden = 0;
  int vocab = 0;
  int seq_len = 0;
  int max_position_embeddings = 0;  // learned position table rows (GPT family); 0 for rotary
  bool tied_embeddings = true;
  int embed_proj_dim = 0;  // OPT-350M: word embeddings are 512-wide, projected to/from hidden
  std::vector<std::string> aliases;

  int num_blocks() const { return num_layers + 2; }
  int effective_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Parameters of each block (see the block indexing above).
std::int64_t embedding_params(const ModelSpec& m);       // block 0
std::int64_t transformer_layer_params(const ModelSpec& m);  // each of blocks 1..L
std::int64_t head_params(const ModelSpec& m);            // block L+1 incl. final norm; the
                                                          // output matrix only if untied
std::int64_t head_matrix_params(const ModelSpec& m);     // vocab x width of the output matrix
std::int64_t total_params(const ModelSpec& m);           // what the model card reports
std::int64_t block_params(const ModelSpec& m, int block);

// Forward FLOPs of one block for one sequence of seq_len tokens (matmuls + attention scores).
double block_forward_flops(const ModelSpec& m, int block, int seq_len);

const std::vector<ModelSpec>& model_presets();
std::optional<ModelSpec> find_preset(std::string_view name);
// The presets' names, comma-separated in table order, for errors that list them.
std::string preset_names();

// Canonical form of a name for matching: lower case, '_' and ' ' -> '-', trailing "b"/"m"
// size suffix kept. Exposed so the GPU catalog and profile lookup match names the same way.
std::string normalize_name(std::string_view name);
// normalize_name(a) == normalize_name(b), without building either string: the planner's inner
// loops look GPU types up in the catalog and the network fits by name on every evaluation.
bool same_name(std::string_view a, std::string_view b);
// normalize_name(a) < normalize_name(b), without building either string; NameLess orders a
// map by it, so string_view lookups find keys written in any case or separator.
bool name_less(std::string_view a, std::string_view b);
struct NameLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return name_less(a, b); }
};

}  // namespace flotilla::planner
