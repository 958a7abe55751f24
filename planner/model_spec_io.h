// Reading a user's model spec (YAML or JSON text; JSON is YAML) and Sailor's training_config.
//
// Guarantees: returns a spec or one line naming the missing/invalid field (integers fit in int,
//   kv_heads divides heads, head_dim >= 1). Fields: name,
//   family (gpt|llama), num_layers, hidden, heads, head_dim, kv_heads, ffn_hidden, vocab,
//   seq_len, max_position_embeddings, tied_embeddings, embed_proj_dim; "preset: X" starts from
//   a preset and overrides the given fields. Sailor's keys (hidden_size, sequence_length,
//   vocab_size, model) are accepted too.
// Assumes: text already read; load_model_spec_file() does the file read (I/O).
#pragma once

#include <string>
#include <string_view>

#include "planner/model_spec.h"
#include "planner/result.h"

namespace flotilla::planner {

Result<ModelSpec> parse_model_spec(std::string_view yaml_or_json_text);
Result<ModelSpec> load_model_spec_file(const std::string& path);

// A preset name, or a path to a spec file.
Result<ModelSpec> resolve_model(const std::string& name_or_path);

}  // namespace flotilla::planner
