// The schema of the worker's progress lines: one JSON object per line, written by every rank
// (worker/runtime/trainer.cpp) and read back by whoever folds measured speed or memory into a
// model (scaler/online_profile.h, the trainer sidecar, the demo's report).
//   - `step`, after each optimizer step: speed and loss (StepProgress);
//   - `memory`, once per run after its first step, where the backend knows its device: the
//     rank's peak bytes in use and the device's capacity (MemoryProgress).
//
// Guarantees:
//   - format_step_line() and parse_step_line() are inverses: parse(format(p)) == p for every
//     field (doubles print with 17 significant digits, so they round-trip exactly; a NaN or
//     infinite value is written as null and read back as NaN).
//   - The text is a JSON object with "event": "step" and the keys below (kStep*), sorted by
//     name (nlohmann::json's order), no newline; the writer appends the newline.
//   - format_memory_line() and parse_memory_line() are inverses too, with "event": "memory".
//   - parse_step_line() (and parse_memory_line()) returns nullopt with one line in *error for anything that is not a
//     well-formed step line: not JSON, another event ("start", "checkpoint"), a missing key or
//     a value of the wrong type (integers where counts are expected, arrays of numbers for
//     the per-micro-batch times). Unknown extra keys are ignored, so the writer may add fields.
// Assumes: nothing; pure string formatting and parsing (no I/O, no clock).
// Caveats: header-only, so rooms that do not link flotilla::common (the scaler) can include it;
//   it needs nlohmann_json, which every reader links already.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla {

struct StepProgress {
  int rank = 0;
  int stage = 0;     // pipeline stage of the rank
  int dp_index = 0;  // data-parallel replica of the rank
  std::int64_t step = 0;         // 0-based optimizer step this line reports
  double loss = 0;               // mean over the step's global batch (the same on every rank)
  double grad_norm = 0;          // global L2 norm before clipping
  double lr = 0;                 // learning rate the step applied
  double tokens_per_s = 0;       // the job's: global batch tokens over this rank's step_seconds
  double step_seconds = 0;       // whole step on this rank, optimizer update included
  double pipeline_seconds = 0;   // the 1F1B schedule: forwards, backwards and the waits between
  double dp_reduce_seconds = 0;  // gradient reduction across replicas after the pipeline
  std::int64_t first_global_micro_batch = 0;
  std::vector<double> forward_seconds;  // this rank's stage, one per local micro-batch
  std::vector<double> backward_seconds;
  double time_unix_ms = 0;

  bool operator==(const StepProgress&) const = default;
};

// What one rank's device held at its high-water mark (bytes in use, not an allocator's cache).
struct MemoryProgress {
  int rank = 0;
  int stage = 0;
  std::string gpu_type;  // the device: an emulated GPU type or the CUDA device's name
  std::int64_t peak_bytes = 0;
  std::int64_t capacity_bytes = 0;
  double time_unix_ms = 0;

  bool operator==(const MemoryProgress&) const = default;
};

namespace progress_line_detail {

inline nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

inline bool read_double(const nlohmann::json& j, const char* key, double* out, std::string* error,
                        const char* event = "step") {
  auto it = j.find(key);
  if (it == j.end()) {
    *error = std::string(event) + " progress line has no \"" + key + "\"";
    return false;
  }
  if (it->is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (!it->is_number()) {
    *error = std::string(event) + " progress line: \"" + key + "\" is " + it->dump() + ", not a number";
    return false;
  }
  *out = it->get<double>();
  return true;
}

template <class Int>
bool read_int(const nlohmann::json& j, const char* key, Int* out, std::string* error, const char* event = "step") {
  auto it = j.find(key);
  if (it == j.end()) {
    *error = std::string(event) + " progress line has no \"" + key + "\"";
    return false;
  }
  if (!it->is_number_integer()) {
    *error = std::string(event) + " progress line: \"" + key + "\" is " + it->dump() + ", not an integer";
    return false;
  }
  *out = it->get<Int>();
  return true;
}

inline bool read_doubles(const nlohmann::json& j, const char* key, std::vector<double>* out,
                         std::string* error) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) {
    *error = std::string("step progress line: \"") + key + "\" is not a list of seconds";
    return false;
  }
  out->clear();
  for (const auto& v : *it) {
    if (v.is_null()) out->push_back(std::numeric_limits<double>::quiet_NaN());
    else if (v.is_number()) out->push_back(v.get<double>());
    else {
      *error = std::string("step progress line: \"") + key + "\" holds " + v.dump() + ", not a number";
      return false;
    }
  }
  return true;
}

}  // namespace progress_line_detail

inline std::string format_step_line(const StepProgress& p) {
  using progress_line_detail::number;
  nlohmann::json fwd = nlohmann::json::array(), bwd = nlohmann::json::array();
  for (double v : p.forward_seconds) fwd.push_back(number(v));
  for (double v : p.backward_seconds) bwd.push_back(number(v));
  return nlohmann::json{{"event", "step"},
                        {"rank", p.rank},
                        {"stage", p.stage},
                        {"dp_index", p.dp_index},
                        {"step", p.step},
                        {"loss", number(p.loss)},
                        {"grad_norm", number(p.grad_norm)},
                        {"lr", number(p.lr)},
                        {"tokens_per_s", number(p.tokens_per_s)},
                        {"step_seconds", number(p.step_seconds)},
                        {"pipeline_seconds", number(p.pipeline_seconds)},
                        {"dp_reduce_seconds", number(p.dp_reduce_seconds)},
                        {"first_global_micro_batch", p.first_global_micro_batch},
                        {"forward_seconds", fwd},
                        {"backward_seconds", bwd},
                        {"time_unix_ms", number(p.time_unix_ms)}}
      .dump();
}

namespace progress_line_detail {

// The line as a JSON object of the wanted event, or nullopt with the reason in *error.
inline std::optional<nlohmann::json> event_object(std::string_view line, const char* wanted, std::string* error) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "progress line is not a JSON object";
    return std::nullopt;
  }
  const auto event = j.find("event");
  if (event == j.end() || *event != wanted) {
    *error = std::string("progress line is not a ") + wanted + " event (event " +
             (event == j.end() ? std::string("missing") : event->dump()) + ")";
    return std::nullopt;
  }
  return j;
}

// A line of `event` read by `reader`, or nullopt with the reason in *error (when not null).
template <class Reader>
auto parse_event(std::string_view line, const char* event, Reader reader, std::string* error) {
  std::string ignored;
  error = error != nullptr ? error : &ignored;
  const std::optional<nlohmann::json> j = event_object(line, event, error);
  return j ? reader(*j, error) : decltype(reader(*j, error)){};
}

inline std::optional<StepProgress> read_step(const nlohmann::json& j, std::string* error) {
  StepProgress p;
  const bool ok = read_int(j, "rank", &p.rank, error) && read_int(j, "stage", &p.stage, error) &&
                  read_int(j, "dp_index", &p.dp_index, error) && read_int(j, "step", &p.step, error) &&
                  read_double(j, "loss", &p.loss, error) &&
                  read_double(j, "grad_norm", &p.grad_norm, error) && read_double(j, "lr", &p.lr, error) &&
                  read_double(j, "tokens_per_s", &p.tokens_per_s, error) &&
                  read_double(j, "step_seconds", &p.step_seconds, error) &&
                  read_double(j, "pipeline_seconds", &p.pipeline_seconds, error) &&
                  read_double(j, "dp_reduce_seconds", &p.dp_reduce_seconds, error) &&
                  read_int(j, "first_global_micro_batch", &p.first_global_micro_batch, error) &&
                  read_doubles(j, "forward_seconds", &p.forward_seconds, error) &&
                  read_doubles(j, "backward_seconds", &p.backward_seconds, error) &&
                  read_double(j, "time_unix_ms", &p.time_unix_ms, error);
  if (!ok) return std::nullopt;
  return p;
}

}  // namespace progress_line_detail

inline std::optional<StepProgress> parse_step_line(std::string_view line, std::string* error) {
  return progress_line_detail::parse_event(line, "step", progress_line_detail::read_step, error);
}

inline std::string format_memory_line(const MemoryProgress& m) {
  return nlohmann::json{{"event", "memory"},
                        {"rank", m.rank},
                        {"stage", m.stage},
                        {"gpu_type", m.gpu_type},
                        {"peak_bytes", m.peak_bytes},
                        {"capacity_bytes", m.capacity_bytes},
                        {"time_unix_ms", progress_line_detail::number(m.time_unix_ms)}}
      .dump();
}

namespace progress_line_detail {

inline std::optional<MemoryProgress> read_memory(const nlohmann::json& j, std::string* error) {
  MemoryProgress m;
  const auto type = j.find("gpu_type");
  if (type == j.end() || !type->is_string()) {
    *error = "memory progress line: \"gpu_type\" is not a string";
    return std::nullopt;
  }
  m.gpu_type = type->get<std::string>();
  const char* what = "memory";
  const bool ok = read_int(j, "rank", &m.rank, error, what) && read_int(j, "stage", &m.stage, error, what) &&
                  read_int(j, "peak_bytes", &m.peak_bytes, error, what) &&
                  read_int(j, "capacity_bytes", &m.capacity_bytes, error, what) &&
                  read_double(j, "time_unix_ms", &m.time_unix_ms, error, what);
  if (!ok) return std::nullopt;
  return m;
}

}  // namespace progress_line_detail

inline std::optional<MemoryProgress> parse_memory_line(std::string_view line, std::string* error) {
  return progress_line_detail::parse_event(line, "memory", progress_line_detail::read_memory, error);
}

}  // namespace flotilla
