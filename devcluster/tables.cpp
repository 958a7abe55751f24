#include "devcluster/tables.h"

#include <ctime>

#include "devcluster/api_types.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

Json col(const std::string& name, const std::string& type, int priority = 0, const std::string& format = "",
         const std::string& description = "") {
  return {{"name", name}, {"type", type}, {"format", format}, {"description", description}, {"priority", priority}};
}

std::string age_of(const Json& obj, long long now) {
  long long t = parse_rfc3339(obj["metadata"].value("creationTimestamp", ""));
  return t < 0 ? "<unknown>" : human_age(now - t);
}

std::string pod_status(const Json& pod) {
  if (pod["metadata"].contains("deletionTimestamp")) return "Terminating";
  const Json status = pod.value("status", Json::object());
  std::string reason = status.value("reason", "");
  if (!reason.empty()) return reason;
  for (const auto& cs : status.value("containerStatuses", Json::array())) {
    if (cs.contains("state") && cs["state"].contains("waiting")) {
      std::string r = cs["state"]["waiting"].value("reason", "");
      if (!r.empty()) return r;
    }
    if (cs.contains("state") && cs["state"].contains("terminated")) {
      std::string r = cs["state"]["terminated"].value("reason", "");
      if (!r.empty()) return r;
    }
  }
  return status.value("phase", "Pending");
}

std::string cell_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

}  // namespace

Json table_columns(const ResourceType& t) {
  Json c = Json::array({col("Name", "string", 0, "name", "Name must be unique within a namespace.")});
  if (t.is_crd) {
    if (t.printer_columns.is_array() && !t.printer_columns.empty()) {
      for (const auto& pc : t.printer_columns)
        c.push_back(col(pc.value("name", ""), pc.value("type", "string"), pc.value("priority", 0), pc.value("format", ""),
                        pc.value("description", "")));
    } else {
      c.push_back(col("Age", "date", 0, "", "CreationTimestamp"));
    }
    return c;
  }
  const std::string& p = t.plural;
  if (p == "pods") {
    c.push_back(col("Ready", "string", 0, "", "The aggregate readiness state of this pod for accepting traffic."));
    c.push_back(col("Status", "string", 0, "", "The aggregate status of the containers in this pod."));
    c.push_back(col("Restarts", "string", 0, "", "The number of times the containers in this pod have been restarted."));
    c.push_back(col("Age", "string"));
    c.push_back(col("IP", "string", 1));
    c.push_back(col("Node", "string", 1));
  } else if (p == "nodes") {
    c.push_back(col("Status", "string"));
    c.push_back(col("Roles", "string"));
    c.push_back(col("Age", "string"));
    c.push_back(col("Version", "string"));
    c.push_back(col("GPU", "string", 1));
    c.push_back(col("Zone", "string", 1));
  } else if (p == "namespaces") {
    c.push_back(col("Status", "string"));
    c.push_back(col("Age", "string"));
  } else if (p == "services") {
    c.push_back(col("Type", "string"));
    c.push_back(col("Cluster-IP", "string"));
    c.push_back(col("External-IP", "string"));
    c.push_back(col("Port(s)", "string"));
    c.push_back(col("Age", "string"));
  } else if (p == "configmaps") {
    c.push_back(col("Data", "integer"));
    c.push_back(col("Age", "string"));
  } else if (p == "secrets") {
    c.push_back(col("Type", "string"));
    c.push_back(col("Data", "integer"));
    c.push_back(col("Age", "string"));
  } else if (p == "events") {
    c = Json::array({col("Last Seen", "string"), col("Type", "string"), col("Reason", "string"), col("Object", "string"),
                     col("Message", "string")});
  } else if (p == "leases") {
    c.push_back(col("Holder", "string"));
    c.push_back(col("Age", "string"));
  } else if (p == "customresourcedefinitions") {
    c.push_back(col("Created At", "date"));
  } else if (p == "deployments") {
    c.push_back(col("Ready", "string", 0, "", "Number of the pod with ready state"));
    c.push_back(col("Up-to-date", "string", 0, "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."));
    c.push_back(col("Available", "string", 0, "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."));
    c.push_back(col("Age", "string"));
    c.push_back(col("Containers", "string", 1));
    c.push_back(col("Images", "string", 1));
    c.push_back(col("Selector", "string", 1));
  } else if (p == "replicasets") {
    c.push_back(col("Desired", "integer"));
    c.push_back(col("Current", "integer"));
    c.push_back(col("Ready", "integer"));
    c.push_back(col("Age", "string"));
  } else if (p == "poddisruptionbudgets") {
    c.push_back(col("Min Available", "string"));
    c.push_back(col("Max Unavailable", "string"));
    c.push_back(col("Allowed Disruptions", "integer"));
    c.push_back(col("Age", "string"));
  } else if (p == "roles" || p == "clusterroles") {
    c.push_back(col("Created At", "string"));
  } else if (p == "rolebindings" || p == "clusterrolebindings") {
    c.push_back(col("Role", "string"));
    c.push_back(col("Age", "string"));
    c.push_back(col("Users", "string", 1));
    c.push_back(col("Groups", "string", 1));
    c.push_back(col("ServiceAccounts", "string", 1));
  } else {
    c.push_back(col("Age", "string"));
  }
  return c;
}

Json table_row(const ResourceType& t, const Json& obj, long long now, const std::string& include_object) {
  const Json& meta = obj["metadata"];
  Json cells = Json::array({meta.value("name", "")});
  const std::string& p = t.plural;
  if (t.is_crd) {
    if (t.printer_columns.is_array() && !t.printer_columns.empty()) {
      for (const auto& pc : t.printer_columns) {
        auto values = jsonpath_eval(obj, pc.value("jsonPath", ""));
        Json v = values.empty() ? Json() : values[0];
        if (pc.value("type", "") == "date" && v.is_string()) {
          long long ts = parse_rfc3339(v.get<std::string>());
          v = ts < 0 ? Json() : Json(human_age(now - ts));
        }
        cells.push_back(v);
      }
    } else {
      cells.push_back(age_of(obj, now));
    }
  } else if (p == "pods") {
    const Json status = obj.value("status", Json::object());
    int total = static_cast<int>(obj["spec"].value("containers", Json::array()).size()), ready = 0, restarts = 0;
    for (const auto& cs : status.value("containerStatuses", Json::array())) {
      ready += cs.value("ready", false) ? 1 : 0;
      restarts += cs.value("restartCount", 0);
    }
    cells.push_back(std::to_string(ready) + "/" + std::to_string(total));
    cells.push_back(pod_status(obj));
    cells.push_back(std::to_string(restarts));
    cells.push_back(age_of(obj, now));
    cells.push_back(status.value("podIP", "<none>"));
    cells.push_back(obj["spec"].value("nodeName", "<none>"));
  } else if (p == "nodes") {
    std::string ready = "Unknown";
    for (const auto& c : obj.value("/status/conditions"_json_pointer, Json::array()))
      if (c.value("type", "") == "Ready") ready = c.value("status", "") == "True" ? "Ready" : "NotReady";
    if (obj.value("/spec/unschedulable"_json_pointer, false)) ready += ",SchedulingDisabled";
    cells.push_back(ready);
    cells.push_back("<none>");
    cells.push_back(age_of(obj, now));
    cells.push_back(obj.value("/status/nodeInfo/kubeletVersion"_json_pointer, std::string()));
    const Json labels = meta.value("labels", Json::object());
    cells.push_back(labels.value("nvidia.com/gpu.product", "<none>") + " x" +
                    obj.value("/status/allocatable"_json_pointer, Json::object()).value("nvidia.com/gpu", "0"));
    cells.push_back(labels.value("topology.kubernetes.io/zone", "<none>"));
  } else if (p == "namespaces") {
    cells.push_back(obj.value("/status/phase"_json_pointer, std::string("Active")));
    cells.push_back(age_of(obj, now));
  } else if (p == "services") {
    const Json spec = obj.value("spec", Json::object());
    std::string ports;
    for (const auto& port : spec.value("ports", Json::array()))
      ports += (ports.empty() ? "" : ",") + cell_text(port.value("port", Json())) + "/" + port.value("protocol", "TCP");
    cells.push_back(spec.value("type", "ClusterIP"));
    cells.push_back(spec.value("clusterIP", "<none>"));
    cells.push_back("<none>");
    cells.push_back(ports.empty() ? "<none>" : ports);
    cells.push_back(age_of(obj, now));
  } else if (p == "configmaps") {
    cells.push_back(static_cast<int>(obj.value("data", Json::object()).size() + obj.value("binaryData", Json::object()).size()));
    cells.push_back(age_of(obj, now));
  } else if (p == "secrets") {
    cells.push_back(obj.value("type", "Opaque"));
    cells.push_back(static_cast<int>(obj.value("data", Json::object()).size()));
    cells.push_back(age_of(obj, now));
  } else if (p == "events") {
    std::string last = obj.value("lastTimestamp", obj.value("eventTime", meta.value("creationTimestamp", "")));
    long long ts = parse_rfc3339(last);
    const Json inv = obj.value("involvedObject", Json::object());
    std::string kind = inv.value("kind", "");
    std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
    cells = Json::array({ts < 0 ? "<unknown>" : human_age(now - ts), obj.value("type", ""), obj.value("reason", ""),
                         kind + "/" + inv.value("name", ""), obj.value("message", "")});
  } else if (p == "leases") {
    cells.push_back(obj.value("/spec/holderIdentity"_json_pointer, std::string()));
    cells.push_back(age_of(obj, now));
  } else if (p == "customresourcedefinitions") {
    cells.push_back(meta.value("creationTimestamp", ""));
  } else if (p == "deployments") {
    const Json spec = obj.value("spec", Json::object()), status = obj.value("status", Json::object());
    cells.push_back(std::to_string(status.value("readyReplicas", 0)) + "/" + std::to_string(spec.value("replicas", 1)));
    cells.push_back(status.value("updatedReplicas", 0));
    cells.push_back(status.value("availableReplicas", 0));
    cells.push_back(age_of(obj, now));
    std::string names, images, selector;
    for (const auto& c : spec.value("/template/spec/containers"_json_pointer, Json::array())) {
      names += (names.empty() ? "" : ",") + c.value("name", "");
      images += (images.empty() ? "" : ",") + c.value("image", "");
    }
    const Json match_labels = spec.value("/selector/matchLabels"_json_pointer, Json::object());
    for (const auto& [k, v] : match_labels.items())
      selector += (selector.empty() ? "" : ",") + k + "=" + cell_text(v);
    cells.push_back(names);
    cells.push_back(images);
    cells.push_back(selector);
  } else if (p == "replicasets") {
    cells.push_back(obj.value("/spec/replicas"_json_pointer, 1));
    cells.push_back(obj.value("/status/replicas"_json_pointer, 0));
    cells.push_back(obj.value("/status/readyReplicas"_json_pointer, 0));
    cells.push_back(age_of(obj, now));
  } else if (p == "poddisruptionbudgets") {
    const Json spec = obj.value("spec", Json::object());
    cells.push_back(spec.contains("minAvailable") ? cell_text(spec["minAvailable"]) : "N/A");
    cells.push_back(spec.contains("maxUnavailable") ? cell_text(spec["maxUnavailable"]) : "N/A");
    cells.push_back(obj.value("/status/disruptionsAllowed"_json_pointer, 0));
    cells.push_back(age_of(obj, now));
  } else if (p == "roles" || p == "clusterroles") {
    cells.push_back(meta.value("creationTimestamp", ""));
  } else if (p == "rolebindings" || p == "clusterrolebindings") {
    cells.push_back(obj.value("/roleRef/kind"_json_pointer, std::string()) + "/" + obj.value("/roleRef/name"_json_pointer, std::string()));
    cells.push_back(age_of(obj, now));
    std::string users, groups, sas;
    for (const auto& sub : obj.value("subjects", Json::array())) {
      const std::string kind = sub.value("kind", ""), name = sub.value("name", "");
      std::string& into = kind == "User" ? users : kind == "Group" ? groups : sas;
      into += (into.empty() ? "" : ", ") + (kind == "ServiceAccount" ? sub.value("namespace", "") + "/" + name : name);
    }
    cells.push_back(users);
    cells.push_back(groups);
    cells.push_back(sas);
  } else {
    cells.push_back(age_of(obj, now));
  }
  Json row = {{"cells", cells}};
  if (include_object == "Object") {
    row["object"] = obj;
  } else if (include_object != "None") {
    row["object"] = {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}};
  }
  return row;
}

Json make_table(const ResourceType& type, const std::vector<const Json*>& objects, const std::string& rv,
                const std::string& continue_token, const std::string& include_object, bool with_columns) {
  long long now = static_cast<long long>(std::time(nullptr));
  Json rows = Json::array();
  for (const Json* o : objects) rows.push_back(table_row(type, *o, now, include_object));
  Json meta = {{"resourceVersion", rv}};
  if (!continue_token.empty()) meta["continue"] = continue_token;
  Json table = {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}, {"rows", rows}};
  table["columnDefinitions"] = with_columns ? table_columns(type) : Json::array();
  return table;
}

}  // namespace flotilla::devcluster
