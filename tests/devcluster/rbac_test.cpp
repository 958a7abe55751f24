// RBAC enforced for ServiceAccount tokens, against the real devcluster binary: each rule
// dimension (verb, API group, resource, subresource, resourceNames, namespaced vs cluster
// bindings, non-resource URLs) allowed and refused with kube-apiserver's 403, and real
// `kubectl auth can-i --as` agreeing with what the server does.
#include <gtest/gtest.h>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

const char* kRbacYaml = R"(apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: bot, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: worker, namespace: team}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [leader]
  verbs: [get, update, list, watch]
- apiGroups: [""]
  resources: [leases]
  verbs: [create]
- apiGroups: [apps]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: worker, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: worker}
subjects:
- {kind: ServiceAccount, name: bot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cm-reader}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cm-reader, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cm-reader}
subjects:
- {kind: ServiceAccount, name: bot, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-lister}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- nonResourceURLs: [/metrics, /logs/*]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-lister}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-lister}
subjects:
- {kind: ServiceAccount, name: bot, namespace: team}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: other}
data: {a: "1"}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader, namespace: team}
spec: {holderIdentity: "a"}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: follower, namespace: team}
spec: {holderIdentity: "b"}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team}
spec:
  schedulerName: nobody
  containers: [{name: c, image: none}]
)";

// One request the ServiceAccount makes, and the `kubectl auth can-i` arguments that ask the same.
struct Case {
  std::string what;  // the dimension checked
  std::string method, path;
  std::string can_i;  // "" for requests can-i cannot express
  bool allowed;
};

class DevclusterRbac : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DevclusterProcess::have_kubectl()) GTEST_SKIP() << flotilla::testing::tool_missing_message("kubectl");
    ASSERT_TRUE(dc.start()) << dc.log();
    write_text(dc.dir() / "rbac.yaml", kRbacYaml);
    auto applied = dc.kubectl("apply -f " + (dc.dir() / "rbac.yaml").string());
    ASSERT_EQ(applied.exit_code, 0) << applied.output;
    auto token = dc.kubectl("create token bot -n team");
    ASSERT_EQ(token.exit_code, 0) << token.output;
    token_ = token.output;
    while (!token_.empty() && (token_.back() == '\n' || token_.back() == '\r')) token_.pop_back();
    bot_ = dc.make_client(token_);
    ASSERT_TRUE(bot_);
  }

  std::pair<int, Json> as_bot(const std::string& method, const std::string& path, const Json& body = nullptr,
                              const std::string& content_type = "application/json") {
    auto r = bot_->send(method, path, body.is_null() ? "" : body.dump(), content_type);
    if (!r.ok()) return {0, Json{{"transport_error", r.error}}};
    Json j = Json::parse(r.response.body, nullptr, false);
    return {r.response.status, j.is_discarded() ? Json{{"raw", r.response.body}} : j};
  }

  DevclusterProcess dc{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string token_;
  std::unique_ptr<flotilla::kube::net::HttpClient> bot_;
};

}  // namespace

TEST_F(DevclusterRbac, EachRuleDimensionAllowsOrRefusesAndCanIAgrees) {
  const Json status_patch = {{"status", {{"message", "hi"}}}};
  const std::vector<Case> cases = {
      {"verb granted (list)", "GET", "/api/v1/namespaces/team/pods", "list pods -n team", true},
      {"verb granted (get)", "GET", "/api/v1/namespaces/team/pods/p", "get pods/p -n team", true},
      {"verb not granted (delete)", "DELETE", "/api/v1/namespaces/team/pods/p", "delete pods/p -n team", false},
      {"verb not granted (create)", "POST", "/api/v1/namespaces/team/pods", "create pods -n team", false},
      {"deletecollection is its own verb", "DELETE", "/api/v1/namespaces/team/pods", "deletecollection pods -n team", false},
      {"watch is its own verb", "GET", "/api/v1/namespaces/team/pods?watch=true&timeoutSeconds=1", "watch pods -n team", false},
      {"apiGroup wildcard resource", "GET", "/apis/apps/v1/namespaces/team/deployments", "list deployments.apps -n team", true},
      {"same resource, other apiGroup", "POST", "/apis/coordination.k8s.io/v1/namespaces/team/leases",
       "create leases.coordination.k8s.io -n team", false},
      {"resource not granted", "GET", "/api/v1/namespaces/team/services", "list services -n team", false},
      {"subresource granted", "PATCH", "/api/v1/namespaces/team/pods/p/status", "patch pods/p -n team --subresource=status", true},
      {"main resource is not the subresource", "PATCH", "/api/v1/namespaces/team/pods/p", "patch pods/p -n team", false},
      {"resource does not cover subresource", "GET", "/api/v1/namespaces/team/pods/p/log", "get pods/p -n team --subresource=log",
       false},
      {"resourceName granted", "GET", "/apis/coordination.k8s.io/v1/namespaces/team/leases/leader",
       "get leases.coordination.k8s.io/leader -n team", true},
      {"resourceName granted (update)", "PUT", "/apis/coordination.k8s.io/v1/namespaces/team/leases/leader",
       "update leases.coordination.k8s.io/leader -n team", true},
      {"other resourceName", "GET", "/apis/coordination.k8s.io/v1/namespaces/team/leases/follower",
       "get leases.coordination.k8s.io/follower -n team", false},
      {"resourceNames never allow a collection list", "GET", "/apis/coordination.k8s.io/v1/namespaces/team/leases",
       "list leases.coordination.k8s.io -n team", false},
      {"list pinned by metadata.name is by name", "GET",
       "/apis/coordination.k8s.io/v1/namespaces/team/leases?fieldSelector=metadata.name%3Dleader", "", true},
      {"ClusterRole through RoleBinding: its namespace", "GET", "/api/v1/namespaces/team/configmaps/settings",
       "get configmaps/settings -n team", true},
      {"ClusterRole through RoleBinding: not another namespace", "GET", "/api/v1/namespaces/other/configmaps/settings",
       "get configmaps/settings -n other", false},
      {"ClusterRole through RoleBinding: not cluster-wide", "GET", "/api/v1/configmaps", "list configmaps -A", false},
      {"Role: not another namespace", "GET", "/api/v1/namespaces/other/pods", "list pods -n other", false},
      {"ClusterRoleBinding: cluster scope", "GET", "/api/v1/nodes", "list nodes", true},
      {"ClusterRoleBinding: only its verbs", "GET", "/api/v1/nodes/a100-0", "get nodes/a100-0", false},
      {"nonResourceURL exact", "GET", "/metrics", "get /metrics", true},
      {"nonResourceURL prefix", "GET", "/logs/kubelet", "get /logs/kubelet", true},
      {"nonResourceURL not granted", "GET", "/debug/pprof", "get /debug/pprof", false},
      {"discovery for every authenticated user", "GET", "/apis", "get /apis", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what + ": " + c.method + " " + c.path);
    Json body = c.method == "PATCH" ? status_patch : c.method == "PUT" ? Json() : c.method == "POST" ? Json::object() : Json();
    std::string ct = c.method == "PATCH" ? "application/merge-patch+json" : "application/json";
    if (c.method == "PUT") body = dc.call("GET", c.path).second;
    if (c.method == "POST" && c.path.find("leases") != std::string::npos)
      body = {{"metadata", {{"name", "new"}}}, {"spec", Json::object()}};
    auto [code, answer] = as_bot(c.method, c.path, body, ct);
    if (c.allowed) {
      EXPECT_NE(code, 403) << answer.dump();
      EXPECT_NE(code, 401) << answer.dump();
    } else {
      EXPECT_EQ(code, 403) << answer.dump();
      EXPECT_EQ(answer.value("reason", ""), "Forbidden");
      EXPECT_NE(answer.value("message", "").find("User \"system:serviceaccount:team:bot\" cannot "), std::string::npos)
          << answer.dump();
    }
    if (c.can_i.empty()) continue;
    auto can = dc.kubectl("auth can-i " + c.can_i + " --as=system:serviceaccount:team:bot");
    // The answer is the last line (kubectl may warn first, e.g. about cluster-scoped resources).
    std::string out = can.output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    EXPECT_EQ(out.substr(out.rfind('\n') + 1), c.allowed ? "yes" : "no") << can.output;
  }
}

TEST_F(DevclusterRbac, RefusalsReadExactlyAsKubeApiserversAndKubectlShowsThem) {
  auto [c1, named] = as_bot("DELETE", "/api/v1/namespaces/team/pods/p");
  EXPECT_EQ(c1, 403);
  EXPECT_EQ(named.value("message", ""),
            "pods \"p\" is forbidden: User \"system:serviceaccount:team:bot\" cannot delete resource \"pods\" in API group "
            "\"\" in the namespace \"team\"");
  EXPECT_EQ(named["details"].value("kind", ""), "pods");
  EXPECT_EQ(named["details"].value("name", ""), "p");
  auto [c2, cluster] = as_bot("GET", "/apis/apps/v1/deployments");
  EXPECT_EQ(c2, 403);
  EXPECT_EQ(cluster.value("message", ""),
            "deployments.apps is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"deployments\" in "
            "API group \"apps\" at the cluster scope");
  auto [c3, sub] = as_bot("GET", "/api/v1/namespaces/team/pods/p/log");
  EXPECT_EQ(sub.value("message", ""),
            "pods \"p\" is forbidden: User \"system:serviceaccount:team:bot\" cannot get resource \"pods/log\" in API group "
            "\"\" in the namespace \"team\"");
  auto [c4, path] = as_bot("GET", "/debug/pprof");
  EXPECT_EQ(path.value("message", ""), "forbidden: User \"system:serviceaccount:team:bot\" cannot get path \"/debug/pprof\"");

  // A binding to a Role that does not exist says so, as kube-apiserver does.
  ASSERT_EQ(dc.kubectl("create rolebinding dangling -n team --role=missing --serviceaccount=team:bot").exit_code, 0);
  auto [c5, dangling] = as_bot("GET", "/api/v1/namespaces/team/secrets");
  EXPECT_EQ(dangling.value("message", ""),
            "secrets is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"secrets\" in API group "
            "\"\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found");

  // Real kubectl, logged in with the token, prints the server's refusal.
  auto out = run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " + dc.kubeconfig().string() +
                         " --token=" + token_ + " get pods -n other");
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.output.find("Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:team:bot\" "
                            "cannot list resource \"pods\" in API group \"\" in the namespace \"other\""),
            std::string::npos)
      << out.output;
  auto allowed = run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " + dc.kubeconfig().string() +
                             " --token=" + token_ + " get pods -n team");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("p "), std::string::npos) << allowed.output;
}

TEST_F(DevclusterRbac, AccessReviewsImpersonationAndRevocation) {
  // SubjectAccessReview (admin asks about someone else) answers from the rules.
  Json sar = {{"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"},
              {"spec", {{"user", "system:serviceaccount:team:bot"},
                        {"groups", {"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}},
                        {"resourceAttributes", {{"namespace", "team"}, {"verb", "list"}, {"resource", "pods"}}}}}};
  auto [code, review] = dc.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar);
  ASSERT_EQ(code, 201) << review.dump();
  EXPECT_EQ(review["status"]["allowed"], true);
  sar["spec"]["resourceAttributes"]["namespace"] = "other";
  EXPECT_EQ(dc.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar).second["status"]["allowed"], false);
  // The ServiceAccount itself may not ask about others, nor impersonate.
  auto [c2, denied] = as_bot("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar);
  EXPECT_EQ(c2, 403) << denied.dump();
  flotilla::kube::net::HttpRequest req;
  req.method = "GET";
  req.target = "/api/v1/namespaces/other/pods";
  req.headers.set("Impersonate-User", "devcluster-admin");
  req.headers.set("Impersonate-Group", "system:masters");
  auto imp = bot_->send(req);
  ASSERT_TRUE(imp.ok());
  EXPECT_EQ(imp.response.status, 403);
  EXPECT_NE(imp.response.body.find("cannot impersonate resource \\\"users\\\""), std::string::npos) << imp.response.body;
  // The admin impersonating the ServiceAccount gets exactly its rights.
  auto as_sa = dc.kubectl("get pods -n other --as=system:serviceaccount:team:bot");
  EXPECT_NE(as_sa.exit_code, 0);
  EXPECT_NE(as_sa.output.find("Forbidden"), std::string::npos) << as_sa.output;
  EXPECT_EQ(dc.kubectl("get pods -n team --as=system:serviceaccount:team:bot").exit_code, 0);
  // `kubectl auth can-i --list` shows the rules.
  auto list = dc.kubectl("auth can-i --list -n team --as=system:serviceaccount:team:bot");
  EXPECT_NE(list.output.find("leases.coordination.k8s.io"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("[leader]"), std::string::npos) << list.output;
  // kubectl auth whoami shows who a token is.
  auto whoami = run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " + dc.kubeconfig().string() +
                            " --token=" + token_ + " auth whoami");
  EXPECT_NE(whoami.output.find("system:serviceaccount:team:bot"), std::string::npos) << whoami.output;
  EXPECT_NE(whoami.output.find("system:serviceaccounts:team"), std::string::npos) << whoami.output;
  // The admin may do everything.
  EXPECT_EQ(dc.kubectl("auth can-i '*' '*' --all-namespaces").output.substr(0, 3), "yes");

  // Deleting the ServiceAccount revokes its tokens (401), as in Kubernetes; a garbage token too.
  ASSERT_EQ(dc.kubectl("delete serviceaccount bot -n team").exit_code, 0);
  EXPECT_EQ(as_bot("GET", "/api/v1/namespaces/team/pods").first, 401);
  auto garbage = dc.make_client(token_.substr(0, token_.size() - 2) + "xx");
  EXPECT_EQ(garbage->send("GET", "/api/v1/namespaces/team/pods", "", "application/json").response.status, 401);
}

TEST_F(DevclusterRbac, DeleteCollectionDeletesWhatTheSelectorPicks) {
  for (const std::string n : {"a", "b", "c"})
    ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/team/configmaps",
                      {{"metadata", {{"name", "sel-" + n}, {"labels", {{"group", n == "c" ? "keep" : "drop"}}}}}}).first, 201);
  auto [code, deleted] = dc.call("DELETE", "/api/v1/namespaces/team/configmaps?labelSelector=group%3Ddrop");
  ASSERT_EQ(code, 200) << deleted.dump();
  EXPECT_EQ(deleted["kind"], "ConfigMapList");
  EXPECT_EQ(deleted["items"].size(), 2u);
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/team/configmaps/sel-a").first, 404);
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/team/configmaps/sel-c").first, 200);
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/team/configmaps/settings").first, 200);  // no label: not selected
}
