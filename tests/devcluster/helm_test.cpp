// Real Helm 4 against the real devcluster binary: a tiny chart (testdata/tiny-chart: a CRD and a
// custom resource, a Deployment with a readiness probe, ServiceAccount, ClusterRole/Binding,
// Role/Binding, Service, ConfigMap, PodDisruptionBudget) installs with server-side apply
// (Helm 4's default) and --wait, upgrades (a dropped label goes away), and uninstalls leaving
// only the CRD; and the server-side apply subset itself over raw PATCH requests.
#include <gtest/gtest.h>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

std::string helper() { return std::string(FLOTILLA_BINARY_DIR) + "/tests/devcluster/devcluster_pod_helper"; }
std::string chart() { return std::string(FLOTILLA_SOURCE_DIR) + "/tests/devcluster/testdata/tiny-chart"; }

class DevclusterHelm : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dc.start()) << dc.log(); }

  CommandResult helm(const std::string& args) {
    const fs::path home = dc.dir() / "helm";
    return run_command("HELM_CACHE_HOME=" + (home / "cache").string() + " HELM_CONFIG_HOME=" + (home / "config").string() +
                       " HELM_DATA_HOME=" + (home / "data").string() + " " + flotilla::testing::tool_path("helm") +
                       " --kubeconfig " + dc.kubeconfig().string() + " " + args);
  }
  int code(const std::string& path) { return dc.call("GET", path).first; }
  Json get(const std::string& path) { return dc.call("GET", path).second; }

  DevclusterProcess dc{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

bool have_helm() {
  return flotilla::testing::tools_installed() ||
         run_command(flotilla::testing::tool_path("helm") + " version --short").exit_code == 0;
}

}  // namespace

TEST_F(DevclusterHelm, TinyChartInstallsUpgradesAndUninstallsWithServerSideApplyAndWait) {
  if (!have_helm()) GTEST_SKIP() << flotilla::testing::tool_missing_message("helm");
  const std::string port = std::to_string(20000 + (getpid() * 7) % 20000);
  const std::string values = " --set helperPath=" + helper() + " --set port=" + port;
  auto t0 = std::chrono::steady_clock::now();
  auto install = helm("install tiny " + chart() + " -n apps --create-namespace --wait --timeout 60s" + values);
  const double install_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(install.exit_code, 0) << install.output << dc.log();
  std::cout << "helm install --wait took " << install_seconds << " s\n";

  // Everything is there, the Deployment is available, and Helm applied server-side.
  Json dep = get("/apis/apps/v1/namespaces/apps/deployments/tiny");
  EXPECT_EQ(dep.value("/status/availableReplicas"_json_pointer, 0), 2) << dep.dump();
  bool applied_by_helm = false;
  for (const auto& m : dep["metadata"].value("managedFields", Json::array()))
    applied_by_helm = applied_by_helm || (m.value("manager", "") == "helm" && m.value("operation", "") == "Apply");
  EXPECT_TRUE(applied_by_helm) << dep["metadata"].dump();
  for (const std::string path : {"/api/v1/namespaces/apps/serviceaccounts/tiny", "/api/v1/namespaces/apps/services/tiny",
                                 "/api/v1/namespaces/apps/configmaps/tiny-config",
                                 "/apis/policy/v1/namespaces/apps/poddisruptionbudgets/tiny",
                                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/tiny-nodes",
                                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tiny-nodes",
                                 "/apis/rbac.authorization.k8s.io/v1/namespaces/apps/roles/tiny-leases",
                                 "/apis/rbac.authorization.k8s.io/v1/namespaces/apps/rolebindings/tiny-leases",
                                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.tiny.flotilla.io",
                                 "/apis/tiny.flotilla.io/v1/namespaces/apps/widgets/tiny"})
    EXPECT_EQ(code(path), 200) << path;
  EXPECT_EQ(get("/api/v1/namespaces/apps/configmaps/tiny-config")["metadata"]["labels"].value("extra", ""), "yes");
  // The chart's RBAC is in force for its ServiceAccount.
  auto can = dc.kubectl("auth can-i update leases.coordination.k8s.io/tiny-leader -n apps --as=system:serviceaccount:apps:tiny");
  EXPECT_EQ(can.output.substr(0, 3), "yes") << can.output;
  can = dc.kubectl("auth can-i update leases.coordination.k8s.io/other -n apps --as=system:serviceaccount:apps:tiny");
  EXPECT_EQ(can.output.substr(0, 2), "no") << can.output;

  // Upgrade: more replicas, new config, a label dropped from the chart (removed server-side).
  auto upgrade = helm("upgrade tiny " + chart() + " -n apps --wait --timeout 60s" + values +
                      " --set replicas=3 --set config=two --set extraLabel=false");
  ASSERT_EQ(upgrade.exit_code, 0) << upgrade.output << dc.log();
  Json cm = get("/api/v1/namespaces/apps/configmaps/tiny-config");
  EXPECT_EQ(cm["data"]["value"], "two");
  EXPECT_FALSE(cm["metadata"]["labels"].contains("extra")) << cm.dump();
  dep = get("/apis/apps/v1/namespaces/apps/deployments/tiny");
  EXPECT_EQ(dep["spec"]["replicas"], 3);
  EXPECT_EQ(dep.value("/status/updatedReplicas"_json_pointer, 0), 3) << dep.dump();
  EXPECT_EQ(dep.value("/status/availableReplicas"_json_pointer, 0), 3) << dep.dump();
  EXPECT_EQ(get("/apis/tiny.flotilla.io/v1/namespaces/apps/widgets/tiny")["spec"]["size"], 3);

  // Uninstall: nothing left but the CRD (Helm never deletes crds/), the pods go with the Deployment.
  auto uninstall = helm("uninstall tiny -n apps --wait --timeout 60s");
  ASSERT_EQ(uninstall.exit_code, 0) << uninstall.output;
  for (const std::string path : {"/apis/apps/v1/namespaces/apps/deployments/tiny", "/api/v1/namespaces/apps/serviceaccounts/tiny",
                                 "/api/v1/namespaces/apps/services/tiny", "/api/v1/namespaces/apps/configmaps/tiny-config",
                                 "/apis/policy/v1/namespaces/apps/poddisruptionbudgets/tiny",
                                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/tiny-nodes",
                                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tiny-nodes",
                                 "/apis/rbac.authorization.k8s.io/v1/namespaces/apps/roles/tiny-leases",
                                 "/apis/rbac.authorization.k8s.io/v1/namespaces/apps/rolebindings/tiny-leases",
                                 "/apis/tiny.flotilla.io/v1/namespaces/apps/widgets/tiny"})
    EXPECT_EQ(code(path), 404) << path;
  EXPECT_EQ(code("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.tiny.flotilla.io"), 200);
  EXPECT_TRUE(eventually([&] { return get("/api/v1/namespaces/apps/pods")["items"].empty(); }, 15s));
  EXPECT_TRUE(get("/api/v1/namespaces/apps/secrets")["items"].empty());  // Helm's release records too

  // The same chart installs client-side too (--server-side=false).
  auto client_side = helm("install tiny " + chart() + " -n apps --server-side=false --wait --timeout 60s" + values);
  EXPECT_EQ(client_side.exit_code, 0) << client_side.output;
  EXPECT_EQ(helm("uninstall tiny -n apps --wait --timeout 60s").exit_code, 0);
}

TEST_F(DevclusterHelm, ServerSideApplyCreatesMergesRemovesDroppedFieldsAndNeedsAFieldManager) {
  const std::string path = "/api/v1/namespaces/default/configmaps/applied";
  const std::string yaml = "application/apply-patch+yaml";
  // No fieldManager: 422 as kube-apiserver answers.
  auto [c0, no_manager] = dc.call("PATCH", path, Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}}, yaml);
  EXPECT_EQ(c0, 422) << no_manager.dump();
  EXPECT_NE(no_manager.value("message", "").find("fieldManager: Required value: is required for apply patch"), std::string::npos);
  // Absent: created (201), with the manager's entry in managedFields. The body may be YAML.
  auto r = dc.http().send("PATCH", path + "?fieldManager=tool-a&force=true",
                          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels: {a: '1', b: '2'}\ndata:\n  x: '1'\n  y: '2'\n",
                          yaml);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.response.status, 201) << r.response.body;
  Json cm = get(path);
  EXPECT_EQ(cm["data"], Json({{"x", "1"}, {"y", "2"}}));
  ASSERT_EQ(cm["metadata"]["managedFields"].size(), 1u);
  EXPECT_EQ(cm["metadata"]["managedFields"][0]["manager"], "tool-a");
  EXPECT_EQ(cm["metadata"]["managedFields"][0]["fieldsV1"]["f:data"], Json({{"f:x", Json::object()}, {"f:y", Json::object()}}));
  // Someone else adds a key with a merge patch; it survives tool-a's next apply.
  ASSERT_EQ(dc.call("PATCH", path, {{"data", {{"z", "3"}}}}, "application/merge-patch+json").first, 200);
  // tool-a applies again without y and label b: they go; x changes; z (not tool-a's) stays.
  auto [c2, again] = dc.call("PATCH", path + "?fieldManager=tool-a",
                             {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "applied"}, {"labels", {{"a", "1"}}}}},
                              {"data", {{"x", "10"}}}},
                             yaml);
  ASSERT_EQ(c2, 200) << again.dump();
  EXPECT_EQ(again["data"], Json({{"x", "10"}, {"z", "3"}}));
  EXPECT_EQ(again["metadata"]["labels"], Json({{"a", "1"}}));
  // A name that is not the URL's is refused.
  auto [c3, wrong] = dc.call("PATCH", path + "?fieldManager=tool-a",
                             {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "other"}}}}, yaml);
  EXPECT_EQ(c3, 400) << wrong.dump();
  // kubectl apply --server-side works against it.
  write_text(dc.dir() / "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: by-kubectl}\ndata: {k: v}\n");
  auto ssa = dc.kubectl("apply --server-side -f " + (dc.dir() / "cm.yaml").string());
  EXPECT_EQ(ssa.exit_code, 0) << ssa.output;
  EXPECT_NE(ssa.output.find("serverside-applied"), std::string::npos) << ssa.output;
  EXPECT_EQ(get("/api/v1/namespaces/default/configmaps/by-kubectl")["data"]["k"], "v");
}
