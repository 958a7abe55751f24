// Test helper: renders helm/flotilla with the real `helm template` and parses the objects, so the
// chart tests assert on what a cluster would receive.
//
// Guarantees: render() returns every non-empty document of the rendered output as JSON (through
//   kube/yaml_json.h, the same YAML reading the project's kubectl-facing code uses), or the exit
//   code and helm's stderr when helm refuses the values. find() returns the one object of a kind
//   and name, or null.
// Assumes: tool_path("helm") is Helm 4 (scripts/install-tools.sh); FLOTILLA_SOURCE_DIR is the repo.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text_file.h"
#include "kube/yaml_json.h"
#include "tests/common/tools.h"
#include "tests/devcluster/devcluster_process.h"

namespace flotilla::helm_test {

namespace fs = std::filesystem;
using Json = nlohmann::json;

inline fs::path chart_dir() { return fs::path(FLOTILLA_SOURCE_DIR) / "helm/flotilla"; }
inline fs::path values_dir() { return fs::path(FLOTILLA_SOURCE_DIR) / "tests/helm/values"; }

using flotilla::read_text;

inline bool helm_available() {
  return devcluster_test::run_command(flotilla::testing::tool_path("helm") + " version --short").exit_code == 0;
}

// Why a chart test skips, or "" when it must run: only a build without scripts/install-tools.sh
// and without helm on PATH skips; once the tools are installed a broken helm fails the test.
inline std::string helm_skip_reason() {
  if (flotilla::testing::tools_installed() || helm_available()) return "";
  return flotilla::testing::tool_missing_message("helm");
}

struct Rendered {
  int exit_code = -1;
  std::string errors;  // helm's stderr
  std::vector<Json> objects;
  Json find(const std::string& kind, const std::string& name = "") const {
    for (const Json& o : objects)
      if (o.value("kind", "") == kind && (name.empty() || o["metadata"].value("name", "") == name)) return o;
    return nullptr;
  }
  int count(const std::string& kind) const {
    int n = 0;
    for (const Json& o : objects) n += o.value("kind", "") == kind;
    return n;
  }
};

// `helm template flotilla helm/flotilla --namespace flotilla-system <args>`; stdout and stderr
// go to separate files (helm logs INFO lines on stderr that are not YAML).
inline Rendered render(const std::string& args, const fs::path& scratch) {
  fs::create_directories(scratch);
  const fs::path out = scratch / "rendered.yaml", err = scratch / "helm.err";
  Rendered r;
  r.exit_code = devcluster_test::run_command("(" + flotilla::testing::tool_path("helm") + " template flotilla " +
                                             chart_dir().string() + " --namespace flotilla-system " + args + " > " +
                                             out.string() + " 2> " + err.string() + ")")
                    .exit_code;
  r.errors = read_text(err);
  std::string error;
  if (r.exit_code == 0 && !kube::parse_yaml_documents(read_text(out), &r.objects, &error))
    r.errors += "rendered output is not YAML: " + error;
  return r;
}

}  // namespace flotilla::helm_test
