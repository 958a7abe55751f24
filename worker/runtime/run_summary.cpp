#include "worker/runtime/run_summary.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

namespace flotilla::worker {

std::filesystem::path run_summary_path(const std::filesystem::path& checkpoint_dir) {
  return checkpoint_dir / "run_summary.json";
}

void write_run_summary(const std::filesystem::path& checkpoint_dir,
                       std::int64_t resumed_from_step, std::int64_t steps_completed,
                       double tokens_this_run, double train_seconds, double last_loss) {
  const nlohmann::json j = {{"resumed_from_step", resumed_from_step},
                            {"steps_completed", steps_completed},
                            {"tokens_this_run", tokens_this_run},
                            {"train_seconds", train_seconds},
                            {"last_loss", last_loss}};
  const auto path = run_summary_path(checkpoint_dir);
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out) return;  // a report only: never fail training over it
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

std::optional<RunSummary> read_run_summary(const std::filesystem::path& checkpoint_dir) {
  std::ifstream in(run_summary_path(checkpoint_dir));
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  // JSON has no NaN: a diverged run's loss is written as null, and reads back as NaN.
  auto number = [&](const char* key, auto fallback) {
    auto it = j.find(key);
    using T = decltype(fallback);
    if (it == j.end() || !it->is_number()) {
      if constexpr (std::is_floating_point_v<T>)
        return it != j.end() && it->is_null() ? std::numeric_limits<T>::quiet_NaN() : fallback;
      return fallback;
    }
    return it->template get<T>();
  };
  RunSummary s;
  s.resumed_from_step = number("resumed_from_step", std::int64_t{0});
  s.steps_completed = number("steps_completed", std::int64_t{0});
  s.tokens_this_run = number("tokens_this_run", 0.0);
  s.train_seconds = number("train_seconds", 0.0);
  s.last_loss = number("last_loss", 0.0);
  return s;
}

std::string summary_line(const std::optional<RunSummary>& summary, std::int64_t total_steps,
                         std::int64_t last_checkpoint_step, double wall_seconds, bool ok) {
  char buf[512];
  std::string checkpoint = last_checkpoint_step >= 0
                               ? "last complete checkpoint at step " +
                                     std::to_string(last_checkpoint_step)
                               : std::string("no complete checkpoint");
  std::string head = ok ? "finished" : "FAILED";
  if (!summary) {
    std::snprintf(buf, sizeof buf, "%s: no step completed in this run (%.1f s); %s",
                  head.c_str(), wall_seconds, checkpoint.c_str());
    return buf;
  }
  const std::int64_t done = summary->steps_completed - summary->resumed_from_step;
  const double train_tps =
      summary->train_seconds > 0 ? summary->tokens_this_run / summary->train_seconds : 0.0;
  const double wall_tps = wall_seconds > 0 ? summary->tokens_this_run / wall_seconds : 0.0;
  std::snprintf(buf, sizeof buf,
                "%s: %lld steps this run (steps %lld..%lld of %lld), %s, %.0f tokens/s while "
                "training, %.0f tokens/s over %.1f s wall, last loss %.4f",
                head.c_str(), static_cast<long long>(done),
                static_cast<long long>(summary->resumed_from_step),
                static_cast<long long>(summary->steps_completed - 1),
                static_cast<long long>(total_steps), checkpoint.c_str(), train_tps, wall_tps,
                wall_seconds, summary->last_loss);
  return buf;
}

}  // namespace flotilla::worker
