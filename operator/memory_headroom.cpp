#include "operator/memory_headroom.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

// What a rank that ran out of memory may hold next time, as a share of its raw prediction.
constexpr double kAfterOutOfMemoryShare = 0.9;
// A measured peak above the prediction moves the headroom only by at least this share of the
// GPU's memory.
constexpr double kMeasuredStepShare = 0.01;

// The pod's GPU type as the catalog names it, its capacity, and its prediction: in all and
// without the headroom it was planned with. nullopt when there is nothing to learn from
// (unknown pod or type, no prediction).
struct PodMemory {
  std::string gpu_type;
  std::int64_t capacity_bytes = 0;
  std::int64_t predicted_bytes = 0;
  std::int64_t raw_bytes = 0;  // predicted_bytes less the headroom in it
};
std::optional<PodMemory> pod_memory(const JobPlan& plan, const std::string& pod, const planner::GpuCatalog& catalog) {
  const auto p = std::find_if(plan.pods.begin(), plan.pods.end(), [&](const PlanPod& x) { return x.name == pod; });
  if (p == plan.pods.end()) return std::nullopt;
  const planner::GpuType* gpu = catalog.find(p->gpu_type);
  const PodPrediction predicted = plan.predicted_for(pod);
  if (gpu == nullptr || gpu->memory_bytes <= 0 || predicted.peak_bytes <= 0) return std::nullopt;
  return PodMemory{gpu->name, gpu->memory_bytes, predicted.peak_bytes,
                   std::max<std::int64_t>(predicted.peak_bytes - predicted.headroom_bytes, 0)};
}

}  // namespace

std::int64_t MemoryHeadroom::bytes_for(const std::string& gpu_type) const {
  const TypeHeadroom* t = find(gpu_type);
  return t != nullptr ? t->bytes : 0;
}

const TypeHeadroom* MemoryHeadroom::find(const std::string& gpu_type) const {
  for (const TypeHeadroom& t : types)
    if (t.gpu_type == gpu_type) return &t;
  return nullptr;
}

void MemoryHeadroom::set(TypeHeadroom type) {
  for (TypeHeadroom& t : types)
    if (t.gpu_type == type.gpu_type) {
      t = std::move(type);
      return;
    }
  types.push_back(std::move(type));
  std::sort(types.begin(), types.end(),
            [](const TypeHeadroom& a, const TypeHeadroom& b) { return a.gpu_type < b.gpu_type; });
}

std::string MemoryHeadroom::signature() const {
  std::string out;
  for (const TypeHeadroom& t : types) out += (out.empty() ? "" : ",") + t.gpu_type + "=" + std::to_string(t.bytes);
  return out;
}

bool MemoryHeadroom::keep_only(const std::string& model_key) {
  const auto before = types.size();
  std::erase_if(types, [&](const TypeHeadroom& t) { return t.model != model_key; });
  return types.size() != before;
}

std::string headroom_key(const JobSpec& spec) {
  return spec.model_key() + "|" + (spec.worker_kind == WorkerKind::kMegatron ? "megatron" : "flotilla");
}

std::string MemoryHeadroom::summary() const {
  std::string out;
  for (const TypeHeadroom& t : types) out += (out.empty() ? "" : ", ") + t.gpu_type + " " + bytes_text(t.bytes);
  return out;
}

MemoryHeadroom MemoryHeadroom::from_status(const Json& status) {
  MemoryHeadroom out;
  if (!status.is_object()) return out;
  const auto it = status.find("memoryHeadroom");
  if (it == status.end() || !it->is_array()) return out;
  for (const Json& e : *it) {
    if (!e.is_object()) continue;
    // Field by field, a wrong type read as absent: a hand-edited status must not throw in every
    // reconcile of the job.
    const auto text = [&](const char* key) {
      const auto it = e.find(key);
      return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const auto integer = [&](const char* key) {
      const auto it = e.find(key);
      return it != e.end() && it->is_number_integer() ? it->get<std::int64_t>() : std::int64_t{0};
    };
    TypeHeadroom t;
    t.gpu_type = text("gpuType");
    t.model = text("model");
    t.bytes = integer("bytes");
    t.reason = text("reason");
    t.message = text("message");
    t.epoch = integer("epoch");
    // A status edited by hand could carry anything: past a petabyte is no GPU's headroom, and
    // would overflow the memory model's sums.
    constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
    if (!t.gpu_type.empty() && t.bytes > 0 && t.bytes <= kMaxBytes) out.set(std::move(t));
  }
  return out;
}

Json MemoryHeadroom::to_status() const {
  Json out = Json::array();
  for (const TypeHeadroom& t : types)
    out.push_back({{"gpuType", t.gpu_type},
                   {"model", t.model},
                   {"bytes", t.bytes},
                   {"reason", t.reason},
                   {"message", t.message},
                   {"epoch", t.epoch}});
  return out;
}

namespace {

// "<number> <unit>" as PyTorch's format_size() prints it ("11.06 MiB", "512 bytes"), in bytes.
std::optional<double> torch_size(std::string_view number, std::string_view unit) {
  const std::string text(number);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // Finite and below 2^50 of its unit, so the bytes fit an int64 ("inf" parses as a number).
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(value) || value < 0 || value > 0x1p50)
    return std::nullopt;
  for (const auto& [name, scale] : {std::pair<std::string_view, double>{"bytes", 1.0},
                                    {"KiB", 1024.0},
                                    {"MiB", 1024.0 * 1024},
                                    {"GiB", 1024.0 * 1024 * 1024}})
    if (unit == name) return value * scale;
  return std::nullopt;
}

// The size right after `prefix` ("this process has 79.13 GiB ...").
std::optional<double> torch_size_after(const std::string& line, std::string_view prefix) {
  const auto at = line.find(prefix);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t number_at = at + prefix.size();
  const auto space = line.find(' ', number_at);
  if (space == std::string::npos) return std::nullopt;
  auto unit_end = line.find_first_of(" .;,)", space + 1);
  if (unit_end == std::string::npos) unit_end = line.size();
  return torch_size(std::string_view(line).substr(number_at, space - number_at),
                    std::string_view(line).substr(space + 1, unit_end - space - 1));
}

// The size right before `suffix` ("47.06 MiB free;").
std::optional<double> torch_size_before(const std::string& line, std::string_view suffix) {
  const auto at = line.find(suffix);
  if (at == std::string::npos || at == 0) return std::nullopt;
  const auto unit_at = line.rfind(' ', at - 1);
  if (unit_at == std::string::npos || unit_at == 0) return std::nullopt;
  const auto number_at = line.rfind(' ', unit_at - 1);
  const std::size_t from = number_at == std::string::npos ? 0 : number_at + 1;
  return torch_size(std::string_view(line).substr(from, unit_at - from),
                    std::string_view(line).substr(unit_at + 1, at - unit_at - 1));
}

}  // namespace

std::optional<std::int64_t> usable_bytes_in(const std::string& worker_message) {
  // The reference worker: "usable GPU memory N bytes".
  static constexpr std::string_view kPhrase = "usable GPU memory ";
  if (const auto at = worker_message.rfind(kPhrase); at != std::string::npos) {
    const char* digits = worker_message.data() + at + kPhrase.size();
    const char* end = worker_message.data() + worker_message.size();
    std::int64_t bytes = 0;
    const auto [after, error] = std::from_chars(digits, end, bytes);
    if (error == std::errc() && std::string_view(after, end - after).starts_with(" bytes") && bytes > 0) return bytes;
    return std::nullopt;
  }
  // PyTorch 2.x: "... of which 11.06 MiB is free. Including non-PyTorch memory, this process has
  // 79.13 GiB memory in use." What the process held plus what was free.
  const auto free_2x = torch_size_after(worker_message, "of which ");
  const auto held_2x = torch_size_after(worker_message, "this process has ");
  if (free_2x && held_2x) return static_cast<std::int64_t>(*free_2x + *held_2x);
  // PyTorch 1.x: "(GPU 0; 7.93 GiB total capacity; 130.35 MiB already allocated; 47.06 MiB free;
  // 188.00 MiB reserved in total by PyTorch)". Free plus PyTorch's reserve (its context aside).
  const auto free_1x = torch_size_before(worker_message, " free;");
  const auto reserved_1x = torch_size_before(worker_message, " reserved in total by PyTorch");
  if (free_1x && reserved_1x) return static_cast<std::int64_t>(*free_1x + *reserved_1x);
  return std::nullopt;
}


std::optional<TypeHeadroom> after_out_of_memory(const JobPlan& plan, const std::string& pod,
                                                const std::string& worker_message, const MemoryHeadroom& before,
                                                const planner::GpuCatalog& catalog) {
  const auto m = pod_memory(plan, pod, catalog);
  if (!m) return std::nullopt;
  // A GPU that offered less than the raw prediction (a catalog that overstates it, memory other
  // processes hold) bounds what a rank may hold by what it offered.
  const std::optional<std::int64_t> usable = usable_bytes_in(worker_message);
  const std::int64_t bound = usable ? std::min(m->raw_bytes, *usable) : m->raw_bytes;
  const auto may_hold = static_cast<std::int64_t>(std::floor(kAfterOutOfMemoryShare * static_cast<double>(bound)));
  // E' = C − 0.9·raw, or more if the job has learned more since this plan was made (that already
  // rules the failed plan out: raw + E > C).
  const std::int64_t bytes = std::max(m->capacity_bytes - may_hold, before.bytes_for(m->gpu_type));
  TypeHeadroom t{m->gpu_type, bytes, "OutOfMemory", "", plan.epoch};
  // The worker's own line says what it tried to allocate; a traceback's worth is cut.
  constexpr std::size_t kMaxWorkerLine = 240;
  const std::string line =
      worker_message.size() > kMaxWorkerLine ? worker_message.substr(0, kMaxWorkerLine) + "..." : worker_message;
  t.message = pod + " ran out of memory on " + m->gpu_type + " (predicted peak " + bytes_text(m->predicted_bytes) +
              " of " + bytes_text(m->capacity_bytes) + "; " + line + "): plans keep " + bytes_text(bytes) +
              " more free per " + m->gpu_type + " rank, so a rank may hold " + bytes_text(may_hold) +
              " of what the planner predicts";
  return t;
}

std::optional<TypeHeadroom> after_measured_peak(const JobPlan& plan, const std::string& pod,
                                                std::int64_t measured_peak_bytes, const MemoryHeadroom& before,
                                                const planner::GpuCatalog& catalog) {
  const auto m = pod_memory(plan, pod, catalog);
  if (!m || measured_peak_bytes <= m->predicted_bytes) return std::nullopt;
  // The headroom that would have predicted the measured peak, against the model's own prediction.
  const std::int64_t old_bytes = before.bytes_for(m->gpu_type);
  const std::int64_t bytes = measured_peak_bytes - m->raw_bytes;
  if (static_cast<double>(bytes - old_bytes) < kMeasuredStepShare * static_cast<double>(m->capacity_bytes))
    return std::nullopt;
  TypeHeadroom t{m->gpu_type, bytes, "MeasuredAbovePrediction", "", plan.epoch};
  t.message = pod + " measured a peak of " + bytes_text(measured_peak_bytes) + " on " + m->gpu_type +
              " where the planner predicted " + bytes_text(m->predicted_bytes) + ": plans keep " + bytes_text(bytes) +
              " more free per " + m->gpu_type + " rank";
  return t;
}

planner::GpuCatalog with_headroom(const planner::GpuCatalog& catalog, const MemoryHeadroom& headroom) {
  planner::GpuCatalog out = catalog;
  for (const TypeHeadroom& t : headroom.types) {
    const planner::GpuType* gpu = catalog.find(t.gpu_type);
    if (gpu == nullptr) continue;
    planner::GpuType changed = *gpu;
    changed.cuda_context_bytes += t.bytes;
    out.upsert(std::move(changed));
  }
  return out;
}

std::string bytes_text(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const char* unit = "B";
  double v = b;
  if (std::abs(b) >= 1e9)
    v = b / 1e9, unit = "GB";
  else if (std::abs(b) >= 1e6)
    v = b / 1e6, unit = "MB";
  else if (std::abs(b) >= 1e3)
    v = b / 1e3, unit = "kB";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, unit);
  return buf;
}

}  // namespace flotilla::op
