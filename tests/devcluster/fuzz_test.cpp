// Issue 14: a bounded, deterministic fuzz run against the real devcluster binary over HTTPS.
// A fixed seed (FLOTILLA_FUZZ_SEED overrides it) drives a few thousand mutated and hostile
// bodies (type flips, deep nesting, huge strings, a regex bomb against a CRD pattern, numeric
// overflow, invalid UTF-8, truncated JSON, byte flips, unknown fields) through POST, PUT and
// PATCH (merge, strategic, JSON patch) of every resource devcluster serves. Every answer must
// be 2xx, or 4xx with a Status body; never a 5xx or a dropped connection. Then the server is
// restarted on the same data dir and must serve the same objects. The run stops mutating after
// kTimeBudget (40 s) so it stays under a minute on a loaded 2-core machine.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdlib>
#include <map>
#include <random>
#include <tuple>
#include <utility>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

constexpr auto kTimeBudget = 40s;
constexpr int kRequests = 5000;

struct Target {
  std::string collection;  // POST here
  std::string item;        // PUT/PATCH here (a seed object created first)
  Json seed;
  bool is_crd_kind = false;  // custom resources take no strategic merge patch
};

std::string nested(size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1";
  s.append(levels, '}');
  return s;
}

Json with_name(Json seed, const std::string& name) {
  seed["metadata"]["name"] = name;
  return seed;
}

std::vector<Target> targets() {
  const std::string ns = "/api/v1/namespaces/default/";
  std::vector<Target> t;
  auto add = [&](const std::string& collection, Json seed, bool crd_kind = false) {
    seed["metadata"]["name"] = "fuzz-seed";
    t.push_back({collection, collection + "/fuzz-seed", seed, crd_kind});
  };
  add(ns + "pods", Json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"fuzz"}},
      "spec":{"schedulerName":"fuzz-scheduler","restartPolicy":"Never","terminationGracePeriodSeconds":0,
      "containers":[{"name":"main","image":"none","command":["true"],"args":["x"],"env":[{"name":"A","value":"b"}],
      "resources":{"limits":{"nvidia.com/gpu":"1","cpu":"500m"}}}],
      "tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}]}})"));
  add(ns + "configmaps", Json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v","n":"1"},"binaryData":{"b":"AAE="}})"));
  add(ns + "secrets", Json::parse(R"({"apiVersion":"v1","kind":"Secret","type":"Opaque","data":{"k":"dg=="},"stringData":{"s":"t"}})"));
  add(ns + "services", Json::parse(R"({"apiVersion":"v1","kind":"Service","spec":{"selector":{"app":"fuzz"},
      "ports":[{"name":"http","port":80,"targetPort":"http","protocol":"TCP"}]}})"));
  add(ns + "events", Json::parse(R"({"apiVersion":"v1","kind":"Event","involvedObject":{"kind":"Pod","name":"p","namespace":"default"},
      "reason":"Fuzz","message":"m","count":1,"type":"Normal","source":{"component":"fuzz"}})"));
  add(ns + "serviceaccounts", Json::parse(R"({"apiVersion":"v1","kind":"ServiceAccount","automountServiceAccountToken":false})"));
  add("/apis/coordination.k8s.io/v1/namespaces/default/leases",
      Json::parse(R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"holderIdentity":"a","leaseDurationSeconds":15,
      "leaseTransitions":0,"renewTime":"2026-01-01T00:00:00.000000Z"}})"));
  add("/api/v1/namespaces", Json::parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"labels":{"a":"b"}}})"));
  add("/api/v1/nodes", Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"labels":{"pool":"fuzz"}},
      "spec":{"unschedulable":true,"taints":[{"key":"fuzz","value":"1","effect":"NoSchedule"}]},
      "status":{"capacity":{"nvidia.com/gpu":"2"},"allocatable":{"nvidia.com/gpu":"2"}}})"));
  Json crd = Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "spec":{"group":"fuzz.flotilla.io","scope":"Namespaced",
        "names":{"plural":"things","singular":"thing","kind":"Thing"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
          "properties":{"spec":{"type":"object","required":["size"],"properties":{
            "size":{"type":"integer","minimum":0,"maximum":100},
            "name":{"type":"string","pattern":"^(a+)+$","maxLength":100000},
            "tags":{"type":"array","items":{"type":"string","enum":["x","y"]}}}}}}}}]}})");
  t.push_back({"/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
               "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.fuzz.flotilla.io", with_name(crd, "things.fuzz.flotilla.io")});
  add("/apis/fuzz.flotilla.io/v1/namespaces/default/things",
      Json::parse(R"({"apiVersion":"fuzz.flotilla.io/v1","kind":"Thing","spec":{"size":3,"name":"aaa","tags":["x"]}})"), true);
  return t;
}

// Every JSON pointer into `v`, containers included.
void pointers(const Json& v, const std::string& at, std::vector<std::string>* out) {
  out->push_back(at);
  if (v.is_object())
    for (const auto& [k, sub] : v.items()) {
      std::string token;  // RFC 6901 escaping: "nvidia.com/gpu" -> "nvidia.com~1gpu"
      for (char c : k) token += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
      pointers(sub, at + "/" + token, out);
    }
  else if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) pointers(v[i], at + "/" + std::to_string(i), out);
}

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return static_cast<int>(pick(100)) < percent; }

  // A value of some other type, or a hostile one. Placeholders are spliced into the text later.
  Json hostile_value() {
    switch (pick(16)) {
      case 0: return 5;
      case 1: return "5";
      case 2: return true;
      case 3: return nullptr;
      case 4: return Json::array({1, "a", nullptr});
      case 5: return Json::object({{"a", 1}});
      case 6: return -3;
      case 7: return 1.5;
      case 8: return "__HUGE_INT__";
      case 9: return "__DEEP__";
      case 10: return std::string(pick(40) == 0 ? 2500000 : 20000, 'a');
      case 11: return "__BAD_UTF8__";
      case 12: return "-99999999999999999999";
      case 13: return std::string(50000, 'a') + "!";  // the regex bomb for ^(a+)+$
      case 14: return 9223372036854775807LL;
      default: return "";
    }
  }

  Json mutate_tree(Json doc) {
    int edits = 1 + static_cast<int>(pick(3));
    for (int e = 0; e < edits; ++e) {
      std::vector<std::string> ptrs;
      pointers(doc, "", &ptrs);
      std::string p = ptrs[pick(ptrs.size())];
      if (p.empty()) continue;
      Json::json_pointer ptr(p);
      switch (pick(4)) {
        case 0:
          doc[ptr.parent_pointer()].is_object() ? (void)doc[ptr.parent_pointer()].erase(ptr.back()) : (void)(doc[ptr] = hostile_value());
          break;
        case 1:
          if (doc[ptr].is_object()) doc[ptr]["unknownFuzzField"] = hostile_value();
          else doc[ptr] = hostile_value();
          break;
        default:
          doc[ptr] = hostile_value();
      }
    }
    return doc;
  }

  // Text with placeholders replaced, then maybe truncated, byte-flipped or made invalid UTF-8.
  std::string render(const Json& doc) {
    std::string text = doc.dump();
    auto splice = [&](const std::string& placeholder, const std::string& raw) {
      for (size_t at; (at = text.find("\"" + placeholder + "\"")) != std::string::npos;)
        text.replace(at, placeholder.size() + 2, raw);
    };
    splice("__HUGE_INT__", pick(2) ? "99999999999999999999999" : "1e400");
    splice("__DEEP__", nested(std::vector<size_t>{50, 9000, 10001, 60000}[pick(4)]));
    splice("__BAD_UTF8__", "\"\xff\xfe\xc3\"");
    switch (pick(10)) {
      case 0:
        text.resize(pick(text.size() + 1));  // truncated JSON
        break;
      case 1:
        for (int i = 0; i < 3 && !text.empty(); ++i) text[pick(text.size())] = static_cast<char>(pick(256));
        break;
      case 2:
        if (!text.empty()) text.insert(pick(text.size()), "\xc0\x80");
        break;
      default:
        break;
    }
    return text;
  }

  Json json_patch_ops(const Json& doc) {
    std::vector<std::string> ptrs;
    pointers(doc, "", &ptrs);
    Json ops = Json::array();
    static const char* kOps[] = {"add", "replace", "remove", "move", "copy", "test", "bogus"};
    for (size_t i = 0, n = 1 + pick(3); i < n; ++i) {
      Json op = {{"op", kOps[pick(7)]}, {"path", chance(80) ? ptrs[pick(ptrs.size())] : "/no/such/path"}};
      if (chance(80)) op["value"] = hostile_value();
      if (chance(30)) op["from"] = ptrs[pick(ptrs.size())];
      ops.push_back(op);
    }
    return ops;
  }

 private:
  std::mt19937_64 rng_;
};

// Everything a restart must bring back, without what legitimately changes across one.
std::map<std::string, Json> everything(DevclusterProcess& dc) {
  std::map<std::string, Json> out;
  for (const char* path : {"/api/v1/pods", "/api/v1/configmaps", "/api/v1/secrets", "/api/v1/services", "/api/v1/events",
                           "/api/v1/serviceaccounts", "/api/v1/namespaces", "/api/v1/nodes",
                           "/apis/coordination.k8s.io/v1/leases", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           "/apis/fuzz.flotilla.io/v1/things"}) {
    auto [code, list] = dc.call("GET", path);
    if (code == 404) continue;  // the fuzz may have rewritten the CRD; compared as missing objects
    EXPECT_EQ(code, 200) << path << " " << list.dump().substr(0, 200);
    for (auto& item : list["items"]) {
      Json& meta = item["metadata"];
      std::string key = std::string(path) + " " + meta.value("namespace", "") + "/" + meta.value("name", "");
      meta.erase("resourceVersion");
      item.erase("status");  // the kubelet and node lifecycle write status after a restart
      if (std::string(path) == "/api/v1/pods" && meta.contains("annotations"))
        meta["annotations"].erase("devcluster.flotilla.io/gpus");
      out[key] = std::move(item);
    }
  }
  return out;
}

}  // namespace

TEST(DevclusterFuzz, HostileBodiesGet2xxOr4xxAndTheDataDirRestarts) {
  // Answers and lists may hold values nested up to 10,000 levels, which nlohmann compares and
  // prints recursively: let this thread's stack grow to 64 MiB (sanitizer builds need it).
  rlimit stack{};
  if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY && stack.rlim_cur < (rlim_t{64} << 20)) {
    stack.rlim_cur = stack.rlim_max == RLIM_INFINITY ? rlim_t{64} << 20 : std::min(stack.rlim_max, rlim_t{64} << 20);
    setrlimit(RLIMIT_STACK, &stack);
  }
  uint64_t seed = 14;
  if (const char* s = std::getenv("FLOTILLA_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf("[ fuzz ] seed %llu (set FLOTILLA_FUZZ_SEED to replay another)\n", static_cast<unsigned long long>(seed));
  DevclusterProcess dc("fuzz");
  ASSERT_TRUE(dc.start()) << dc.log();
  auto ts = targets();
  // Seed objects (the CRD first, so its custom resources exist).
  std::rotate(ts.begin(), ts.end() - 2, ts.end() - 1);
  for (const auto& t : ts) {
    if (t.is_crd_kind) {
      ASSERT_TRUE(eventually([&] { return dc.call("GET", t.collection).first == 200; })) << t.collection;
    }
    auto [code, body] = dc.call("POST", t.collection, t.seed);
    ASSERT_EQ(code, 201) << t.collection << " " << body.dump();
  }
  Fuzzer f(seed);
  std::map<int, int> codes;
  int sent = 0;
  auto deadline = std::chrono::steady_clock::now() + kTimeBudget;
  for (; sent < kRequests && std::chrono::steady_clock::now() < deadline; ++sent) {
    const Target& t = ts[f.pick(ts.size())];
    std::string method, path = t.item, content_type = "application/json", body;
    const int kind = f.pick(11) / 2;
    switch (kind) {
      case 0: {
        method = "POST";
        path = t.collection;
        body = f.render(f.mutate_tree(with_name(t.seed, "fuzz-" + std::to_string(sent))));
        break;
      }
      case 1:
      case 2:
      case 3: {
        // A whole mutated object, sent as a replacement, a merge patch or a strategic merge patch.
        static const std::pair<const char*, const char*> kWrites[] = {
            {"PUT", "application/json"},
            {"PATCH", "application/merge-patch+json"},
            {"PATCH", "application/strategic-merge-patch+json"}};
        std::tie(method, content_type) = kWrites[kind - 1];
        body = f.render(f.mutate_tree(t.seed));
        break;
      }
      case 4:
        method = "PATCH";
        content_type = "application/json-patch+json";
        body = f.render(f.json_patch_ops(t.seed));
        break;
      default: {
        // DELETE of an object an earlier POST may have made, with hostile DeleteOptions.
        method = "DELETE";
        path = t.collection + "/fuzz-" + std::to_string(f.pick(sent + 1));
        Json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 0},
                        {"propagationPolicy", "Background"}, {"preconditions", {{"uid", "x"}}}};
        body = f.render(f.mutate_tree(options));
        break;
      }
    }
    // Status subresources (404 where there is none) take the same PUTs and PATCHes.
    if ((method == "PUT" || method == "PATCH") && f.chance(15)) path += "/status";
    if (std::getenv("FLOTILLA_FUZZ_TRACE"))  // replay aid: every request as sent
      std::fprintf(stderr, "[ fuzz ] %d %s %s (%s) %s\n", sent, method.c_str(), path.c_str(), content_type.c_str(),
                   body.substr(0, 2000).c_str());
    auto r = dc.http().send(method, path, body, content_type);
    ASSERT_TRUE(r.ok()) << "request " << sent << ": " << method << " " << path << " dropped: " << r.error << "\nbody: "
                        << body.substr(0, 500) << "\n" << dc.log();
    int code = r.response.status;
    if (std::getenv("FLOTILLA_FUZZ_TRACE")) std::fprintf(stderr, "[ fuzz ] %d -> %d\n", sent, code);
    ++codes[code];
    std::string what = "request " + std::to_string(sent) + ": " + method + " " + path + " (" + content_type + ") -> " +
                       std::to_string(code) + " " + r.response.body.substr(0, 400) + "\nbody: " + body.substr(0, 400);
    ASSERT_TRUE((code >= 200 && code < 300) || (code >= 400 && code < 500)) << what;
    if (code >= 400) {
      Json status = Json::parse(r.response.body, nullptr, false);
      ASSERT_TRUE(!status.is_discarded() && status.value("kind", "") == "Status") << what;
    }
  }
  std::string summary;
  for (const auto& [code, n] : codes) summary += " " + std::to_string(code) + ":" + std::to_string(n);
  std::printf("[ fuzz ] %d requests, answers by code:%s\n", sent, summary.c_str());
  EXPECT_GE(sent, 300) << "the machine is too slow for a meaningful run within the time budget";
  ASSERT_EQ(dc.call("GET", "/api/v1/namespaces/default").first, 200);
  std::this_thread::sleep_for(1s);  // let the kubelet settle what it does with the pods
  auto before = everything(dc);
  dc.stop();
  ASSERT_TRUE(dc.start()) << dc.log();
  auto after = everything(dc);
  EXPECT_EQ(before.size(), after.size());
  for (const auto& [key, obj] : before) {
    auto it = after.find(key);
    if (it == after.end()) {
      ADD_FAILURE() << key << " is gone after the restart";
      continue;
    }
    EXPECT_EQ(obj, it->second) << key;
  }
}
