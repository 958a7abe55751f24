// The profile fit against hand-computed lines, and stage sums against per-block sums.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "planner/network_io.h"
#include "planner/profile.h"
#include "planner/profile_io.h"

namespace fp = flotilla::planner;

TEST(Profile, LinearFitRecoversAnExactLine) {
  // A 4-block toy model whose block times are exactly 1 ms + 2 ms per sample (fwd), twice that bwd.
  fp::GpuProfile p;
  p.model = "GPT-3-175B";
  p.gpu = "A100-40";
  for (int mbs : {1, 2, 4, 8}) {
    std::vector<fp::LayerTimes> blocks(4, fp::LayerTimes{1e-3 + 2e-3 * mbs, 2e-3 + 4e-3 * mbs, 5e-4});
    p.by_mbs_tp[mbs][2] = blocks;
  }
  fp::ProfileSet set;
  set.add(p);
  fp::ModelSpec m = *fp::find_preset("gpt-3-175b");
  m.num_layers = 2;  // 4 blocks
  const fp::GpuType gpu = *fp::builtin_gpu_catalog().find("A100-40");
  fp::ComputeModel cm(&set);
  const fp::LayerTimes t = cm.block_times(m, gpu, 1, 2, 16);  // extrapolated along the line
  EXPECT_NEAR(t.forward_s, 1e-3 + 32e-3, 1e-12);
  EXPECT_NEAR(t.backward_s, 2e-3 + 64e-3, 1e-12);
  EXPECT_NEAR(t.update_s, 5e-4, 1e-15);
  const fp::LayerTimes s = cm.stage_times(m, gpu, 1, 4, 2, 3);
  EXPECT_NEAR(s.forward_s, 3 * (1e-3 + 6e-3), 1e-12);
  // No profile for TP 4: the FLOP estimate, summed per block, equals the stage estimate.
  const fp::LayerTimes e = cm.stage_times(m, gpu, 0, 4, 4, 2);
  double sum = 0;
  for (int b = 0; b < 4; ++b) sum += cm.block_times(m, gpu, b, 4, 2).forward_s;
  EXPECT_NEAR(e.forward_s, sum, 1e-12);
  EXPECT_FALSE(fp::parse_profile_json(R"({"1": {"1": {"0": [1, -2, 3]}}})", "x", "y").ok());
  EXPECT_FALSE(fp::parse_profile_json("[", "x", "y").ok());
}

// A profile of the wrong shape used to say only "does not parse: stoi"; it names the format.
TEST(ProfileIo, WrongShapeNamesTheExpectedFormat) {
  const auto p = fp::parse_profile_json(R"({"1": 5})", "OPT-350M", "A100-40");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("{mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}"), std::string::npos) << p.error();
}

// gcp_communication_cost.json as a list used to load silently as zones "0" and "1".
TEST(NetworkIo, ZoneCostsMustBeAnObjectOfObjects) {
  EXPECT_FALSE(fp::parse_zone_costs("[1, 2]", fp::default_network_model()));
  EXPECT_FALSE(fp::parse_zone_costs(R"({"us-central1-a": 0.01})", fp::default_network_model()));
  const auto ok = fp::parse_zone_costs(R"({"a": {"b": 0.02}})", fp::default_network_model());
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_DOUBLE_EQ(ok.value().usd_per_gb.at("a").at("b"), 0.02);
}

namespace {

// A fresh folder under the build tree for one test's layout.
std::filesystem::path scratch_profiles(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(FLOTILLA_BINARY_DIR) / "profile-io-test" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// One line, naming the offending path and what to do about it.
void expect_one_line(const fp::Result<fp::ProfileSet>& loaded, const std::string& path, const std::string& fix) {
  ASSERT_FALSE(loaded);
  const std::string& error = loaded.error();
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find(fix), std::string::npos) << error;
}

// A profile with `blocks` blocks at mbs 1 and 2, TP 1; block b takes (b + 1) ms forward.
std::string profile_json(int blocks) {
  std::string by_block;
  for (int b = 0; b < blocks; ++b) {
    const double f = 0.001 * (b + 1);
    by_block += (b ? ", \"" : "\"") + std::to_string(b) + "\": [" + std::to_string(f) + ", " + std::to_string(2 * f) +
                ", 0.0001]";
  }
  return "{\"1\": {\"1\": {" + by_block + "}}, \"2\": {\"1\": {" + by_block + "}}}";
}

// OPT-350M has 26 blocks (embedding + 24 layers + head).
const std::string kProfile = profile_json(26);

}  // namespace

TEST(ProfileIo, GoodFolderLoads) {
  const auto dir = scratch_profiles("good");
  write_file(dir / "OPT-350" / "A100-40" / "profile.json", kProfile);
  write_file(dir / "README.md", "notes");
  const auto loaded = fp::load_profile_dir(dir.string());
  ASSERT_TRUE(loaded) << loaded.error();
}

// These used to be skipped silently or to throw out of the library (and the CLI); each is now
// one line naming the path. All of them fail for root too (unlike chmod 000).
TEST(ProfileIo, UnreadableLayoutsGetOneLineNamingThePath) {
  const auto dir = scratch_profiles("bad");
  // --profiles names a file
  write_file(dir / "plain.json", kProfile);
  expect_one_line(fp::load_profile_dir((dir / "plain.json").string()), (dir / "plain.json").string(),
                  "is a file, not a folder");
  // profile.json is a folder
  const auto as_folder = dir / "json-folder";
  std::filesystem::create_directories(as_folder / "OPT-350" / "A100-40" / "profile.json");
  expect_one_line(fp::load_profile_dir(as_folder.string()),
                  (as_folder / "OPT-350" / "A100-40" / "profile.json").string(), "not a regular file");
  // a file where the <gpu> folder should be
  const auto gpu_file = dir / "gpu-file";
  write_file(gpu_file / "OPT-350" / "A100-40", kProfile);
  expect_one_line(fp::load_profile_dir(gpu_file.string()), (gpu_file / "OPT-350" / "A100-40").string(),
                  "is not a folder");
  // a file where the <model> folder should be
  const auto model_file = dir / "model-file";
  write_file(model_file / "OPT-350", kProfile);
  expect_one_line(fp::load_profile_dir(model_file.string()), (model_file / "OPT-350").string(), "is not a folder");
  // profile.json is a broken link
  const auto broken = dir / "broken-link";
  std::filesystem::create_directories(broken / "OPT-350" / "A100-40");
  std::filesystem::create_symlink(broken / "nowhere.json", broken / "OPT-350" / "A100-40" / "profile.json");
  expect_one_line(fp::load_profile_dir(broken.string()), (broken / "OPT-350" / "A100-40" / "profile.json").string(),
                  "broken symbolic link");
}

// Permission denied: only meaningful when not root (root reads through chmod 000).
TEST(ProfileIo, PermissionDeniedGetsOneLine) {
  if (geteuid() == 0) GTEST_SKIP() << "running as root: chmod 000 does not block reads";
  const auto dir = scratch_profiles("denied");
  write_file(dir / "OPT-350" / "A100-40" / "profile.json", kProfile);
  std::filesystem::permissions(dir / "OPT-350", std::filesystem::perms::none);
  const auto loaded = fp::load_profile_dir(dir.string());
  std::filesystem::permissions(dir / "OPT-350", std::filesystem::perms::owner_all);
  expect_one_line(loaded, (dir / "OPT-350").string(), "make it readable");
}

// The shared GPT-Neo GH-96 profile was once a copy of OPT-350's 26 blocks, and the planner timed
// GPT-Neo's blocks 0-25 with OPT's numbers. A block count that is not the model's is refused.
TEST(ProfileIo, BlockCountOfAnotherModelIsRefusedInOneLine) {
  const auto dir = scratch_profiles("mismatch");
  write_file(dir / "GPT-Neo-2.7" / "GH-96" / "profile.json", profile_json(26));
  expect_one_line(fp::load_profile_dir(dir.string()), (dir / "GPT-Neo-2.7" / "GH-96" / "profile.json").string(),
                  "has 26 blocks but GPT-Neo-2.7B has 34 (embedding + 32 layers + head)");
}

// Sailor profiles Llama-3-8B as embedding, 32 layers, final norm, head (35 blocks); the norm is
// folded into the head, so block 33 is norm + head: forward (34 + 35) ms, backward twice that.
TEST(ProfileIo, SeparateFinalNormIsFoldedIntoTheHead) {
  const auto dir = scratch_profiles("llama");
  write_file(dir / "LLAMA-3-8" / "GH-96" / "profile.json", profile_json(35));
  const auto loaded = fp::load_profile_dir(dir.string());
  ASSERT_TRUE(loaded) << loaded.error();
  const auto model = fp::find_preset("llama-3-8b");
  ASSERT_TRUE(model);
  const fp::GpuProfile* p = loaded->find(*model, "GH-96");
  ASSERT_NE(p, nullptr);
  const auto& blocks = p->by_mbs_tp.at(1).at(1);
  ASSERT_EQ(blocks.size(), 34u);
  EXPECT_NEAR(blocks[33].forward_s, 0.034 + 0.035, 1e-12);
  EXPECT_NEAR(blocks[33].backward_s, 2 * (0.034 + 0.035), 1e-12);
  EXPECT_NEAR(blocks[33].update_s, 0.0001, 1e-12);
  EXPECT_NEAR(blocks[32].forward_s, 0.033, 1e-12);
}

// A profile added directly (not through the loader) is never used for a model of another size.
TEST(Profile, FindPassesOverAProfileWithAnotherBlockCount) {
  auto wrong = fp::parse_profile_json(profile_json(26), "GPT-Neo-2.7", "GH-96");
  ASSERT_TRUE(wrong) << wrong.error();
  fp::ProfileSet set;
  set.add(std::move(wrong.value()));
  const auto neo = fp::find_preset("gpt-neo-2.7b");
  ASSERT_TRUE(neo);
  EXPECT_EQ(set.find(*neo, "GH-96"), nullptr);
  EXPECT_NE(fp::profile_block_mismatch(set.all().front(), *neo), "");
}
