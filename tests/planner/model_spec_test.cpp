// Parameter counts of the presets against their published sizes (model cards / papers).
#include <gtest/gtest.h>

#include "planner/model_spec.h"
#include "planner/model_spec_io.h"

namespace fp = flotilla::planner;

namespace {
void expect_params(const char* name, double published, double tolerance) {
  auto m = fp::find_preset(name);
  ASSERT_TRUE(m.has_value()) << name;
  const double n = static_cast<double>(fp::total_params(*m));
  EXPECT_NEAR(n / published, 1.0, tolerance) << name << " counted " << n;
}
}  // namespace

// Tolerance 0.5% where the card gives 3+ significant digits, 2% for the rounded "2.7B"/"30B".
TEST(ModelSpec, PresetsMatchPublishedSizes) {
  expect_params("OPT-350M", 331.2e6, 0.005);  // HF count incl. the 512-wide embedding + projections
  expect_params("GPT-Neo-2.7B", 2.7e9, 0.02);  // HF: 2,651,307,520
  expect_params("OPT-30B", 30.0e9, 0.02);
  expect_params("Llama-3-8B", 8.03e9, 0.005);
  expect_params("Llama-2-7B", 6.74e9, 0.005);
  expect_params("Llama-2-13B", 13.0e9, 0.005);
  expect_params("Llama-2-70B", 68.98e9, 0.005);
  expect_params("GPT-3-175B", 174.6e9, 0.005);
}

TEST(ModelSpec, HandCountedLayers) {
  auto gpt3 = *fp::find_preset("gpt-3-175b");
  EXPECT_EQ(fp::transformer_layer_params(gpt3), 12LL * 12288 * 12288 + 13LL * 12288);
  auto llama = *fp::find_preset("llama-2-7b");
  EXPECT_EQ(fp::transformer_layer_params(llama), 4LL * 4096 * 4096 + 3LL * 4096 * 11008 + 2 * 4096);
}

TEST(ModelSpec, LookupIsCaseInsensitiveWithAliases) {
  EXPECT_EQ(fp::find_preset("llama-3-8b")->name, "Llama-3-8B");
  EXPECT_EQ(fp::find_preset("LLAMA-3-8")->name, "Llama-3-8B");
  EXPECT_EQ(fp::find_preset("OPT-350")->name, "OPT-350M");
  EXPECT_EQ(fp::find_preset("opt_350m")->name, "OPT-350M");
  EXPECT_FALSE(fp::find_preset("gpt-5").has_value());
}

TEST(ModelSpec, ParsesUserSpecAndRejectsBadFields) {
  auto m = fp::parse_model_spec("name: tiny\nfamily: gpt\nnum_layers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq_len: 32\n");
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->head_dim, 16);
  EXPECT_EQ(m->ffn_hidden, 256);
  auto json = fp::parse_model_spec(R"({"preset": "llama-2-7b", "seq_len": 8192})");
  ASSERT_TRUE(json.ok()) << json.error();
  EXPECT_EQ(json->seq_len, 8192);
  EXPECT_EQ(json->num_layers, 32);
  auto neg = fp::parse_model_spec("num_layers: -3\nhidden: 64\nheads: 4\nvocab: 100\nseq_len: 32\n");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.error().find("num_layers"), std::string::npos);
  EXPECT_FALSE(fp::parse_model_spec("hidden: 64\n").ok());
  EXPECT_FALSE(fp::parse_model_spec("{not yaml: [").ok());
  EXPECT_FALSE(fp::resolve_model("no-such-model").ok());
}

// Shapes that mean nothing used to plan silently: kv_heads 7 of 3 heads, head_dim 1/4 -> 0.
TEST(ModelSpecIo, RejectsKvHeadsThatDoNotDivideHeadsAndHiddenBelowHeads) {
  const auto gqa = fp::parse_model_spec("num_layers: 2\nhidden: 12\nheads: 3\nvocab: 100\nseq_len: 16\nkv_heads: 7\n");
  ASSERT_FALSE(gqa);
  EXPECT_NE(gqa.error().find("kv_heads (7) must divide heads (3)"), std::string::npos) << gqa.error();
  const auto narrow = fp::parse_model_spec("num_layers: 2\nhidden: 1\nheads: 4\nvocab: 100\nseq_len: 16\n");
  ASSERT_FALSE(narrow);
  EXPECT_NE(narrow.error().find("smaller than heads"), std::string::npos) << narrow.error();
  EXPECT_TRUE(fp::parse_model_spec("num_layers: 2\nhidden: 12\nheads: 4\nvocab: 100\nseq_len: 16\nkv_heads: 2\n"));
}

// The reference worker's models are planner presets too (common/reference_models.h), with the
// worker's parameter layout: untied head, learned positions, biases. "small" by hand:
// embedding 256x64 + 64x64 = 20480; a layer: 2 LayerNorms 256 + QKV 64x192+192 + proj 64x64+64 +
// MLP 64x256+256 + 256x64+64 = 49984, x4 = 199936; head: LayerNorm 128 + 256x64 = 16512.
// gpt-125m: the count the worker's own test asserts (tests/worker/model_test.cpp).
TEST(ModelSpec, ReferenceWorkerModelsMatchTheWorkersParameterCounts) {
  const auto small = fp::find_preset("small");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->num_blocks(), 6);
  EXPECT_EQ(fp::total_params(*small), 20480 + 199936 + 16512);
  const auto gpt125 = fp::find_preset("gpt-125m");
  ASSERT_TRUE(gpt125);
  EXPECT_EQ(fp::total_params(*gpt125), 134994432);
  EXPECT_TRUE(fp::find_preset("tiny"));
}

// same_name() is normalize_name() equality without the strings: checked on every pair of a set
// that has case, '_' / ' ' / '-' variants, prefixes and non-ASCII bytes.
TEST(ModelSpecNames, SameNameAgreesWithNormalizedEquality) {
  const std::vector<std::string> names = {"A100-80",  "a100_80", "A100 80", "a100-80g", "A100-8",  "",
                                          "H100",     "h100",    "Llama-2-7B", "llama_2_7b", "LLAMA 2 7B",
                                          "ünïcødé",  "ÜNÏCØDÉ", "gpt-3-175b", "GPT-3-175B-"};
  for (const auto& a : names)
    for (const auto& b : names)
      EXPECT_EQ(flotilla::planner::same_name(a, b),
                flotilla::planner::normalize_name(a) == flotilla::planner::normalize_name(b))
          << "'" << a << "' vs '" << b << "'";
}
