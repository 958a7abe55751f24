#include "planner/model_spec_io.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace flotilla::planner {
namespace {

// Reads an integer field under any of its names; false with an error line when invalid.
bool read_int(const YAML::Node& n, std::initializer_list<const char*> keys, int& out,
              std::string& error) {
  for (const char* k : keys) {
    if (!n[k]) continue;
    try {
      const long long v = n[k].as<long long>();
      if (v < 0 || v > std::numeric_limits<int>::max()) {
        error = std::string("model spec: field '") + k + "' is " + (v < 0 ? "negative" : "too large") +
                " (" + std::to_string(v) + "); give a non-negative integer below 2^31";
        return false;
      }
      out = static_cast<int>(v);
    } catch (const YAML::Exception&) {
      error = std::string("model spec: field '") + k + "' is not an integer";
      return false;
    }
    return true;
  }
  return true;
}

}  // namespace

Result<ModelSpec> parse_model_spec(std::string_view text) {
  YAML::Node n;
  try {
    n = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Result<ModelSpec>::failure("model spec does not parse as YAML/JSON: " +
                                      std::string(e.what()));
  }
  if (!n.IsMap()) return Result<ModelSpec>::failure("model spec must be a map of fields");
  ModelSpec m;
  std::string error;
  try {
    if (n["preset"]) {
      auto p = find_preset(n["preset"].as<std::string>());
      if (!p) {
        return Result<ModelSpec>::failure("model spec: unknown preset '" +
                                          n["preset"].as<std::string>() + "'");
      }
      m = *p;
    }
    if (n["name"]) m.name = n["name"].as<std::string>();
    else if (n["model"]) m.name = n["model"].as<std::string>();
    if (n["family"]) {
      const std::string f = normalize_name(n["family"].as<std::string>());
      if (f == "gpt" || f == "gpt2" || f == "opt") m.family = ModelFamily::kGpt;
      else if (f == "llama") m.family = ModelFamily::kLlama;
      else return Result<ModelSpec>::failure("model spec: family must be gpt or llama, not '" + f + "'");
    } else if (n["type"]) {
      m.family = normalize_name(n["type"].as<std::string>()).find("llama") != std::string::npos
                     ? ModelFamily::kLlama
                     : ModelFamily::kGpt;
    }
    if (n["tied_embeddings"]) m.tied_embeddings = n["tied_embeddings"].as<bool>();
    else if (!n["preset"]) m.tied_embeddings = m.family == ModelFamily::kGpt;
  } catch (const YAML::Exception& e) {
    return Result<ModelSpec>::failure(std::string("model spec: bad field value: ") + e.what());
  }
  if (!read_int(n, {"num_layers", "layers"}, m.num_layers, error) ||
      !read_int(n, {"hidden", "hidden_size"}, m.hidden, error) ||
      !read_int(n, {"heads", "num_attention_heads"}, m.heads, error) ||
      !read_int(n, {"head_dim"}, m.head_dim, error) ||
      !read_int(n, {"kv_heads", "num_key_value_heads"}, m.kv_heads, error) ||
      !read_int(n, {"ffn_hidden", "ffn_hidden_size", "intermediate_size"}, m.ffn_hidden, error) ||
      !read_int(n, {"vocab", "vocab_size"}, m.vocab, error) ||
      !read_int(n, {"seq_len", "sequence_length", "seq_length"}, m.seq_len, error) ||
      !read_int(n, {"max_position_embeddings"}, m.max_position_embeddings, error) ||
      !read_int(n, {"embed_proj_dim"}, m.embed_proj_dim, error)) {
    return Result<ModelSpec>::failure(error);
  }
  if (m.head_dim == 0 && m.heads > 0) m.head_dim = m.hidden / m.heads;
  if (m.ffn_hidden == 0) m.ffn_hidden = 4 * m.hidden;
  if (m.family == ModelFamily::kGpt && m.max_position_embeddings == 0) {
    m.max_position_embeddings = m.seq_len;
  }
  const char* missing = m.num_layers <= 0 ? "num_layers"
                        : m.hidden <= 0   ? "hidden"
                        : m.heads <= 0    ? "heads"
                        : m.vocab <= 0    ? "vocab"
                        : m.seq_len <= 0  ? "seq_len"
                                          : nullptr;
  if (missing != nullptr) {
    return Result<ModelSpec>::failure(std::string("model spec: field '") + missing +
                                      "' is missing or not positive");
  }
  // GQA shares each KV head among heads / kv_heads query heads; a shape that does not divide
  // has no meaning, and head_dim 0 (hidden < heads) would plan a model with no attention.
  if (m.head_dim <= 0)
    return Result<ModelSpec>::failure("model spec: hidden (" + std::to_string(m.hidden) +
                                      ") is smaller than heads (" + std::to_string(m.heads) +
                                      "); give head_dim or a larger hidden");
  if (m.kv_heads > 0 && (m.kv_heads > m.heads || m.heads % m.kv_heads != 0))
    return Result<ModelSpec>::failure("model spec: kv_heads (" + std::to_string(m.kv_heads) +
                                      ") must divide heads (" + std::to_string(m.heads) + ")");
  if (m.name.empty()) m.name = "custom";
  return m;
}

Result<ModelSpec> load_model_spec_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Result<ModelSpec>::failure("model spec '" + path + "' is a directory; give a spec file");
  std::ifstream in(path);
  if (!in) return Result<ModelSpec>::failure("cannot read model spec file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_model_spec(ss.str());
  if (!r) return Result<ModelSpec>::failure(path + ": " + r.error());
  return r;
}

Result<ModelSpec> resolve_model(const std::string& name_or_path) {
  if (auto p = find_preset(name_or_path)) return *p;
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return load_model_spec_file(name_or_path);
  return Result<ModelSpec>::failure("unknown model '" + name_or_path + "': give a preset (" + preset_names() +
                                    ") or a spec file path");
}

}  // namespace flotilla::planner
