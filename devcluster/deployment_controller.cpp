#include "devcluster/deployment_controller.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <set>

#include "devcluster/pdb_status.h"

namespace flotilla::devcluster {
namespace {

using Clock = std::chrono::steady_clock;

const char kHashLabel[] = "pod-template-hash";

// maxSurge / maxUnavailable: an int, or "N%" of replicas (rounded up or down).
int resolve_int_or_percent(const Json& value, int replicas, int fallback_percent, bool round_up) {
  double percent = fallback_percent;
  if (value.is_number_integer()) return std::max(0, value.get<int>());
  if (value.is_string()) {
    std::string text = value.get<std::string>();
    if (text.empty() || text.back() != '%') {
      try {
        return std::max(0, std::stoi(text));
      } catch (...) {
        return 0;
      }
    }
    try {
      percent = std::stod(text.substr(0, text.size() - 1));
    } catch (...) {
      percent = fallback_percent;
    }
  }
  double v = percent * replicas / 100.0;
  return std::max(0, static_cast<int>(round_up ? std::ceil(v) : std::floor(v)));
}

// The name of obj's controller of `kind` (apps/v1), "" when it has none.
std::string controller_name(const Json& obj, const std::string& kind) {
  for (const auto& ref : obj["metadata"].value("ownerReferences", Json::array()))
    if (ref.value("kind", "") == kind && ref.value("apiVersion", "") == "apps/v1" && ref.value("controller", false))
      return ref.value("name", "");
  return "";
}

bool owned_by(const Json& obj, const std::string& uid) {
  for (const auto& ref : obj["metadata"].value("ownerReferences", Json::array()))
    if (ref.value("uid", "") == uid && ref.value("controller", false)) return true;
  return false;
}

struct PodView {
  std::string name;
  bool ready = false;
  bool available = false;
  std::string created;
};

PodView view_of(const Json& pod, long long now, int min_ready_seconds) {
  PodView v;
  v.name = pod["metadata"].value("name", "");
  v.created = pod["metadata"].value("creationTimestamp", "");
  for (const auto& c : pod.value("/status/conditions"_json_pointer, Json::array())) {
    if (c.value("type", "") != "Ready" || c.value("status", "") != "True") continue;
    v.ready = true;
    long long since = parse_rfc3339(c.value("lastTransitionTime", ""));
    v.available = min_ready_seconds <= 0 || (since >= 0 && now - since >= min_ready_seconds);
  }
  return v;
}

Json condition(const std::string& type, const std::string& status, const std::string& reason, const std::string& message,
               const Json& previous, const std::string& now) {
  Json c = {{"type", type}, {"status", status}, {"reason", reason}, {"message", message},
            {"lastUpdateTime", now}, {"lastTransitionTime", now}};
  if (previous.is_object() && previous.value("status", "") == status) {
    c["lastTransitionTime"] = previous.value("lastTransitionTime", now);
    if (previous.value("reason", "") == reason && previous.value("message", "") == message)
      c["lastUpdateTime"] = previous.value("lastUpdateTime", now);
  }
  return c;
}

}  // namespace

std::string pod_template_hash(const Json& template_spec) {
  uint32_t h = 2166136261u;
  for (unsigned char c : template_spec.dump()) {
    h ^= c;
    h *= 16777619u;
  }
  static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (char c : std::to_string(h)) out += alphabet[static_cast<unsigned char>(c) % 27];
  return out;
}

DeploymentController::DeploymentController(Api& api, std::chrono::milliseconds tick)
    : api_(api), tick_(tick), builtin_registry_(api.registry()) {
  deployments_ = builtin_registry_->find("apps", "v1", "deployments");
  replicasets_ = builtin_registry_->find("apps", "v1", "replicasets");
  budgets_ = builtin_registry_->find("policy", "v1", "poddisruptionbudgets");
  pods_ = builtin_registry_->find("", "v1", "pods");
}

DeploymentController::~DeploymentController() { stop(); }

void DeploymentController::start() {
  {
    auto lock = api_.store().lock();
    cursor_ = api_.store().rv_locked();
  }
  thread_ = std::thread([this] { loop(); });
}

void DeploymentController::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void DeploymentController::loop() {
  // Every deployment once a second (availability after minReadySeconds, progress deadlines),
  // and those whose pods or spec changed as soon as the change is written.
  auto last_full = Clock::time_point{};
  std::vector<EventPtr> events;
  while (!stopping_.load()) {
    std::set<std::pair<std::string, std::string>> dirty;
    bool full = Clock::now() - last_full >= std::chrono::seconds(1);
    {
      auto lock = api_.store().lock();
      api_.store().wait_locked(lock, cursor_, tick_);
      events.clear();
      if (!api_.store().events_since_locked(cursor_, &events)) full = true;
      for (const auto& ev : events) {
        cursor_ = ev->rv;
        if (ev->resource == "apps/deployments") dirty.emplace(ev->ns, ev->name);
        if (ev->resource == "apps/replicasets") {
          std::string owner = controller_name(*ev->object, "Deployment");
          if (!owner.empty()) dirty.emplace(ev->ns, owner);
        }
        if (ev->resource == "/pods") {
          // pod → its ReplicaSet → that ReplicaSet's Deployment
          std::string rs = controller_name(*ev->object, "ReplicaSet");
          ObjectPtr rs_obj = rs.empty() ? nullptr : api_.store().get_locked("apps/replicasets", ev->ns, rs);
          std::string owner = rs_obj ? controller_name(*rs_obj, "Deployment") : "";
          if (!owner.empty()) dirty.emplace(ev->ns, owner);
        }
      }
      cursor_ = std::max(cursor_, api_.store().rv_locked());
      if (full)
        for (const auto& [key, obj] : api_.store().list_locked("apps/deployments", ""))
          dirty.emplace((*obj)["metadata"].value("namespace", ""), (*obj)["metadata"].value("name", ""));
    }
    if (full) {
      last_full = Clock::now();
      try {
        update_disruption_budgets();
      } catch (const std::exception& e) {
        std::cerr << std::string("flotilla-devcluster: pod disruption budgets: ") + e.what() + "; retrying later\n" << std::flush;
      }
    }
    for (const auto& [ns, name] : dirty) {
      try {
        sync(ns, name);
      } catch (const std::exception& e) {
        std::cerr << "flotilla-devcluster: deployment " + ns + "/" + name + ": " + e.what() + "; retrying later\n" << std::flush;
      }
    }
  }
}

void DeploymentController::update_disruption_budgets() {
  std::vector<Json> budgets;
  std::map<std::string, std::vector<Json>> pods_by_ns;
  {
    auto lock = api_.store().lock();
    for (const auto& [key, obj] : api_.store().list_locked("policy/poddisruptionbudgets", "")) budgets.push_back(*obj);
    if (budgets.empty()) return;
    for (const auto& [key, obj] : api_.store().list_locked("/pods", ""))
      pods_by_ns[(*obj)["metadata"].value("namespace", "")].push_back(*obj);
  }
  const std::string now = now_rfc3339();
  for (const auto& pdb : budgets) {
    const std::string ns = pdb["metadata"].value("namespace", ""), name = pdb["metadata"].value("name", "");
    Json status = pdb_status(pdb, pods_by_ns[ns], now);
    if (pdb.value("status", Json()) == status) continue;
    api_.mutate(*budgets_, ns, name, [&](Json& p) {
      if (p["metadata"].value("uid", "") != pdb["metadata"].value("uid", "")) return false;
      p["status"] = status;
      return true;
    });
  }
}

void DeploymentController::sync(const std::string& ns, const std::string& name) {
  Outcome got = api_.get(*deployments_, ns, name);
  if (!got.ok()) return;  // gone: the garbage collector deletes its ReplicaSets, then their pods
  const Json& dep = got.object;
  if (dep["metadata"].contains("deletionTimestamp")) return;
  const Json spec = dep.value("spec", Json::object());
  const int replicas = std::max(0, spec.value("replicas", 1));
  const Json tmpl = spec.value("template", Json::object());
  const std::string hash = pod_template_hash(tmpl);
  const std::string uid = dep["metadata"].value("uid", "");
  const std::string rs_name = name + "-" + hash;
  const int min_ready = spec.value("minReadySeconds", 0);
  const long long now = static_cast<long long>(std::time(nullptr));

  // This Deployment's ReplicaSets (by uid → object) and their pods.
  std::map<std::string, Json> sets;
  std::vector<PodView> fresh, old;
  std::map<std::string, std::vector<PodView>> pods_by_set;  // active pods per ReplicaSet name
  std::vector<std::string> finished;
  int terminating_old = 0;
  {
    auto lock = api_.store().lock();
    for (const auto& [key, obj] : api_.store().list_locked("apps/replicasets", ns))
      if (owned_by(*obj, uid)) sets[(*obj)["metadata"].value("uid", "")] = *obj;
    for (const auto& [key, obj] : api_.store().list_locked("/pods", ns)) {
      const Json& pod = *obj;
      std::string set_name;
      for (const auto& [set_uid, set] : sets)
        if (owned_by(pod, set_uid)) set_name = set["metadata"].value("name", "");
      if (set_name.empty()) continue;
      const bool is_new = set_name == rs_name;
      if (pod["metadata"].contains("deletionTimestamp")) {
        if (!is_new) ++terminating_old;
        continue;
      }
      std::string phase = pod.value("/status/phase"_json_pointer, std::string());
      if (phase == "Succeeded" || phase == "Failed") {
        finished.push_back(pod["metadata"].value("name", ""));
        continue;
      }
      PodView v = view_of(pod, now, min_ready);
      pods_by_set[set_name].push_back(v);
      (is_new ? fresh : old).push_back(v);
    }
  }
  for (const auto& pod : finished) api_.remove(*pods_, ns, pod, {});

  // The ReplicaSet of the current template, created on first need (kube-controller-manager
  // names it <deployment>-<pod-template-hash>).
  std::string rs_uid, create_error;
  for (const auto& [set_uid, set] : sets)
    if (set["metadata"].value("name", "") == rs_name) rs_uid = set_uid;
  int revision = 0;
  for (const auto& [set_uid, set] : sets) {
    std::string r = set["metadata"].value("annotations", Json::object()).value("deployment.kubernetes.io/revision", "0");
    try {
      revision = std::max(revision, std::stoi(r));
    } catch (...) {
    }
  }
  const bool paused = spec.value("paused", false);
  if (rs_uid.empty() && !paused) {
    Json rs_template = tmpl;
    rs_template["metadata"]["labels"][kHashLabel] = hash;
    Json selector = spec.value("selector", Json::object());
    selector["matchLabels"][kHashLabel] = hash;
    Json labels = tmpl.value("/metadata/labels"_json_pointer, Json::object());
    labels[kHashLabel] = hash;
    Json rs = {{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"},
               {"metadata", {{"name", rs_name}, {"labels", labels},
                             {"annotations", {{"deployment.kubernetes.io/revision", std::to_string(revision + 1)},
                                              {"deployment.kubernetes.io/desired-replicas", std::to_string(replicas)}}},
                             {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", name},
                                                               {"uid", uid}, {"controller", true}, {"blockOwnerDeletion", true}}})}}},
               {"spec", {{"replicas", 0}, {"minReadySeconds", min_ready}, {"selector", selector}, {"template", rs_template}}}};
    Outcome o = api_.create(*replicasets_, ns, std::move(rs), {});
    if (o.ok()) {
      rs_uid = o.object["metadata"].value("uid", "");
      sets[rs_uid] = o.object;
    } else {
      create_error = o.error->message;
    }
  }

  const Json strategy = spec.value("strategy", Json::object());
  const bool recreate = strategy.value("type", "RollingUpdate") == "Recreate";
  const Json rolling = strategy.value("rollingUpdate", Json::object());
  const int max_surge = recreate ? 0 : resolve_int_or_percent(rolling.value("maxSurge", Json("25%")), replicas, 25, true);
  int max_unavailable = recreate ? replicas : resolve_int_or_percent(rolling.value("maxUnavailable", Json("25%")), replicas, 25, false);
  if (!recreate && max_surge == 0 && max_unavailable == 0) max_unavailable = 1;

  int created = 0;
  std::set<std::string> removed;
  auto create = [&](int n) {
    for (int i = 0; i < n && !rs_uid.empty() && create_error.empty(); ++i) {
      Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", tmpl.value("metadata", Json::object())},
                  {"spec", tmpl.value("spec", Json::object())}};
      Json& meta = pod["metadata"];
      meta.erase("name");
      meta.erase("namespace");
      meta["generateName"] = rs_name + "-";
      meta["labels"][kHashLabel] = hash;
      meta["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", rs_name},
                                              {"uid", rs_uid}, {"controller", true}, {"blockOwnerDeletion", true}}});
      Outcome o = api_.create(*pods_, ns, std::move(pod), {});
      if (!o.ok()) create_error = o.error->message;
      else ++created;
    }
  };
  // Deletes n pods of `from`: not-ready ones first, then the newest.
  auto remove = [&](std::vector<PodView> from, int n) {
    std::stable_sort(from.begin(), from.end(), [](const PodView& a, const PodView& b) {
      if (a.ready != b.ready) return !a.ready;
      return a.created > b.created;
    });
    for (int i = 0; i < n && i < static_cast<int>(from.size()); ++i) {
      api_.remove(*pods_, ns, from[i].name, {});
      removed.insert(from[i].name);
    }
  };
  auto available = [](const std::vector<PodView>& pods) {
    return static_cast<int>(std::count_if(pods.begin(), pods.end(), [](const PodView& p) { return p.available; }));
  };
  const int n_new = static_cast<int>(fresh.size()), n_old = static_cast<int>(old.size());
  if (!paused) {
    if (n_new > replicas) {
      remove(fresh, n_new - replicas);
    } else if (recreate) {
      if (n_old > 0) remove(old, n_old);
      else if (terminating_old == 0) create(replicas - n_new);
    } else {
      create(std::max(0, std::min(replicas - n_new, replicas + max_surge - (n_new + n_old))));
      const int min_available = replicas - max_unavailable;
      const int budget = (n_new + n_old) - min_available - (n_new - available(fresh));
      if (n_old > 0 && budget > 0) remove(old, std::min(budget, n_old));
    }
  }

  // Each ReplicaSet: spec.replicas = the pods it keeps after this pass, status from what was
  // observed; old ones without pods beyond revisionHistoryLimit are deleted.
  std::vector<std::pair<int, std::string>> empty_old;  // (revision, name)
  for (const auto& [set_uid, set] : sets) {
    const std::string set_name = set["metadata"].value("name", "");
    const auto& pods = pods_by_set[set_name];
    int kept = 0, ready_n = 0, avail_n = 0;
    for (const auto& p : pods) {
      kept += removed.count(p.name) ? 0 : 1;
      ready_n += p.ready;
      avail_n += p.available;
    }
    if (set_name == rs_name) kept += created;
    if (set_name != rs_name && pods.empty()) {
      int r = 0;
      try {
        r = std::stoi(set["metadata"].value("annotations", Json::object()).value("deployment.kubernetes.io/revision", "0"));
      } catch (...) {
      }
      empty_old.emplace_back(r, set_name);
    }
    // Changing spec.replicas bumps the generation in the same write; status observes that one.
    const bool resized = set.value("/spec/replicas"_json_pointer, -1) != kept;
    Json rs_status = {{"replicas", static_cast<int>(pods.size())}, {"fullyLabeledReplicas", static_cast<int>(pods.size())},
                      {"readyReplicas", ready_n}, {"availableReplicas", avail_n},
                      {"observedGeneration", set["metadata"].value("generation", 0LL) + (resized ? 1 : 0)}};
    if (resized || set.value("status", Json()) != rs_status)
      api_.mutate(*replicasets_, ns, set_name, [&](Json& r) {
        r["spec"]["replicas"] = kept;
        r["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] = std::to_string(replicas);
        r["status"] = rs_status;
        return true;
      });
  }
  std::sort(empty_old.begin(), empty_old.end());
  const int history = std::max(0, spec.value("revisionHistoryLimit", 10));
  for (size_t i = 0; i + history < empty_old.size(); ++i) api_.remove(*replicasets_, ns, empty_old[i].second, {});

  // Deployment status, from what was observed at the start of this pass (the next pass sees
  // the writes).
  const int ready = static_cast<int>(std::count_if(fresh.begin(), fresh.end(), [](auto& p) { return p.ready; }) +
                                     std::count_if(old.begin(), old.end(), [](auto& p) { return p.ready; }));
  const int avail = available(fresh) + available(old);
  const Json prev_status = dep.value("status", Json::object());
  Json prev_conditions = Json::object();
  for (const auto& c : prev_status.value("conditions", Json::array())) prev_conditions[c.value("type", "")] = c;
  const std::string now_text = rfc3339(now);
  Json conditions = Json::array();
  const bool min_ok = avail >= replicas - max_unavailable;
  conditions.push_back(condition("Available", min_ok ? "True" : "False",
                                 min_ok ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
                                 min_ok ? "Deployment has minimum availability." : "Deployment does not have minimum availability.",
                                 prev_conditions.value("Available", Json()), now_text));
  const bool complete = n_new == replicas && n_old == 0 && available(fresh) == replicas;
  const Json prev_progress = prev_conditions.value("Progressing", Json());
  const bool counts_changed = prev_status.value("replicas", -1) != n_new + n_old ||
                              prev_status.value("updatedReplicas", -1) != n_new ||
                              prev_status.value("readyReplicas", -1) != ready ||
                              prev_status.value("availableReplicas", -1) != avail ||
                              prev_status.value("observedGeneration", -1LL) != dep["metadata"].value("generation", 0LL);
  const long long deadline = spec.value("progressDeadlineSeconds", 600);
  if (complete) {
    conditions.push_back(condition("Progressing", "True", "NewReplicaSetAvailable",
                                   "ReplicaSet \"" + rs_name + "\" has successfully progressed.", prev_progress, now_text));
  } else if (counts_changed || !prev_progress.is_object() || prev_progress.value("reason", "") == "NewReplicaSetAvailable") {
    Json c = condition("Progressing", "True", "ReplicaSetUpdated", "ReplicaSet \"" + rs_name + "\" is progressing.",
                       Json(), now_text);
    if (prev_progress.is_object() && prev_progress.value("status", "") == "True")
      c["lastTransitionTime"] = prev_progress.value("lastTransitionTime", now_text);
    conditions.push_back(c);
  } else if (prev_progress.value("reason", "") != "ProgressDeadlineExceeded" &&
             parse_rfc3339(prev_progress.value("lastUpdateTime", now_text)) + deadline < now) {
    conditions.push_back(condition("Progressing", "False", "ProgressDeadlineExceeded",
                                   "ReplicaSet \"" + rs_name + "\" has timed out progressing.", prev_progress, now_text));
  } else {
    conditions.push_back(prev_progress);
  }
  if (!create_error.empty())
    conditions.push_back(condition("ReplicaFailure", "True", "FailedCreate", create_error,
                                   prev_conditions.value("ReplicaFailure", Json()), now_text));
  Json status = {{"observedGeneration", dep["metadata"].value("generation", 0LL)},
                 {"replicas", n_new + n_old},
                 {"updatedReplicas", n_new},
                 {"readyReplicas", ready},
                 {"availableReplicas", avail},
                 {"conditions", conditions}};
  if (replicas - avail > 0) status["unavailableReplicas"] = replicas - avail;
  const std::string revision_text = std::to_string(std::max(revision, 1));
  Json current_rs = rs_uid.empty() ? Json() : sets[rs_uid];
  const std::string want_revision = current_rs.is_null() ? "" : current_rs["metadata"].value("annotations", Json::object()).value(
                                                                     "deployment.kubernetes.io/revision", revision_text);
  const bool revision_ok = want_revision.empty() ||
                           dep["metadata"].value("annotations", Json::object()).value("deployment.kubernetes.io/revision", "") == want_revision;
  if (status == prev_status && revision_ok) return;
  api_.mutate(*deployments_, ns, name, [&](Json& d) {
    if (d["metadata"].value("uid", "") != uid) return false;
    if (!want_revision.empty()) d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = want_revision;
    d["status"] = status;
    return true;
  });
}

}  // namespace flotilla::devcluster
