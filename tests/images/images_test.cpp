// The container images (docs/images.md), built from this build tree by scripts/build-images.sh
// (the `images` target's script) and checked without running a container, which these machines
// cannot do: each OCI archive is inspected with skopeo, unpacked with umoci, and its root
// filesystem and config are compared with what docs/images.md promises.
//
// The expectations are independent of the build scripts: the version is CMake's project
// version, the revision is asked of git here, library resolution is checked twice, once by
// walking DT_NEEDED (readelf) through the rootfs's library folders and once by the rootfs's own
// loader (`ld.so --list` under chroot), and the programs are run under chroot as 65532:65532.
//
// Registered as one ctest test (the images are built once, ~40 s, for all cases). Skips with the
// reason when buildah/podman, skopeo or umoci is missing (scripts/install-deps.sh installs them);
// the chroot cases skip when not run as root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text_file.h"
#include "process/spawn.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kWorkDir = fs::path(FLOTILLA_BINARY_DIR) / "tests-tmp" / "images";
const std::string kRepositoryPrefix = "ghcr.io/flotilla-dev/";
const std::string kPath = "PATH=/usr/local/bin:/usr/bin:/bin";

struct ImageSpec {
  std::string name;                   // flotilla-operator
  std::string entrypoint;             // the config's Entrypoint[0]
  std::vector<std::string> programs;  // in /usr/local/bin
  std::vector<std::string> env;       // config Env entries that must be there
};

const std::vector<ImageSpec>& image_specs() {
  static const std::vector<ImageSpec> specs = {
      {"flotilla-operator", "/usr/local/bin/flotilla-operator", {"flotilla-operator"}, {kPath}},
      {"flotilla-worker",
       "/usr/local/bin/flotilla-sidecar",
       {"flotilla-sidecar", "flotilla-worker"},
       {kPath, "NVIDIA_DRIVER_CAPABILITIES=compute,utility"}},
  };
  return specs;
}

struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// argv as given (no shell), output captured in a file, bounded in time.
CommandRun run(const std::vector<std::string>& argv, std::chrono::seconds limit = std::chrono::seconds(300)) {
  static int counter = 0;
  const fs::path log = kWorkDir / ("run-" + std::to_string(counter++) + ".log");
  flotilla::process::SpawnOptions options;
  options.argv = argv;
  options.stdout_path = log;
  options.stderr_path = log;
  options.exec_failure = flotilla::process::ExecFailure::kExit;
  auto child = flotilla::process::spawn(options);
  auto status = child.wait_for(limit);
  CommandRun r;
  if (!status) {
    child.terminate(std::chrono::seconds(2));
    r.output = "timed out after " + std::to_string(limit.count()) + " s: " + argv[0];
    return r;
  }
  r.exit_code = status->shell_code();
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  fs::remove(log);
  return r;
}

std::string find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin";  // chroot lives in sbin, which a user's PATH may lack
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return (fs::path(dir) / name).string();
  }
  return "";
}

using flotilla::read_text;

// "KEY=value" lines of build/images/inputs.env (what CMake told the image scripts).
std::map<std::string, std::string> build_inputs() {
  std::map<std::string, std::string> inputs;
  std::stringstream lines(read_text(fs::path(FLOTILLA_BINARY_DIR) / "images" / "inputs.env"));
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    inputs[line.substr(0, eq)] = value;
  }
  return inputs;
}

std::string archive_of(const ImageSpec& image) {
  return (kWorkDir / "out" / (image.name + "-" + FLOTILLA_VERSION + ".tar")).string();
}
fs::path rootfs_of(const ImageSpec& image) { return kWorkDir / "unpacked" / image.name / "rootfs"; }
// What images/stage-rootfs.sh assembled: the build context of the Containerfile.
fs::path staged_of(const ImageSpec& image) {
  return kWorkDir / "out" / image.name.substr(std::string("flotilla-").size()) / "rootfs";
}

bool is_elf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

// The lines of `readelf` output that carry "[value]" after `marker`.
std::vector<std::string> readelf_values(const std::string& flag, const fs::path& file, const std::string& marker) {
  std::vector<std::string> values;
  std::stringstream lines(run({find_program("readelf"), flag, "-W", file.string()}).output);
  for (std::string line; std::getline(lines, line);) {
    auto at = line.find(marker);
    if (at == std::string::npos) continue;
    auto open = line.find('[', at), close = line.rfind(']');
    if (open != std::string::npos && close != std::string::npos && close > open)
      values.push_back(line.substr(open + 1, close - open - 1));
  }
  return values;
}

// Where the image's loader looks without an ld.so.cache: the multiarch and plain folders.
const std::vector<std::string> kLibraryDirs = {"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib",
                                               "lib64", "usr/lib64"};

// Relative links resolve the same from the host as inside the image, so the checks here that
// follow them look inside the image.
bool all_symlinks_relative(const fs::path& root) {
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_symlink() && fs::read_symlink(e.path()).is_absolute()) return false;
  }
  return true;
}

class ImagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string builder = find_program("buildah");
    if (builder.empty()) builder = find_program("podman");
    if (builder.empty()) {
      skip_reason_ = "neither buildah nor podman is installed: run scripts/install-deps.sh (make test does)";
      return;
    }
    for (const char* tool : {"skopeo", "umoci", "readelf"}) {
      if (find_program(tool).empty()) {
        skip_reason_ = std::string(tool) + " is not installed: run scripts/install-deps.sh (make test does)";
        return;
      }
    }
    fs::remove_all(kWorkDir);
    fs::create_directories(kWorkDir / "unpacked");
    const auto t0 = std::chrono::steady_clock::now();
    CommandRun built = run({std::string(FLOTILLA_SOURCE_DIR) + "/scripts/build-images.sh", "--build-dir", FLOTILLA_BINARY_DIR,
                     "--out", (kWorkDir / "out").string()},
                    std::chrono::seconds(420));
    build_output_ = built.output;
    if (built.exit_code != 0) {
      build_error_ = "scripts/build-images.sh failed (" + std::to_string(built.exit_code) + "):\n" + built.output;
      return;
    }
    for (const auto& image : image_specs()) {
      // An oci-archive is an OCI image layout in a tar; umoci unpacks the layout's one ref.
      const fs::path layout = kWorkDir / "layout" / image.name;
      fs::create_directories(layout);
      CommandRun untar = run({"tar", "-xf", archive_of(image), "-C", layout.string()});
      CommandRun unpack = run({find_program("umoci"), "unpack", "--rootless", "--image",
                        layout.string() + ":" + kRepositoryPrefix + image.name + ":" + FLOTILLA_VERSION,
                        (kWorkDir / "unpacked" / image.name).string()});
      if (untar.exit_code != 0 || unpack.exit_code != 0) {
        build_error_ = "unpacking " + archive_of(image) + " failed:\n" + untar.output + unpack.output;
        return;
      }
    }
    std::printf("images built and unpacked in %.1f s:\n%s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                build_output_.c_str());
  }

  static void TearDownTestSuite() {
    // The worker image is ~0.6 GB packed and ~0.8 GB unpacked (three copies here): keep the
    // disk of a CI machine free unless asked to keep them.
    if (std::getenv("FLOTILLA_KEEP_IMAGE_TEST") == nullptr) fs::remove_all(kWorkDir);
  }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_TRUE(build_error_.empty()) << build_error_;
  }

  static void skip_unless_root() {
    if (::geteuid() != 0) GTEST_SKIP() << "chroot needs root (run the test as root, as CI does)";
    if (find_program("chroot").empty()) GTEST_SKIP() << "chroot (coreutils) is not installed";
  }

  static inline std::string skip_reason_, build_error_, build_output_;
};

TEST_F(ImagesTest, SkopeoInspectsBothArchivesAsLinuxAmd64) {
  for (const auto& image : image_specs()) {
    CommandRun inspect = run({find_program("skopeo"), "inspect", "oci-archive:" + archive_of(image)});
    ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
    json j = json::parse(inspect.output);
    EXPECT_EQ(j.at("Os"), "linux") << image.name;
    EXPECT_EQ(j.at("Architecture"), "amd64") << image.name;
    EXPECT_EQ(j.at("Layers").size(), 1u) << image.name << ": one COPY, one layer";
    // The archive's ref is the chart's default repository and tag.
    json index = json::parse(run({"tar", "-xOf", archive_of(image), "index.json"}).output);
    EXPECT_EQ(index.at("manifests").at(0).at("annotations").at("org.opencontainers.image.ref.name"),
              kRepositoryPrefix + image.name + ":" + FLOTILLA_VERSION);
  }
}

TEST_F(ImagesTest, ConfigHasTheDocumentedUserEntrypointEnvAndLabels) {
  CommandRun head = run({"git", "-C", FLOTILLA_SOURCE_DIR, "rev-parse", "HEAD"});
  const std::string revision = head.exit_code == 0 ? head.output.substr(0, 40) : "unknown";
  for (const auto& image : image_specs()) {
    SCOPED_TRACE(image.name);
    CommandRun inspect = run({find_program("skopeo"), "inspect", "--config", "oci-archive:" + archive_of(image)});
    ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
    const json config = json::parse(inspect.output).at("config");
    EXPECT_EQ(config.at("User"), "65532:65532");
    EXPECT_EQ(config.at("Entrypoint"), json::array({image.entrypoint}));
    for (const auto& env : image.env) EXPECT_NE(std::find(config.at("Env").begin(), config.at("Env").end(), env), config.at("Env").end()) << env;
    const json labels = config.at("Labels");
    EXPECT_EQ(labels.at("org.opencontainers.image.title"), image.name);
    EXPECT_EQ(labels.at("org.opencontainers.image.version"), FLOTILLA_VERSION);
    EXPECT_EQ(labels.at("org.opencontainers.image.source"), "https://github.com/flotilla-dev/flotilla");
    EXPECT_EQ(labels.at("org.opencontainers.image.licenses"), "Apache-2.0");
    EXPECT_FALSE(labels.at("org.opencontainers.image.description").get<std::string>().empty());
    // The commit, with "-dirty" when the tree had uncommitted changes to tracked files.
    EXPECT_EQ(labels.at("org.opencontainers.image.revision").get<std::string>().substr(0, revision.size()), revision);
  }
}

TEST_F(ImagesTest, RootFilesystemIsExactlyTheStagedOneAndReadOnlyForTheUser) {
  for (const auto& image : image_specs()) {
    SCOPED_TRACE(image.name);
    const fs::path root = rootfs_of(image), staged = staged_of(image);
    // Same paths, types, sizes and link targets as the folder the Containerfile COPYs, so the
    // offline build and a `podman build` of the same Containerfile carry the same files.
    auto listing = [](const fs::path& dir) {
      std::map<std::string, std::string> entries;
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        std::string what = e.is_symlink()        ? "link " + fs::read_symlink(e.path()).string()
                           : e.is_directory()    ? "dir"
                                                 : "file " + std::to_string(fs::file_size(e.path()));
        entries[fs::relative(e.path(), dir).string()] = what;
      }
      return entries;
    };
    EXPECT_EQ(listing(root), listing(staged));
    // Nothing writable by the image's user but /tmp (sticky, like any /tmp).
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (e.is_symlink()) continue;
      const auto perms = fs::status(e.path()).permissions();
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel == "tmp") {
        EXPECT_EQ(perms, fs::perms::all | fs::perms::sticky_bit);
        continue;
      }
      EXPECT_EQ(perms & (fs::perms::group_write | fs::perms::others_write), fs::perms::none) << rel;
    }
    EXPECT_TRUE(all_symlinks_relative(root));
    const std::string passwd = read_text(root / "etc" / "passwd");
    EXPECT_NE(passwd.find("flotilla:x:65532:65532:"), std::string::npos) << passwd;
    EXPECT_NE(read_text(root / "etc" / "group").find("flotilla:x:65532:"), std::string::npos);
    EXPECT_GT(fs::file_size(root / "etc/ssl/certs/ca-certificates.crt"), 1000u);
    for (const auto& program : image.programs) EXPECT_TRUE(fs::is_regular_file(root / "usr/local/bin" / program)) << program;
  }
}

// DT_NEEDED of every ELF file in the image (programs and libraries, the dlopen'ed NCCL
// included), looked up in the image's own library folders, and each program's PT_INTERP.
TEST_F(ImagesTest, EveryElfFilesLibrariesAreInTheImage) {
  const auto inputs = build_inputs();
  for (const auto& image : image_specs()) {
    SCOPED_TRACE(image.name);
    const fs::path root = rootfs_of(image);
    int elf_files = 0;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (e.is_symlink() || !e.is_regular_file() || !is_elf(e.path())) continue;
      ++elf_files;
      const std::string rel = fs::relative(e.path(), root).string();
      for (const auto& needed : readelf_values("-d", e.path(), "(NEEDED)")) {
        bool found = false;
        for (const auto& dir : kLibraryDirs) found = found || fs::exists(root / dir / needed);
        EXPECT_TRUE(found) << rel << " needs " << needed << ", which is in none of the image's library folders";
      }
      for (const auto& interp : readelf_values("-l", e.path(), "Requesting program interpreter")) {
        EXPECT_TRUE(fs::exists(root / fs::path(interp).relative_path())) << rel << ": loader " << interp;
      }
    }
    EXPECT_GE(elf_files, 4) << "the programs, libc, libstdc++ and the loader at least";
    // What the worker dlopen()s is in the image under the name it opens (libnccl.so.2).
    if (image.name == "flotilla-worker" && !inputs.at("WORKER_DLOPEN_LIBRARIES").empty()) {
      EXPECT_TRUE(fs::exists(root / "usr/lib/x86_64-linux-gnu/libnccl.so.2"));
    }
  }
}

// The image's own loader resolves every program and dlopen'ed library inside the root.
TEST_F(ImagesTest, ImageLoaderResolvesEveryProgramUnderChroot) {
  skip_unless_root();
  const auto inputs = build_inputs();
  for (const auto& image : image_specs()) {
    SCOPED_TRACE(image.name);
    std::vector<std::string> files;
    for (const auto& program : image.programs) files.push_back("/usr/local/bin/" + program);
    if (image.name == "flotilla-worker" && !inputs.at("WORKER_DLOPEN_LIBRARIES").empty())
      files.push_back("/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    for (const auto& file : files) {
      CommandRun list = run({"env", "-i", kPath, find_program("chroot"), "--userspec=65532:65532", rootfs_of(image).string(),
                      "/lib64/ld-linux-x86-64.so.2", "--list", file});
      EXPECT_EQ(list.exit_code, 0) << file << ":\n" << list.output;
      EXPECT_EQ(list.output.find("not found"), std::string::npos) << file << ":\n" << list.output;
      EXPECT_NE(list.output.find("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6"), std::string::npos) << list.output;
    }
  }
}

TEST_F(ImagesTest, ProgramsRunUnderChrootAsTheImageUser) {
  skip_unless_root();
  const ImageSpec& operator_image = image_specs().at(0);
  const ImageSpec& worker_image = image_specs().at(1);
  auto in_image = [](const ImageSpec& image, std::vector<std::string> argv) {
    std::vector<std::string> full = {"env", "-i", kPath, find_program("chroot"), "--userspec=65532:65532",
                                     rootfs_of(image).string()};
    full.insert(full.end(), argv.begin(), argv.end());
    return run(full, std::chrono::seconds(60));
  };
  CommandRun op = in_image(operator_image, {"flotilla-operator", "--version"});
  EXPECT_EQ(op.exit_code, 0) << op.output;
  EXPECT_EQ(op.output, std::string("flotilla-operator ") + FLOTILLA_VERSION + "\n");
  CommandRun sidecar = in_image(worker_image, {"flotilla-sidecar", "--version"});
  EXPECT_EQ(sidecar.exit_code, 0) << sidecar.output;
  EXPECT_EQ(sidecar.output, std::string("flotilla-sidecar ") + FLOTILLA_VERSION + "\n");
  // The worker has no --version; its usage proves it loads (cudart and cuBLAS included when
  // built with CUDA: they load without a GPU).
  CommandRun worker = in_image(worker_image, {"flotilla-worker", "--help"});
  EXPECT_EQ(worker.exit_code, 0) << worker.output;
  EXPECT_EQ(worker.output.rfind("usage: flotilla-worker", 0), 0u) << worker.output;
}

}  // namespace
