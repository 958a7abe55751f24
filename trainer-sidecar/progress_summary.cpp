#include "trainer-sidecar/progress_summary.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace flotilla::sidecar {
namespace {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

void ProgressSummary::reset(int pp) { *this = ProgressSummary(pp); }

bool ProgressSummary::fold(const std::string& line) {
  if (line.find("\"memory\"") != std::string::npos) {
    fold_memory(line);
    return false;
  }
  if (line.find("\"start\"") != std::string::npos) {
    fold_start(line);
    return false;
  }
  if (line.find("\"step\"") == std::string::npos) return false;
  auto p = parse_step_line(line, nullptr);
  if (!p) return false;
  has_step_ = true;
  if (p->step + 1 >= completed_) {
    completed_ = p->step + 1;
    const bool last = p->stage == pp_ - 1;
    if (last || !loss_from_last_stage_) {
      loss_ = p->loss;
      tokens_per_s_ = p->tokens_per_s;
      loss_from_last_stage_ = loss_from_last_stage_ || last;
    }
  }
  if (p->dp_index == 0)
    stages_[p->stage] = StageSeconds{p->stage, mean(p->forward_seconds), mean(p->backward_seconds)};
  return true;
}

void ProgressSummary::fold_memory(const std::string& line) {
  const std::optional<MemoryProgress> memory = parse_memory_line(line, nullptr);
  if (!memory || memory->peak_bytes <= 0) return;
  peak_bytes_ = std::max(peak_bytes_, memory->peak_bytes);
}

void ProgressSummary::fold_start(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || j.value("event", "") != "start") return;
  const auto it = j.find("resumed_from_step");
  if (it != j.end() && it->is_number_integer()) completed_ = std::max(completed_, it->get<std::int64_t>());
}

std::vector<StageSeconds> ProgressSummary::stage_seconds() const {
  std::vector<StageSeconds> out;
  for (const auto& [stage, s] : stages_) out.push_back(s);
  return out;
}

}  // namespace flotilla::sidecar
