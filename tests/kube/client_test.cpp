// Client and controller runtime against the real devcluster binary (a subprocess on a free
// loopback port with its own data dir). Skips when flotilla-devcluster is not built.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "process/poll_until.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/reflector.h"
#include "kube/retry.h"
#include "subprocess.h"

namespace flotilla::kube {
namespace {

using namespace std::chrono_literals;
using testing::Devcluster;

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::devcluster_binary().empty()) GTEST_SKIP() << "flotilla-devcluster is not built";
    cluster_ = std::make_unique<Devcluster>();
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    client_ = cluster_->client();
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << "devcluster log:\n" << cluster_->log() << "\n";
    cluster_.reset();
  }
  static Json configmap(const std::string& name, Json data = Json::object()) {
    return {{"metadata", {{"name", name}, {"namespace", "default"}}}, {"data", std::move(data)}};
  }
  // Bounded wait for a condition (real time).
  template <class F>
  static bool eventually(F&& done, std::chrono::milliseconds limit = 10s) {
    return flotilla::process::poll_until(done, limit, 5ms);
  }

  std::unique_ptr<Devcluster> cluster_;
  std::shared_ptr<Client> client_;
};

TEST_F(KubeClientTest, CrudPatchAndPaging) {
  auto created = client_->create(resources::configmaps, "default",
                                 configmap("cm", {{"a", "1"}}));
  ASSERT_TRUE(created) << created.error().describe();
  EXPECT_EQ((*created)["data"]["a"], "1");
  EXPECT_FALSE(object_resource_version(*created).empty());

  auto merged = client_->patch(resources::configmaps, "default", "cm", PatchType::Merge,
                               {{"data", {{"b", "2"}}}});
  ASSERT_TRUE(merged) << merged.error().describe();
  EXPECT_EQ((*merged)["data"], Json({{"a", "1"}, {"b", "2"}}));

  auto jsonpatched = client_->patch(resources::configmaps, "default", "cm", PatchType::Json,
                                    Json::array({{{"op", "replace"}, {"path", "/data/a"}, {"value", "9"}},
                                                 {{"op", "remove"}, {"path", "/data/b"}}}));
  ASSERT_TRUE(jsonpatched) << jsonpatched.error().describe();
  EXPECT_EQ((*jsonpatched)["data"], Json({{"a", "9"}}));

  // Strategic merge on a Service: ports merge by their `port` key instead of being replaced.
  Json svc = {{"metadata", {{"name", "svc"}, {"namespace", "default"}}},
              {"spec", {{"ports", Json::array({{{"name", "http"}, {"port", 80}}})}}}};
  ASSERT_TRUE(client_->create(resources::services, "default", svc));
  auto smp = client_->patch(resources::services, "default", "svc", PatchType::StrategicMerge,
                            {{"spec", {{"ports", Json::array({{{"name", "metrics"}, {"port", 9090}}})}}}});
  ASSERT_TRUE(smp) << smp.error().describe();
  EXPECT_EQ((*smp)["spec"]["ports"].size(), 2u);

  auto got = client_->get(resources::configmaps, "default", "cm");
  ASSERT_TRUE(got);
  (*got)["data"]["c"] = "3";
  auto updated = client_->update(resources::configmaps, "default", *got);
  ASSERT_TRUE(updated) << updated.error().describe();
  EXPECT_EQ((*updated)["data"]["c"], "3");

  // Labels, field selector, paging.
  for (int i = 0; i < 5; ++i) {
    Json cm = configmap("page-" + std::to_string(i));
    cm["metadata"]["labels"] = {{"set", i % 2 ? "odd" : "even"}};
    ASSERT_TRUE(client_->create(resources::configmaps, "default", cm));
  }
  auto odd = client_->list(resources::configmaps, "default", {.label_selector = "set=odd"});
  ASSERT_TRUE(odd);
  EXPECT_EQ((*odd)["items"].size(), 2u);
  auto by_name = client_->list(resources::configmaps, "default", {.field_selector = "metadata.name=page-3"});
  ASSERT_TRUE(by_name);
  ASSERT_EQ((*by_name)["items"].size(), 1u);
  EXPECT_EQ(object_name((*by_name)["items"][0]), "page-3");
  std::set<std::string> paged;
  ListOptions lo{.label_selector = "set", .limit = 2};
  int pages = 0;
  do {
    auto page = client_->list(resources::configmaps, "default", lo);
    ASSERT_TRUE(page) << page.error().describe();
    EXPECT_LE((*page)["items"].size(), 2u);
    for (auto& item : (*page)["items"]) paged.insert(object_name(item));
    lo.continue_token = (*page)["metadata"].value("continue", "");
    ASSERT_LT(++pages, 10);
  } while (!lo.continue_token.empty());
  EXPECT_EQ(paged.size(), 5u);
  EXPECT_EQ(pages, 3);

  auto removed = client_->remove(resources::configmaps, "default", "cm");
  ASSERT_TRUE(removed) << removed.error().describe();
  EXPECT_TRUE(client_->get(resources::configmaps, "default", "cm").is(ErrorKind::NotFound));
}

TEST_F(KubeClientTest, BadRequestsGiveTypedErrors) {
  EXPECT_TRUE(client_->get(resources::configmaps, "default", "missing").is(ErrorKind::NotFound));
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("dup")));
  auto dup = client_->create(resources::configmaps, "default", configmap("dup"));
  EXPECT_TRUE(dup.is(ErrorKind::AlreadyExists)) << (dup ? "created twice" : dup.error().describe());

  auto current = client_->get(resources::configmaps, "default", "dup").value();
  Json stale = current;
  stale["metadata"]["resourceVersion"] = "1";
  stale["data"] = {{"x", "y"}};
  auto conflict = client_->update(resources::configmaps, "default", stale);
  EXPECT_TRUE(conflict.is(ErrorKind::Conflict)) << (conflict ? "no conflict" : conflict.error().describe());
  EXPECT_EQ(conflict ? 0 : conflict.error().http_status, 409);

  auto malformed = client_->request("POST", resources::configmaps.path("default"), "{not json");
  EXPECT_TRUE(malformed.is(ErrorKind::BadRequest)) << (malformed ? "accepted" : malformed.error().describe());

  Resource unknown{"example.com", "v1", "widgets", "Widget", true};
  EXPECT_TRUE(client_->list(unknown, "default").is(ErrorKind::NotFound));

  // Over kube-apiserver's 3 MiB body limit: a final (not transient) answer with the reason, and
  // the connection still yields the response although the server read none of the body.
  auto huge = client_->create(resources::configmaps, "default", configmap("huge", {{"x", std::string(4u << 20, 'x')}}));
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().http_status, 413) << huge.error().describe();
  EXPECT_EQ(huge.error().reason, "RequestEntityTooLarge");
  EXPECT_FALSE(huge.error().transient());
  EXPECT_TRUE(client_->get(resources::configmaps, "default", "dup"));  // and the client goes on

  auto cfg = cluster_->config();
  cfg.bearer_token = "wrong-token";
  cfg.client_cert_pem.clear();
  cfg.client_key_pem.clear();
  auto intruder = Client::create(cfg).value();
  auto denied = intruder->list(resources::configmaps, "default");
  EXPECT_TRUE(denied.is(ErrorKind::Unauthorized)) << (denied ? "allowed" : denied.error().describe());

  // Nothing listens on a fresh free port: connection refused is transient.
  cfg = cluster_->config();
  cfg.server = "https://127.0.0.1:" + std::to_string(testing::free_port());
  auto nowhere = Client::create(cfg).value()->list(resources::configmaps, "default");
  ASSERT_FALSE(nowhere);
  EXPECT_TRUE(nowhere.error().transient()) << nowhere.error().describe();

  // TLS verification is on: a client that trusts another CA cannot talk to devcluster.
  cfg = cluster_->config();
  cfg.ca_pem.clear();  // system trust store, which does not hold devcluster's self-signed CA
  auto untrusting = Client::create(cfg);
  if (untrusting) {
    EXPECT_FALSE((*untrusting)->list(resources::configmaps, "default"));
  }
}

TEST_F(KubeClientTest, SchemaViolationIsInvalidWithCausesAndStatusIsASubresource) {
  Json crd = {
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Namespaced"},
        {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
        {"versions",
         Json::array({{{"name", "v1"},
                       {"served", true},
                       {"storage", true},
                       {"subresources", {{"status", Json::object()}}},
                       {"schema",
                        {{"openAPIV3Schema",
                          {{"type", "object"},
                           {"properties",
                            {{"spec",
                              {{"type", "object"},
                               {"properties", {{"replicas", {{"type", "integer"}, {"minimum", 1}}}}}}},
                             {"status",
                              {{"type", "object"},
                               {"properties", {{"phase", {{"type", "string"}}}}}}}}}}}}}}})}}}};
  auto made = client_->create(resources::custom_resource_definitions, "", crd);
  ASSERT_TRUE(made) << made.error().describe();
  Resource widgets{"example.com", "v1", "widgets", "Widget", true};
  Json bad = {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", "many"}}}};
  Result<Json> invalid = Error{};
  ASSERT_TRUE(eventually([&] {
    invalid = client_->create(widgets, "default", bad);
    return !invalid.is(ErrorKind::NotFound);  // the CRD may take a moment to be served
  }));
  ASSERT_TRUE(invalid.is(ErrorKind::Invalid)) << (invalid ? "accepted" : invalid.error().describe());
  ASSERT_FALSE(invalid.error().causes.empty());
  EXPECT_NE(invalid.error().causes[0].field.find("spec.replicas"), std::string::npos)
      << invalid.error().describe();

  Json good = {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", 2}}}, {"status", {{"phase", "Ignored"}}}};
  auto created = client_->create(widgets, "default", good);
  ASSERT_TRUE(created) << created.error().describe();
  EXPECT_FALSE(created->contains("status") && (*created)["status"].contains("phase"))
      << "status is a subresource: create must not set it";
  Json with_status = *created;
  with_status["status"] = {{"phase", "Running"}};
  with_status["spec"]["replicas"] = 5;  // ignored by the status subresource
  auto status = client_->update_status(widgets, "default", with_status);
  ASSERT_TRUE(status) << status.error().describe();
  EXPECT_EQ((*status)["status"]["phase"], "Running");
  EXPECT_EQ((*status)["spec"]["replicas"], 2);
}

TEST_F(KubeClientTest, ConflictsAreRetriedUntilEveryIncrementLands) {
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("counter", {{"n", "0"}})));
  constexpr int kThreads = 4, kIncrements = 10;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      auto client = cluster_->client();
      for (int i = 0; i < kIncrements; ++i) {
        auto r = retry_on_conflict(
            [&]() -> Result<Json> {
              auto cm = client->get(resources::configmaps, "default", "counter");
              if (!cm) return cm.error();
              int n = std::stoi((*cm)["data"]["n"].get<std::string>());
              (*cm)["data"]["n"] = std::to_string(n + 1);
              auto u = client->update(resources::configmaps, "default", *cm);
              if (u.is(ErrorKind::Conflict)) ++conflicts;
              return u;
            },
            {100, 1ms, 1.0, 1.0});
        EXPECT_TRUE(r) << r.error().describe();
      }
    });
  for (auto& t : threads) t.join();
  auto final_cm = client_->get(resources::configmaps, "default", "counter").value();
  EXPECT_EQ(final_cm["data"]["n"], std::to_string(kThreads * kIncrements))
      << "a lost update means a Conflict was not detected or not retried";
  std::cerr << "conflicts retried: " << conflicts.load() << "\n";
}

// Collects what a reflector delivers; can hold the watcher thread inside its handler so the
// test can change the world while the watcher is not reading.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<WatcherEventKind, Json>> events;
  std::string hold_on;  // name of an object whose Apply blocks the handler until released
  bool holding = false;
  bool released = false;

  void operator()(const WatcherEvent& e) {
    std::unique_lock lock(mu);
    events.emplace_back(e.kind, e.object);
    if (e.kind == WatcherEventKind::Apply && !hold_on.empty() && object_name(e.object) == hold_on) {
      holding = true;
      cv.notify_all();
      cv.wait_for(lock, 30s, [&] { return released; });
      holding = false;
    }
  }
  bool wait_holding(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return holding; });
  }
  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  // Watch events (Apply/Delete) as "TYPE name rv".
  std::vector<std::string> changes() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (auto& [kind, obj] : events)
      if (kind == WatcherEventKind::Apply || kind == WatcherEventKind::Delete)
        out.push_back(std::string(kind == WatcherEventKind::Apply ? "APPLY " : "DELETE ") +
                      object_name(obj) + " " + object_resource_version(obj));
    return out;
  }
  int count(WatcherEventKind kind) {
    std::lock_guard lock(mu);
    int n = 0;
    for (auto& [k, obj] : events) n += k == kind;
    return n;
  }
};

// Short backoff so the tests do not wait out kube-rs's 800 ms default after a restart.
WatcherOptions fast_backoff() {
  WatcherOptions wo;
  wo.backoff = {100ms, 1000ms, 2.0, 0.5};
  return wo;
}

TEST_F(KubeClientTest, WatchResumesAcrossRestartWithoutMissingOrDuplicatingEvents) {
  Recorder rec;
  rec.hold_on = "a3";
  Reflector reflector(client_, resources::configmaps, "default", fast_backoff());
  reflector.start(std::ref(rec));
  ASSERT_TRUE(reflector.reader().wait_synced(10s));
  for (auto name : {"a1", "a2", "a3"}) ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap(name)));
  // The watcher now sits inside its handler for a3: restart devcluster and change things while
  // it is not reading, so what follows can only reach it by resuming from a3's resourceVersion.
  ASSERT_TRUE(rec.wait_holding(10s));
  ASSERT_TRUE(cluster_->restart()) << cluster_->error();
  auto client = cluster_->client();
  for (auto name : {"b1", "b2", "b3"}) ASSERT_TRUE(client->create(resources::configmaps, "default", configmap(name)));
  ASSERT_TRUE(client->patch(resources::configmaps, "default", "a1", PatchType::Merge, {{"data", {{"k", "v"}}}}));
  ASSERT_TRUE(client->remove(resources::configmaps, "default", "a2"));
  const std::string last_rv = client->get(resources::configmaps, "default", "b3").value()["metadata"]["resourceVersion"];
  rec.release();

  auto reader = reflector.reader();
  ASSERT_TRUE(eventually([&] { return rec.changes().size() >= 8; }, 20s));
  std::this_thread::sleep_for(300ms);  // anything duplicated would arrive now
  auto changes = rec.changes();
  ASSERT_EQ(changes.size(), 8u) << ::testing::PrintToString(changes);
  const std::vector<std::string> names = {"APPLY a1", "APPLY a2", "APPLY a3", "APPLY b1",
                                          "APPLY b2", "APPLY b3", "APPLY a1", "DELETE a2"};
  long prev_rv = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    EXPECT_EQ(changes[i].rfind(names[i] + " ", 0), 0u) << changes[i];
    long rv = std::stol(changes[i].substr(changes[i].rfind(' ') + 1));
    EXPECT_GT(rv, prev_rv) << "resourceVersions must strictly increase: " << changes[i];
    prev_rv = rv;
  }
  EXPECT_EQ(rec.count(WatcherEventKind::Init), 1) << "resuming must not re-list";
  EXPECT_EQ(reflector.stats().relists_on_gone, 0);
  EXPECT_GE(std::stol(reader.resource_version()), std::stol(last_rv));
  EXPECT_EQ(reader.keys(), (std::vector<std::string>{"default/a1", "default/a3", "default/b1",
                                                     "default/b2", "default/b3"}));
  EXPECT_EQ(reader.get("default/a1")->at("data").at("k"), "v");
}

TEST_F(KubeClientTest, ExpiredResourceVersionTriggersRelist) {
  Recorder rec;
  rec.hold_on = "before";
  Reflector reflector(client_, resources::configmaps, "default", fast_backoff());
  reflector.start(std::ref(rec));
  ASSERT_TRUE(reflector.reader().wait_synced(10s));
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("before")));
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("doomed")));
  ASSERT_TRUE(rec.wait_holding(10s));
  // While the watcher is held at "before": restart, write, delete, and compact the watch
  // window past its resourceVersion. Resuming must then get 410 and re-list.
  ASSERT_TRUE(cluster_->restart()) << cluster_->error();
  auto client = cluster_->client();
  for (auto name : {"x1", "x2"}) ASSERT_TRUE(client->create(resources::configmaps, "default", configmap(name)));
  ASSERT_TRUE(client->remove(resources::configmaps, "default", "doomed"));
  auto compacted = client->request("POST", "/admin/compact", "{}");
  ASSERT_TRUE(compacted) << compacted.error().describe();
  rec.release();

  auto reader = reflector.reader();
  // The re-list is the truth: x1, x2 present; "doomed" gone although no DELETE was delivered.
  const std::vector<std::string> expected = {"default/before", "default/x1", "default/x2"};
  ASSERT_TRUE(eventually([&] { return rec.count(WatcherEventKind::InitDone) >= 2 && reader.keys() == expected; }, 20s))
      << "no re-list; relists_on_gone=" << reflector.stats().relists_on_gone
      << " keys=" << ::testing::PrintToString(reader.keys());
  EXPECT_GE(reflector.stats().relists_on_gone, 1);
  EXPECT_EQ(rec.count(WatcherEventKind::Init), 2);
  for (const auto& change : rec.changes())
    EXPECT_EQ(change.find("DELETE doomed"), std::string::npos) << "the deletion was compacted away";
  // And the watch continues after the re-list.
  ASSERT_TRUE(client->create(resources::configmaps, "default", configmap("after")));
  EXPECT_TRUE(eventually([&] { return reader.get("default/after").has_value(); }));
}

// The server's store is reset while a reflector holds a resourceVersion from before: the new
// server has not reached it (504 ResourceVersionTooLarge). Resuming there and waiting would skip
// every new object until the counter caught up; the reflector must re-list instead.
TEST_F(KubeClientTest, WatchAgainstAResetServerRelistsInsteadOfWaitingForItsOldVersion) {
  Recorder rec;
  Reflector reflector(client_, resources::configmaps, "default", fast_backoff());
  reflector.start(std::ref(rec));
  ASSERT_TRUE(reflector.reader().wait_synced(10s));
  auto reader = reflector.reader();
  for (int i = 0; i < 30; ++i)  // well past where a fresh store's counter starts
    ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("old-" + std::to_string(i))));
  ASSERT_TRUE(eventually([&] { return reader.get("default/old-29").has_value(); }));
  const long old_rv = std::stol(reader.resource_version());

  ASSERT_TRUE(cluster_->restart_with_empty_store()) << cluster_->error();
  auto client = cluster_->client();
  ASSERT_TRUE(client->create(resources::configmaps, "default", configmap("new-1")));
  const long new_rv = std::stol(client->get(resources::configmaps, "default", "new-1").value()["metadata"]["resourceVersion"].get<std::string>());
  ASSERT_LT(new_rv, old_rv) << "the reset store must start below the reflector's resourceVersion";

  const std::vector<std::string> expected = {"default/new-1"};
  EXPECT_TRUE(eventually([&] { return reader.keys() == expected; }, 15s))
      << "keys=" << ::testing::PrintToString(reader.keys()) << " rv=" << reader.resource_version()
      << " relists=" << reflector.stats().relists_on_gone;
  EXPECT_GE(reflector.stats().relists_on_gone, 1);
  ASSERT_TRUE(client->create(resources::configmaps, "default", configmap("new-2")));
  EXPECT_TRUE(eventually([&] { return reader.get("default/new-2").has_value(); }));
}

TEST_F(KubeClientTest, EventRecorderAggregatesRepeatsOnTheServer) {
  auto pod_like = client_->create(resources::configmaps, "default", configmap("subject")).value();
  EventRecorder recorder(client_, {"flotilla-test", "host-1"});
  std::string name;
  for (int i = 0; i < 3; ++i) {
    auto e = recorder.record(pod_like, "Warning", "Flapping", "it flapped");
    ASSERT_TRUE(e) << e.error().describe();
    if (i == 0) name = object_name(*e);
    EXPECT_EQ(object_name(*e), name);
  }
  auto stored = client_->get(resources::events, "default", name);
  ASSERT_TRUE(stored) << stored.error().describe();
  EXPECT_EQ((*stored)["count"], 3);
  EXPECT_EQ((*stored)["involvedObject"]["name"], "subject");
  EXPECT_EQ((*stored)["reason"], "Flapping");
  auto all = client_->list(resources::events, "default").value();
  int about_subject = 0;
  for (const auto& e : all["items"]) about_subject += e["involvedObject"].value("name", "") == "subject";
  EXPECT_EQ(about_subject, 1) << "repeats must not create new Event objects";
}

TEST_F(KubeClientTest, LeaseFailsOverWithinTheLeaseDurationAfterTheLeaderIsKilled) {
  const std::string demo = std::string(FLOTILLA_BINARY_DIR) + "/tests/kube/kube_leader_demo";
  ASSERT_TRUE(std::filesystem::exists(demo)) << demo;
  constexpr int kLeaseMs = 2000, kRenewMs = 1500, kRetryMs = 200;
  testing::TempDir logs;
  auto spawn = [&](const std::string& id) {
    return std::make_unique<testing::Subprocess>(
        std::vector<std::string>{demo, cluster_->kubeconfig_path().string(), id, "flotilla-test",
                                 std::to_string(kLeaseMs), std::to_string(kRenewMs),
                                 std::to_string(kRetryMs)},
        logs.path / (id + ".log"));
  };
  auto alpha = spawn("alpha");
  auto beta = spawn("beta");
  auto leads = [](testing::Subprocess& p, const std::string& id) {
    return p.output().find("LEADING " + id) != std::string::npos;
  };
  ASSERT_TRUE(eventually([&] { return leads(*alpha, "alpha") || leads(*beta, "beta"); }, 15s))
      << alpha->output() << beta->output();
  std::this_thread::sleep_for(500ms);
  const bool alpha_leads = leads(*alpha, "alpha");
  EXPECT_NE(alpha_leads, leads(*beta, "beta")) << "exactly one leader";
  auto& leader = alpha_leads ? alpha : beta;
  auto& follower = alpha_leads ? beta : alpha;
  const std::string follower_id = alpha_leads ? "beta" : "alpha";

  const auto killed_at = std::chrono::steady_clock::now();
  leader->kill_now();
  ASSERT_TRUE(eventually([&] { return leads(*follower, follower_id); }, 15s)) << follower->output();
  const auto failover = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed_at);
  std::cerr << "failover after kill: " << failover.count() << " ms (lease " << kLeaseMs << " ms)\n";
  // The follower times the lease from when it last saw it change (<= one poll after the
  // leader's last renewal) and polls every retry period (+20% jitter).
  EXPECT_LE(failover.count(), kLeaseMs + 2 * kRetryMs * 12 / 10 + 300);
  EXPECT_GE(failover.count(), kLeaseMs - kRetryMs * 12 / 10 - 100)
      << "took over before the lease could have expired";

  auto lease = client_->get(resources::leases, "default", "flotilla-test").value();
  EXPECT_EQ(lease["spec"]["holderIdentity"], follower_id);
  EXPECT_GE(lease["spec"]["leaseTransitions"].get<int>(), 1);

  // A clean stop releases the lease and runs the stopped callback.
  EXPECT_EQ(follower->stop(5s), 0) << follower->output();
  EXPECT_NE(follower->output().find("STOPPED " + follower_id), std::string::npos);
  auto released = client_->get(resources::leases, "default", "flotilla-test").value();
  EXPECT_EQ(released["spec"].value("holderIdentity", ""), "");
}

TEST_F(KubeClientTest, LeaderThatCannotRenewStopsAndExitsCleanly) {
  const std::string demo = std::string(FLOTILLA_BINARY_DIR) + "/tests/kube/kube_leader_demo";
  ASSERT_TRUE(std::filesystem::exists(demo)) << demo;
  constexpr int kLeaseMs = 2000, kRenewMs = 1000, kRetryMs = 200;
  testing::TempDir logs;
  testing::Subprocess solo({demo, cluster_->kubeconfig_path().string(), "solo", "flotilla-solo",
                            std::to_string(kLeaseMs), std::to_string(kRenewMs), std::to_string(kRetryMs)},
                           logs.path / "solo.log");
  ASSERT_TRUE(eventually([&] { return solo.output().find("LEADING solo") != std::string::npos; }, 15s))
      << solo.output();
  const auto cut_at = std::chrono::steady_clock::now();
  cluster_->stop();  // the API server goes away: renewals fail
  ASSERT_TRUE(eventually([&] { return !solo.running(); }, 10s)) << solo.output();
  const auto stopped_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - cut_at);
  std::cerr << "stopped leading " << stopped_after.count() << " ms after the API server went away\n";
  EXPECT_EQ(solo.stop(), 0) << "exits cleanly through on_stopped_leading";
  EXPECT_NE(solo.output().find("STOPPED solo"), std::string::npos) << solo.output();
  // It must give up before the lease could pass to someone else (renew_deadline < lease).
  EXPECT_LT(stopped_after.count(), kLeaseMs);
  EXPECT_GE(stopped_after.count(), kRenewMs - kRetryMs);
}

// A small real controller: every ConfigMap labelled role=source gets an owned "<name>-mirror"
// ConfigMap with the same data. Exercises reflectors, the work queue, owner mapping and
// level-based reconcile end to end.
TEST_F(KubeClientTest, ControllerKeepsOwnedObjectsInStep) {
  auto reconcile = [&](const std::string& key, const ReconcileContext& ctx) -> Result<Action> {
    auto source = ctx.primary.get(key);
    if (!source) return Action::await_change();  // deleted: garbage collection removes the mirror
    const std::string name = object_name(*source) + "-mirror";
    Json data = source->value("data", Json::object());
    auto mirror = ctx.owned[0].get("default", name);
    if (!mirror) {
      Json m = configmap(name, data);
      m["metadata"]["labels"] = {{"role", "mirror"}};
      m["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "v1"}, {"kind", "ConfigMap"},
          {"name", object_name(*source)}, {"uid", object_uid(*source)}, {"controller", true}}});
      auto made = client_->create(resources::configmaps, "default", m);
      if (!made && !made.is(ErrorKind::AlreadyExists)) return made.error();
    } else if (mirror->value("data", Json::object()) != data) {
      Json m = *mirror;
      m["data"] = data;
      auto updated = client_->update(resources::configmaps, "default", m);
      if (!updated) return updated.error();  // Conflict: the cache was stale; retried
    }
    return Action::await_change();
  };
  WatcherOptions sources, mirrors;
  sources.label_selector = "role=source";
  mirrors.label_selector = "role=mirror";
  Controller controller(client_, resources::configmaps, "default", reconcile);
  controller.with_watcher_options(sources).owns(resources::configmaps, mirrors).with_workers(2);
  std::jthread runner([&](std::stop_token stop) { controller.run(stop); });

  auto mirror_data = [&](const std::string& key) -> std::string {
    auto m = client_->get(resources::configmaps, "default", "s1-mirror");
    if (!m) return "";
    return m->value("data", Json::object()).value(key, "");
  };
  Json s1 = configmap("s1", {{"a", "1"}});
  s1["metadata"]["labels"] = {{"role", "source"}};
  ASSERT_TRUE(client_->create(resources::configmaps, "default", s1));
  EXPECT_TRUE(eventually([&] { return mirror_data("a") == "1"; }));
  ASSERT_TRUE(client_->patch(resources::configmaps, "default", "s1", PatchType::Merge, {{"data", {{"a", "2"}}}}));
  EXPECT_TRUE(eventually([&] { return mirror_data("a") == "2"; }));
  // Deleting the owned object wakes its owner, which re-creates it.
  ASSERT_TRUE(client_->remove(resources::configmaps, "default", "s1-mirror"));
  EXPECT_TRUE(eventually([&] { return mirror_data("a") == "2"; }));
  runner.request_stop();
  runner.join();
  EXPECT_GE(controller.reconciles(), 3);
}

// Watches of another resource: a cluster-scoped Node, labelled with the job it serves, wakes
// that job's (a ConfigMap's) key through the mapper; the reconcile reads the Node from
// ctx.watched (level-based), including its latest change.
TEST_F(KubeClientTest, ANodeChangeWakesTheMappedPrimaryKey) {
  std::mutex mu;
  std::map<std::string, int> reconciled;
  std::string seen_zone;  // the node's zone label as the job's last reconcile read it
  auto reconcile = [&](const std::string& key, const ReconcileContext& ctx) -> Result<Action> {
    std::lock_guard lock(mu);
    ++reconciled[key];
    if (key == "default/job-a") {
      if (auto node = ctx.watched.at(0).get("n1"))
        seen_zone = (*node)["metadata"]["labels"].value("topology.kubernetes.io/zone", "");
    }
    return Action::await_change();
  };
  auto job_of_node = [](const Json& node) -> std::vector<std::string> {
    const std::string job = node["metadata"].value("labels", Json::object()).value("flotilla.io/job", "");
    if (job.empty()) return {};
    return {"default/" + job};
  };
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("job-a")));
  ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("job-b")));
  Controller controller(client_, resources::configmaps, "default", reconcile);
  controller.watches(resources::nodes, job_of_node);
  std::jthread runner([&](std::stop_token stop) { controller.run(stop); });
  auto count = [&](const std::string& key) {
    std::lock_guard lock(mu);
    return reconciled[key];
  };
  ASSERT_TRUE(eventually([&] { return count("default/job-a") >= 1 && count("default/job-b") >= 1; }));

  const int before_a = count("default/job-a"), before_b = count("default/job-b");
  Json node = {{"metadata", {{"name", "n1"},
                             {"labels", {{"flotilla.io/job", "job-a"}, {"nvidia.com/gpu.count", "2"}}}}}};
  ASSERT_TRUE(client_->create(resources::nodes, "", node));
  EXPECT_TRUE(eventually([&] { return count("default/job-a") > before_a; }));
  ASSERT_TRUE(client_->patch(resources::nodes, "", "n1", PatchType::Merge,
                             {{"metadata", {{"labels", {{"topology.kubernetes.io/zone", "zone-7"}}}}}}));
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return seen_zone == "zone-7";
  }));
  // Deleting the node wakes its job too (mapped from the node's last state).
  const int before_delete = count("default/job-a");
  ASSERT_TRUE(client_->remove(resources::nodes, "", "n1"));
  EXPECT_TRUE(eventually([&] { return count("default/job-a") > before_delete; }));
  // A node labelled for job-a never woke job-b.
  EXPECT_EQ(count("default/job-b"), before_b);
  runner.request_stop();
  runner.join();
}

// The cluster pass: one reserved key queued by every event of every resource. A burst of
// changes while a (slow) pass runs collapses in the work queue into few passes, and a pass
// after the burst sees all of it.
TEST_F(KubeClientTest, ClusterPassRunsAfterABurstWithFewerReconcilesThanEvents) {
  std::atomic<int> passes{0};
  std::atomic<int> last_seen{-1};  // ConfigMaps + Nodes the latest pass saw
  auto reconcile = [&](const std::string& key, const ReconcileContext& ctx) -> Result<Action> {
    if (key != cluster_pass_key()) return Action::await_change();
    ++passes;
    std::this_thread::sleep_for(200ms);  // a pass takes time; changes pile up meanwhile
    last_seen = static_cast<int>(ctx.primary.size() + ctx.watched.at(0).size());
    return Action::await_change();
  };
  Controller controller(client_, resources::configmaps, "default", reconcile);
  controller.watches(resources::nodes, [](const Json&) { return std::vector<std::string>{}; })
      .with_cluster_pass()
      .with_workers(2);
  std::jthread runner([&](std::stop_token stop) { controller.run(stop); });
  // Synced caches give one pass even when nothing changes.
  ASSERT_TRUE(eventually([&] { return passes.load() >= 1 && last_seen.load() >= 0; }));
  std::this_thread::sleep_for(300ms);  // let the start-up passes finish
  const int existing = last_seen.load();  // e.g. devcluster's own ConfigMaps

  const int passes_before = passes.load();
  constexpr int kConfigMaps = 30, kNodes = 5;
  for (int i = 0; i < kConfigMaps; ++i)
    ASSERT_TRUE(client_->create(resources::configmaps, "default", configmap("cm-" + std::to_string(i))));
  for (int i = 0; i < kNodes; ++i)
    ASSERT_TRUE(client_->create(resources::nodes, "", {{"metadata", {{"name", "node-" + std::to_string(i)}}}}));
  EXPECT_TRUE(eventually([&] { return last_seen.load() == existing + kConfigMaps + kNodes; }))
      << last_seen.load() << " objects seen, " << existing << " before";
  const int burst_passes = passes.load() - passes_before;
  std::printf("  %d cluster passes for %d objects created (the kubelet also modifies each node)\n",
              burst_passes, kConfigMaps + kNodes);
  EXPECT_GE(burst_passes, 1);
  EXPECT_LT(burst_passes, kConfigMaps + kNodes);
  runner.request_stop();
  runner.join();
}

// A list the server refuses is handed to on_request_failed before each backoff, so a shell can
// say why its cache stays empty: here a resource devcluster does not serve (no such CRD).
TEST_F(KubeClientTest, WatcherReportsEveryFailedRequest) {
  const Resource missing{"example.com", "v1", "widgets", "Widget", true};
  std::mutex mu;
  std::vector<Error> failures;
  WatcherOptions options;
  options.backoff.initial = std::chrono::milliseconds(1);
  options.backoff.max = std::chrono::milliseconds(5);
  options.on_request_failed = [&](const Error& e) {
    std::lock_guard lock(mu);
    failures.push_back(e);
  };
  Watcher watcher(client_, missing, "default", options);
  std::stop_source stop;
  std::jthread thread([&] { watcher.run(stop.get_token(), [](const WatcherEvent&) {}); });
  const bool reported_twice = eventually([&] {
    std::lock_guard lock(mu);
    return failures.size() >= 2;
  });
  stop.request_stop();
  thread.join();
  ASSERT_TRUE(reported_twice) << "each retry reports";
  std::lock_guard lock(mu);
  EXPECT_EQ(failures[0].kind, ErrorKind::NotFound) << failures[0].message;
}

}  // namespace
}  // namespace flotilla::kube
