// devcluster's REST semantics over HTTPS with the kube/net client: error codes and Status
// bodies, optimistic concurrency, generation, finalizers, owner GC, patches, list/watch.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

const Json kCrd = Json::parse(R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.io"},
  "spec": {"group": "example.io", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
      "selectableFields": [{"jsonPath": ".spec.color"}],
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
          "size": {"type": "integer", "maximum": 10},
          "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}})");

Json widget(const std::string& name, Json spec) {
  return {{"apiVersion", "example.io/v1"}, {"kind", "Widget"}, {"metadata", {{"name", name}}}, {"spec", spec}};
}

const std::string kWidgets = "/apis/example.io/v1/namespaces/default/widgets";

class DevclusterApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dc_ = new DevclusterProcess("api");
    ASSERT_TRUE(dc_->start()) << read_text(dc_->dir() / "devcluster.log");
    auto [code, body] = dc_->call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd);
    ASSERT_EQ(code, 201) << body.dump();
  }
  static void TearDownTestSuite() {
    delete dc_;
    dc_ = nullptr;
  }
  static DevclusterProcess* dc_;
};
DevclusterProcess* DevclusterApi::dc_ = nullptr;

}  // namespace

TEST_F(DevclusterApi, MissingOrWrongTokenIs401WithStatus) {
  auto anonymous = dc_->make_client("");
  auto r = anonymous->get("/api/v1/namespaces");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.status, 401);
  Json s = Json::parse(r.response.body);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["reason"], "Unauthorized");
  EXPECT_EQ(dc_->make_client("wrong-token")->get("/api/v1/pods").response.status, 401);
  EXPECT_EQ(anonymous->get("/version").response.status, 200);  // public, as in Kubernetes
}

TEST_F(DevclusterApi, BadRequestsGetTheRightCodesAndStatusBodies) {
  auto r = dc_->http().send("POST", "/api/v1/namespaces/default/configmaps", "{not json");
  EXPECT_EQ(r.response.status, 400);
  EXPECT_EQ(Json::parse(r.response.body)["reason"], "BadRequest");

  auto [c404, b404] = dc_->call("GET", "/apis/example.io/v1/namespaces/default/gadgets");
  EXPECT_EQ(c404, 404);
  EXPECT_EQ(b404["kind"], "Status");
  auto [c404b, b404b] = dc_->call("GET", kWidgets + "/nope");
  EXPECT_EQ(c404b, 404);
  EXPECT_EQ(b404b["reason"], "NotFound");
  EXPECT_EQ(b404b["details"]["name"], "nope");

  auto [c422, b422] = dc_->call("POST", kWidgets, widget("w-bad", {{"size", 11}, {"color", "green"}}));
  EXPECT_EQ(c422, 422) << b422.dump();
  EXPECT_EQ(b422["reason"], "Invalid");
  std::set<std::string> fields;
  for (const auto& c : b422["details"]["causes"]) fields.insert(c["field"].get<std::string>());
  EXPECT_EQ(fields, (std::set<std::string>{"spec.size", "spec.color"})) << b422.dump();

  auto [cmiss, bmiss] = dc_->call("POST", kWidgets, widget("w-missing", Json::object()));
  EXPECT_EQ(cmiss, 422);
  EXPECT_EQ(bmiss["details"]["causes"][0]["field"], "spec.size");
  EXPECT_EQ(bmiss["details"]["causes"][0]["reason"], "FieldValueRequired");

  // Strict field validation refuses unknown fields; the default prunes them.
  auto [cstrict, bstrict] = dc_->call("POST", kWidgets + "?fieldValidation=Strict", widget("w-strict", {{"size", 1}, {"shape", "x"}}));
  EXPECT_EQ(cstrict, 400) << bstrict.dump();
  EXPECT_NE(bstrict["message"].get<std::string>().find("unknown field \"spec.shape\""), std::string::npos);
  auto [cprune, bprune] = dc_->call("POST", kWidgets, widget("w-pruned", {{"size", 1}, {"shape", "x"}}));
  EXPECT_EQ(cprune, 201);
  EXPECT_FALSE(bprune["spec"].contains("shape"));
  EXPECT_EQ(bprune["spec"]["color"], "red") << "schema default applied";

  auto [cdup, bdup] = dc_->call("POST", kWidgets, widget("w-pruned", {{"size", 2}}));
  EXPECT_EQ(cdup, 409);
  EXPECT_EQ(bdup["reason"], "AlreadyExists");

  auto [cns, bns] = dc_->call("POST", "/api/v1/namespaces/nowhere/configmaps", Json{{"metadata", {{"name", "x"}}}});
  EXPECT_EQ(cns, 404) << bns.dump();

  // kubectl exec/attach/port-forward ask for subresources devcluster lacks: a Status naming it.
  auto [cexec, bexec] = dc_->call("POST", "/api/v1/namespaces/default/pods/any/exec?command=true");
  EXPECT_EQ(cexec, 404) << bexec.dump();
  EXPECT_EQ(bexec["kind"], "Status");
  EXPECT_NE(bexec["message"].get<std::string>().find("devcluster does not implement pods/exec"), std::string::npos)
      << bexec.dump();
}

TEST_F(DevclusterApi, OptimisticConcurrencyAndGeneration) {
  auto [c, created] = dc_->call("POST", kWidgets, widget("w-occ", {{"size", 1}}));
  ASSERT_EQ(c, 201);
  EXPECT_EQ(created["metadata"]["generation"], 1);
  Json stale = created;
  Json next = created;
  next["spec"]["size"] = 2;
  auto [c1, v2] = dc_->call("PUT", kWidgets + "/w-occ", next);
  ASSERT_EQ(c1, 200) << v2.dump();
  EXPECT_EQ(v2["metadata"]["generation"], 2);
  EXPECT_GT(std::stoull(v2["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(created["metadata"]["resourceVersion"].get<std::string>()));
  stale["spec"]["size"] = 3;
  auto [c2, conflict] = dc_->call("PUT", kWidgets + "/w-occ", stale);
  EXPECT_EQ(c2, 409);
  EXPECT_EQ(conflict["reason"], "Conflict");
  // Status changes do not bump generation; spec changes through /status are ignored.
  Json st = v2;
  st["status"] = {{"ready", true}};
  st["spec"]["size"] = 9;
  auto [c3, v3] = dc_->call("PUT", kWidgets + "/w-occ/status", st);
  ASSERT_EQ(c3, 200) << v3.dump();
  EXPECT_EQ(v3["metadata"]["generation"], 2);
  EXPECT_EQ(v3["status"]["ready"], true);
  EXPECT_EQ(v3["spec"]["size"], 2);
  // A no-op update keeps the resourceVersion.
  auto [c4, v4] = dc_->call("PUT", kWidgets + "/w-occ", v3);
  EXPECT_EQ(c4, 200);
  EXPECT_EQ(v4["metadata"]["resourceVersion"], v3["metadata"]["resourceVersion"]);
}

TEST_F(DevclusterApi, PatchesMergeJsonAndStrategic) {
  Json pod = {{"metadata", {{"name", "p-patch"}}},
              {"spec", {{"schedulerName", "nobody"},
                        {"containers", Json::array({{{"name", "main"}, {"image", "x"}, {"env", Json::array({{{"name", "A"}, {"value", "1"}}})}},
                                                    {{"name", "side"}, {"image", "y"}}})}}}};
  auto [c, created] = dc_->call("POST", "/api/v1/namespaces/default/pods", pod);
  ASSERT_EQ(c, 201) << created.dump();
  // Strategic merge: containers merge by name, env by name.
  Json smp = {{"spec", {{"containers", Json::array({{{"name", "main"}, {"env", Json::array({{{"name", "B"}, {"value", "2"}}})}}})}}}};
  auto [c1, p1] = dc_->call("PATCH", "/api/v1/namespaces/default/pods/p-patch", smp, "application/strategic-merge-patch+json");
  ASSERT_EQ(c1, 200) << p1.dump();
  ASSERT_EQ(p1["spec"]["containers"].size(), 2u);
  EXPECT_EQ(p1["spec"]["containers"][0]["env"].size(), 2u);
  EXPECT_EQ(p1["spec"]["containers"][1]["image"], "y");
  // JSON patch with a test op; a failing test is refused.
  Json jp = Json::array({{{"op", "test"}, {"path", "/spec/containers/1/name"}, {"value", "side"}},
                         {{"op", "replace"}, {"path", "/spec/containers/1/image"}, {"value", "z"}}});
  auto [c2, p2] = dc_->call("PATCH", "/api/v1/namespaces/default/pods/p-patch", jp, "application/json-patch+json");
  ASSERT_EQ(c2, 200) << p2.dump();
  EXPECT_EQ(p2["spec"]["containers"][1]["image"], "z");
  Json bad = Json::array({{{"op", "test"}, {"path", "/spec/containers/1/name"}, {"value", "nope"}}});
  EXPECT_EQ(dc_->call("PATCH", "/api/v1/namespaces/default/pods/p-patch", bad, "application/json-patch+json").first, 422);
  // Merge patch with null removes a key; strategic merge on a CR is refused like Kubernetes does.
  auto [c3, p3] = dc_->call("PATCH", "/api/v1/namespaces/default/pods/p-patch",
                            Json{{"metadata", {{"labels", {{"a", "b"}}}}}}, "application/merge-patch+json");
  EXPECT_EQ(p3["metadata"]["labels"]["a"], "b");
  auto [c4, p4] = dc_->call("PATCH", "/api/v1/namespaces/default/pods/p-patch",
                            Json{{"metadata", {{"labels", {{"a", nullptr}}}}}}, "application/merge-patch+json");
  EXPECT_FALSE(p4["metadata"].contains("labels") && p4["metadata"]["labels"].contains("a"));
  dc_->call("POST", kWidgets, widget("w-smp", {{"size", 1}}));
  EXPECT_EQ(dc_->call("PATCH", kWidgets + "/w-smp", Json{{"spec", {{"size", 2}}}}, "application/strategic-merge-patch+json").first, 415);
}

TEST_F(DevclusterApi, FinalizersHoldDeletionAndOwnersCascade) {
  Json w = widget("w-fin", {{"size", 1}});
  w["metadata"]["finalizers"] = Json::array({"example.io/hold"});
  auto [c, created] = dc_->call("POST", kWidgets, w);
  ASSERT_EQ(c, 201);
  Json cm = {{"metadata", {{"name", "owned-by-w-fin"},
                           {"ownerReferences", Json::array({{{"apiVersion", "example.io/v1"}, {"kind", "Widget"}, {"name", "w-fin"},
                                                             {"uid", created["metadata"]["uid"]}}})}}},
             {"data", {{"k", "v"}}}};
  ASSERT_EQ(dc_->call("POST", "/api/v1/namespaces/default/configmaps", cm).first, 201);
  auto [cd, deleting] = dc_->call("DELETE", kWidgets + "/w-fin");
  EXPECT_EQ(cd, 200);
  EXPECT_TRUE(deleting["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(dc_->call("GET", kWidgets + "/w-fin").first, 200) << "the finalizer holds it";
  auto [cp, removed] = dc_->call("PATCH", kWidgets + "/w-fin", Json{{"metadata", {{"finalizers", nullptr}}}},
                                 "application/merge-patch+json");
  EXPECT_EQ(cp, 200) << removed.dump();
  EXPECT_EQ(dc_->call("GET", kWidgets + "/w-fin").first, 404);
  EXPECT_TRUE(eventually([&] { return dc_->call("GET", "/api/v1/namespaces/default/configmaps/owned-by-w-fin").first == 404; }))
      << "background cascade deletes the dependent";
}

TEST_F(DevclusterApi, ListSelectorsAndPaging) {
  for (int i = 0; i < 7; ++i) {
    Json cm = {{"metadata", {{"name", "page-" + std::to_string(i)}, {"labels", {{"set", "paging"}, {"parity", i % 2 ? "odd" : "even"}}}}}};
    ASSERT_EQ(dc_->call("POST", "/api/v1/namespaces/default/configmaps", cm).first, 201);
  }
  auto [c, odd] = dc_->call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=set%3Dpaging%2Cparity%21%3Deven");
  EXPECT_EQ(odd["items"].size(), 3u);
  auto [c2, in] = dc_->call("GET", "/api/v1/configmaps?labelSelector=parity+in+(odd)");
  EXPECT_EQ(in["items"].size(), 3u) << "cluster-wide list";
  auto [c3, byname] = dc_->call("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dpage-4");
  ASSERT_EQ(byname["items"].size(), 1u);
  EXPECT_EQ(byname["items"][0]["metadata"]["name"], "page-4");
  std::set<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto [cp, page] = dc_->call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=set%3Dpaging&limit=3" +
                                           (token.empty() ? std::string() : "&continue=" + token));
    ASSERT_EQ(cp, 200);
    EXPECT_LE(page["items"].size(), 3u);
    for (const auto& it : page["items"]) EXPECT_TRUE(seen.insert(it["metadata"]["name"]).second);
    token = page["metadata"].value("continue", "");
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(pages, 3);
  auto [cb, bad] = dc_->call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=a+in+(b");
  EXPECT_EQ(cb, 400);
}

// What kube-apiserver refuses, devcluster refuses with the same code, so nothing that works
// here fails on a real cluster: field selectors outside the resource's list, resourceVersions
// the server has not reached (504 ResourceVersionTooLarge, on which clients re-list), and
// malformed list/watch parameters.
TEST_F(DevclusterApi, ListAndWatchParametersAreCheckedAsKubeApiserverDoes) {
  auto [c1, bad_field] = dc_->call("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=data.x%3Dy");
  EXPECT_EQ(c1, 400);
  EXPECT_EQ(bad_field.value("message", ""),
            "field label not supported: data.x (supported: metadata.name, metadata.namespace)");
  EXPECT_EQ(dc_->call("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning%2Cspec.nodeName%21%3Dx").first, 200);
  EXPECT_EQ(dc_->call("GET", "/api/v1/events?fieldSelector=involvedObject.name%3Dp").first, 200);
  auto [c2, bad_pod_field] = dc_->call("GET", "/api/v1/pods?fieldSelector=spec.containers%3Dx&watch=true");
  EXPECT_EQ(c2, 400) << "a watch checks its selector before streaming";
  EXPECT_NE(bad_pod_field.value("message", "").find("spec.nodeName"), std::string::npos) << bad_pod_field.dump();
  // A CRD's selectableFields extend its list.
  ASSERT_EQ(dc_->call("POST", kWidgets, widget("blue-1", {{"size", 1}, {"color", "blue"}})).first, 201);
  ASSERT_EQ(dc_->call("POST", kWidgets, widget("red-1", {{"size", 1}})).first, 201);
  auto [c3, blue] = dc_->call("GET", kWidgets + "?fieldSelector=spec.color%3Dblue");
  ASSERT_EQ(c3, 200) << blue.dump();
  ASSERT_EQ(blue["items"].size(), 1u);
  EXPECT_EQ(blue["items"][0]["metadata"]["name"], "blue-1");
  EXPECT_EQ(dc_->call("GET", kWidgets + "?fieldSelector=spec.size%3D1").first, 400);

  const std::string cms = "/api/v1/namespaces/default/configmaps";
  auto [c4, list] = dc_->call("GET", cms);
  const uint64_t now = std::stoull(list["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_EQ(dc_->call("GET", cms + "?resourceVersion=0").first, 200);
  EXPECT_EQ(dc_->call("GET", cms + "?resourceVersion=" + std::to_string(now)).first, 200);
  EXPECT_EQ(dc_->call("GET", cms + "?resourceVersion=" + std::to_string(now) + "&resourceVersionMatch=Exact").first, 200);
  auto [c5, old_exact] = dc_->call("GET", cms + "?resourceVersion=" + std::to_string(now - 1) + "&resourceVersionMatch=Exact");
  EXPECT_EQ(c5, 410) << old_exact.dump();
  const std::string future = std::to_string(now + 1000);
  for (const std::string& query : {"?resourceVersion=" + future, "?watch=true&resourceVersion=" + future}) {
    auto [code, status] = dc_->call("GET", cms + query);
    EXPECT_EQ(code, 504) << query << " " << status.dump();
    EXPECT_EQ(status.value("reason", ""), "Timeout");
    EXPECT_EQ(status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge") << status.dump();
    EXPECT_EQ(status.value("message", "").rfind("Too large resource version: " + future + ", current: ", 0), 0u);
  }
  for (const char* query : {"?resourceVersion=abc", "?resourceVersion=-1", "?limit=10x", "?watch=true&resourceVersion=1x",
                            "?watch=true&timeoutSeconds=soon"}) {
    auto [code, status] = dc_->call("GET", cms + query);
    EXPECT_EQ(code, 400) << query << " " << status.dump();
    EXPECT_EQ(status.value("reason", ""), "BadRequest") << query;
  }
  // kube-apiserver's ListOptions validation: 422 with the offending parameter as the field.
  for (const char* query : {"?resourceVersionMatch=Exact", "?resourceVersion=5&resourceVersionMatch=Newest",
                            "?resourceVersion=0&resourceVersionMatch=Exact", "?watch=true&sendInitialEvents=true",
                            "?watch=true&resourceVersion=0&resourceVersionMatch=NotOlderThan"}) {
    auto [code, status] = dc_->call("GET", cms + query);
    EXPECT_EQ(code, 422) << query << " " << status.dump();
    EXPECT_EQ(status.value("message", "").rfind("ListOptions.meta.k8s.io \"\" is invalid: ", 0), 0u) << status.dump();
  }
  auto [c6, forbidden] = dc_->call("GET", cms + "?resourceVersionMatch=Exact");
  EXPECT_EQ(forbidden["details"]["causes"][0]["field"], "resourceVersionMatch");
  // The combination kube-apiserver asks for streams the state, then the initial-events-end bookmark.
  auto r = dc_->http().send("GET", cms + "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                                         "&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1", "", "");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.status, 200);
  EXPECT_NE(r.response.body.find("k8s.io/initial-events-end"), std::string::npos) << r.response.body.substr(0, 300);
}

// Labels and annotations a real cluster would refuse are refused here too (422 on objects, 400
// in selectors), so an operator cannot come to rely on them on devcluster.
TEST_F(DevclusterApi, LabelsAndSelectorsUseKubernetesLabelSyntax) {
  const std::string cms = "/api/v1/namespaces/default/configmaps";
  auto labelled = [](const std::string& name, Json labels) {
    return Json{{"metadata", {{"name", name}, {"labels", labels}}}};
  };
  EXPECT_EQ(dc_->call("POST", cms, labelled("good-labels", {{"flotilla.io/job", "llama_3.8b-x"}, {"empty", ""}})).first, 201);
  auto [c1, bad_value] = dc_->call("POST", cms, labelled("bad-value", {{"app", "foo!"}}));
  EXPECT_EQ(c1, 422) << bad_value.dump();
  EXPECT_EQ(bad_value["details"]["causes"][0]["field"], "metadata.labels");
  EXPECT_NE(bad_value["details"]["causes"][0].value("message", "").find("a valid label must be an empty string"),
            std::string::npos) << bad_value.dump();
  auto [c2, long_value] = dc_->call("POST", cms, labelled("long-value", {{"job", std::string(64, 'a')}}));
  EXPECT_EQ(c2, 422);
  EXPECT_NE(long_value.dump().find("must be no more than 63 characters"), std::string::npos) << long_value.dump();
  EXPECT_EQ(dc_->call("POST", cms, labelled("ok-63", {{"job", std::string(63, 'a')}})).first, 201);
  EXPECT_EQ(dc_->call("POST", cms, labelled("bad-prefix", {{"Flotilla.IO/job", "x"}})).first, 422);
  EXPECT_EQ(dc_->call("POST", cms, labelled("bad-key", {{"a b", "x"}})).first, 422);
  Json bad_annotation = {{"metadata", {{"name", "bad-annotation"}, {"annotations", {{"-x", "any value at all!"}}}}}};
  EXPECT_EQ(dc_->call("POST", cms, bad_annotation).first, 422);
  // Updates are checked too, and a refused one changes nothing.
  auto [c3, patched] = dc_->call("PATCH", cms + "/good-labels", Json{{"metadata", {{"labels", {{"app", "a/b"}}}}}},
                                 "application/merge-patch+json");
  EXPECT_EQ(c3, 422) << patched.dump();
  EXPECT_FALSE(dc_->call("GET", cms + "/good-labels").second["metadata"]["labels"].contains("app"));

  EXPECT_EQ(dc_->call("GET", cms + "?labelSelector=flotilla.io%2Fjob%3Dllama_3.8b-x").second["items"].size(), 1u);
  for (const char* selector : {"app%3Dfoo%21", "app+in+(a,b%2Fc)", "%2Fx", "-app"}) {
    auto [code, status] = dc_->call("GET", cms + "?labelSelector=" + selector);
    EXPECT_EQ(code, 400) << selector << " " << status.dump();
    EXPECT_EQ(status.value("message", "").rfind("unable to parse requirement", 0), 0u) << status.dump();
  }
}

// GET .../configmaps/NAME?watch=true is a watch of that one object, not a plain GET.
TEST_F(DevclusterApi, WatchOnANamedObjectStreamsOnlyThatObject) {
  const std::string cms = "/api/v1/namespaces/default/configmaps";
  for (const char* name : {"named-a", "named-b"})
    ASSERT_EQ(dc_->call("POST", cms, Json{{"metadata", {{"name", name}}}}).first, 201);
  auto r = dc_->http().send("GET", cms + "/named-a?watch=true&timeoutSeconds=1", "", "");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.status, 200);
  std::istringstream lines(r.response.body);
  std::string line;
  int events = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    Json ev = Json::parse(line);
    EXPECT_EQ(ev["type"], "ADDED") << line;
    EXPECT_EQ(ev["object"]["metadata"]["name"], "named-a") << line;
    ++events;
  }
  EXPECT_EQ(events, 1) << r.response.body;
}

TEST_F(DevclusterApi, WatchResumesFromResourceVersionSendsBookmarksAndExpires) {
  auto [c, created] = dc_->call("POST", "/api/v1/namespaces/default/configmaps", Json{{"metadata", {{"name", "watched"}}}});
  ASSERT_EQ(c, 201);
  std::string rv0 = created["metadata"]["resourceVersion"];
  for (int i = 1; i <= 3; ++i)
    dc_->call("PATCH", "/api/v1/namespaces/default/configmaps/watched", Json{{"data", {{"i", std::to_string(i)}}}},
              "application/merge-patch+json");
  dc_->call("DELETE", "/api/v1/namespaces/default/configmaps/watched");
  flotilla::kube::net::HttpRequest req;
  req.target = "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dwatched&resourceVersion=" + rv0;
  std::string error;
  auto stream = dc_->http().open_stream(req, &error);
  ASSERT_TRUE(stream) << error;
  ASSERT_EQ(stream->head().status, 200);
  std::vector<std::string> types;
  std::vector<std::string> values;
  std::string line;
  bool bookmark = false;
  for (int i = 0; i < 20 && !bookmark; ++i) {
    if (stream->next_line(&line, 3000ms) != flotilla::kube::net::StreamStatus::line) break;
    Json ev = Json::parse(line);
    if (ev["type"] == "BOOKMARK") {
      bookmark = true;
      continue;
    }
    types.push_back(ev["type"]);
    values.push_back(ev["object"].value("data", Json::object()).value("i", ""));
  }
  stream->cancel();
  EXPECT_EQ(types, (std::vector<std::string>{"MODIFIED", "MODIFIED", "MODIFIED", "DELETED"}));
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", "3", "3"}));
  EXPECT_TRUE(bookmark);

  // After an admin compaction that rv is gone: the watch gets a 410 Expired ERROR event.
  auto compact = dc_->admin("compact");
  ASSERT_EQ(compact.exit_code, 0) << compact.output;
  stream = dc_->http().open_stream(req, &error);
  ASSERT_TRUE(stream) << error;
  ASSERT_EQ(stream->next_line(&line, 3000ms), flotilla::kube::net::StreamStatus::line);
  Json ev = Json::parse(line);
  EXPECT_EQ(ev["type"], "ERROR");
  EXPECT_EQ(ev["object"]["code"], 410);
  EXPECT_EQ(ev["object"]["reason"], "Expired");
}

TEST_F(DevclusterApi, SelectorWatchSeesObjectsEnterAndLeave) {
  auto [c, created] = dc_->call("POST", "/api/v1/namespaces/default/configmaps",
                                Json{{"metadata", {{"name", "mover"}, {"labels", {{"team", "blue"}}}}}});
  ASSERT_EQ(c, 201);
  flotilla::kube::net::HttpRequest req;
  req.target = "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=team%3Dred&resourceVersion=" +
               created["metadata"]["resourceVersion"].get<std::string>();
  std::string error;
  auto stream = dc_->http().open_stream(req, &error);
  ASSERT_TRUE(stream) << error;
  for (const char* team : {"red", "red", "green"})
    dc_->call("PATCH", "/api/v1/namespaces/default/configmaps/mover", Json{{"metadata", {{"labels", {{"team", team}}}}}},
              "application/merge-patch+json");
  std::vector<std::string> types;
  std::string line;
  while (types.size() < 2 && stream->next_line(&line, 3000ms) == flotilla::kube::net::StreamStatus::line)
    types.push_back(Json::parse(line)["type"]);
  // blue→red enters (ADDED), red→red is a no-op (nothing written), red→green leaves (DELETED).
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "DELETED"}));
}

TEST_F(DevclusterApi, DiscoveryAndOpenApiCoverCrds) {
  auto [c, apis] = dc_->call("GET", "/apis");
  bool found = false;
  for (const auto& g : apis["groups"]) found = found || g["name"] == "example.io";
  EXPECT_TRUE(found);
  auto [c2, list] = dc_->call("GET", "/apis/example.io/v1");
  ASSERT_EQ(c2, 200);
  std::set<std::string> names;
  for (const auto& r : list["resources"]) names.insert(r["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"widgets", "widgets/status"}));
  auto [c3, v3] = dc_->call("GET", "/openapi/v3/apis/example.io/v1");
  ASSERT_EQ(c3, 200);
  EXPECT_EQ(v3["components"]["schemas"]["io.example.v1.Widget"]["properties"]["spec"]["required"][0], "size");
  auto [c4, v2] = dc_->call("GET", "/openapi/v2");
  EXPECT_TRUE(v2["definitions"].contains("io.example.v1.Widget"));
  auto [c5, core] = dc_->call("GET", "/api/v1");
  names.clear();
  for (const auto& r : core["resources"]) names.insert(r["name"]);
  for (const char* want : {"pods", "pods/status", "pods/binding", "nodes", "namespaces", "services", "configmaps", "secrets", "events"})
    EXPECT_TRUE(names.count(want)) << want;
}

TEST(DevclusterRestart, ObjectsAndResourceVersionsSurviveAndWatchesResume) {
  DevclusterProcess dc("restart");
  ASSERT_TRUE(dc.start()) << read_text(dc.dir() / "devcluster.log");
  auto [c, cm] = dc.call("POST", "/api/v1/namespaces/default/configmaps", Json{{"metadata", {{"name", "durable"}}}, {"data", {{"k", "1"}}}});
  ASSERT_EQ(c, 201);
  std::string rv_before = cm["metadata"]["resourceVersion"];
  auto [c2, cm2] = dc.call("PATCH", "/api/v1/namespaces/default/configmaps/durable", Json{{"data", {{"k", "2"}}}},
                           "application/merge-patch+json");
  std::string rv_patched = cm2["metadata"]["resourceVersion"];
  ::kill(dc.pid(), SIGKILL);  // no clean shutdown: every acknowledged write must already be in the log
  waitpid(dc.pid(), nullptr, 0);
  dc.stop();
  ASSERT_TRUE(dc.start()) << read_text(dc.dir() / "devcluster.log");
  auto [c3, after] = dc.call("GET", "/api/v1/namespaces/default/configmaps/durable");
  ASSERT_EQ(c3, 200) << after.dump();
  EXPECT_EQ(after["data"]["k"], "2");
  EXPECT_EQ(after["metadata"]["resourceVersion"], rv_patched);
  auto [c4, cm3] = dc.call("POST", "/api/v1/namespaces/default/configmaps", Json{{"metadata", {{"name", "later"}}}});
  EXPECT_GT(std::stoull(cm3["metadata"]["resourceVersion"].get<std::string>()), std::stoull(rv_patched));
  // A watch from before the restart resumes: it sees the patch and the new object, once each.
  flotilla::kube::net::HttpRequest req;
  req.target = "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=" + rv_before;
  std::string error;
  auto stream = dc.http().open_stream(req, &error);
  ASSERT_TRUE(stream) << error;
  std::vector<std::string> seen;
  std::string line;
  while (seen.size() < 2 && stream->next_line(&line, 3000ms) == flotilla::kube::net::StreamStatus::line) {
    Json ev = Json::parse(line);
    seen.push_back(ev["type"].get<std::string>() + " " + ev["object"]["metadata"]["name"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"MODIFIED durable", "ADDED later"}));
  EXPECT_EQ(stream->next_line(&line, 500ms), flotilla::kube::net::StreamStatus::timeout) << line;
}

// A data dir that cannot be read back must not start empty (the next snapshot would erase what
// it holds): the binary exits non-zero naming the file, and the files stay as they were.
TEST(DevclusterRestart, CorruptDataDirRefusesToStartAndKeepsTheData) {
  DevclusterProcess dc("corrupt");
  ASSERT_TRUE(dc.start()) << read_text(dc.dir() / "devcluster.log");
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/configmaps", Json{{"metadata", {{"name", "precious"}}}}).first, 201);
  ::kill(dc.pid(), SIGKILL);  // the configmap is only in the log now
  waitpid(dc.pid(), nullptr, 0);
  dc.stop();
  const fs::path log = dc.data_dir() / "store" / "log";
  const std::string good = read_text(log);
  ASSERT_GT(std::count(good.begin(), good.end(), '\n'), 2);
  std::string garbled = good;
  garbled[0] = '#';
  write_text(log, garbled);
  auto r = run_command("timeout 20 " + binary() + " --listen 127.0.0.1:0 --data-dir " + dc.data_dir().string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(log.string() + ": line 1 is corrupt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("refusing to start"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(log), garbled);
  write_text(log, good);
  // A damaged server certificate names the pki directory and the way out.
  const fs::path cert = dc.data_dir() / "pki" / "server.crt";
  const std::string good_cert = read_text(cert);
  write_text(cert, "garbage\n");
  r = run_command("timeout 20 " + binary() + " --listen 127.0.0.1:0 --data-dir " + dc.data_dir().string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the certificates in " + (dc.data_dir() / "pki").string() + " are damaged"), std::string::npos)
      << r.output;
  write_text(cert, good_cert);
  ASSERT_TRUE(dc.start()) << read_text(dc.dir() / "devcluster.log");
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/default/configmaps/precious").first, 200);
}

// Bad command lines and environments: one line saying what is wrong, a non-zero exit, no hang.
TEST(DevclusterCli, BadInputGetsOneClearLineAndNonZeroExit) {
  DevclusterProcess scratch("cli");  // only for its directory
  const fs::path dir = scratch.dir();
  auto run = [&](const std::string& args) { return run_command("timeout 20 " + binary() + " " + args); };
  auto expect = [&](const std::string& args, int code, const std::string& message) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  };
  const std::string base = "--listen 127.0.0.1:0 --data-dir " + (dir / "data").string();
  expect("--help", 0, "usage: flotilla-devcluster");
  expect("admin --help", 0, "usage: flotilla-devcluster");
  expect("--listen 127.0.0.1:0", 1, "--data-dir is required");
  expect(base + " --watch-window -5", 2, "--watch-window must be a positive integer (events), got '-5'");
  expect(base + " --bookmark-interval-ms 5x", 2, "--bookmark-interval-ms must be a positive integer");
  expect(base + " --frobnicate 1", 2, "unknown flag --frobnicate");
  expect("--listen 127.0.0.1:99999 --data-dir " + (dir / "data").string(), 1, "port must be a number from 0 to 65535");
  expect("--listen 127.0.0.1 --data-dir " + (dir / "data").string(), 1, "--listen must be HOST:PORT");
  expect(base + " --nodes " + (dir / "missing.yaml").string(), 1, "cannot read nodes file");
  write_text(dir / "typo.yaml", "nodes:\n  - {name: n0, gpuCont: 8}\n");
  expect(base + " --nodes " + (dir / "typo.yaml").string(), 1, "unknown field `gpuCont`");
  write_text(dir / "garbled.yaml", "nodes: [{name: n0\n");
  expect(base + " --nodes " + (dir / "garbled.yaml").string(), 1, "not valid YAML");
  // Unwritable data dir (its parent is a regular file; chmod would not stop root).
  write_text(dir / "plain-file", "x");
  expect("--listen 127.0.0.1:0 --data-dir " + (dir / "plain-file" / "data").string(), 1, "cannot create data dir");
  // A port in use.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  expect("--listen 127.0.0.1:" + port + " --data-dir " + (dir / "data").string(), 1,
         "cannot listen on 127.0.0.1:" + port + ": Address already in use");
  ::close(fd);
  // admin: a missing kubeconfig, and bad numbers refused before anything is sent.
  expect("admin cordon n0 --kubeconfig " + (dir / "nope").string(), 1, "cannot read kubeconfig");
  write_text(dir / "kubeconfig", "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                 "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                                 "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                                 "users: [{name: u, user: {token: t}}]\n");
  const std::string kc = " --kubeconfig " + (dir / "kubeconfig").string();
  expect("admin add-node n1 --gpu-count -1" + kc, 2, "--gpu-count must be a non-negative integer, got '-1'");
  expect("admin watch-window 0" + kc, 2, "watch-window EVENTS must be a positive integer, got '0'");
  expect("admin explode" + kc, 2, "unknown admin action 'explode'");
}
