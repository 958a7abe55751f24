#include "cli/demo_live_view.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "operator/job_plan.h"

namespace flotilla::cli {
namespace {

using Json = nlohmann::json;
constexpr std::size_t kColumns = 80, kRows = 24;

std::string fit(std::string s) {
  if (s.size() > kColumns) s.resize(kColumns);
  return s;
}

std::string bar(std::int64_t step, std::int64_t total, int width) {
  const int filled = total > 0 ? static_cast<int>(std::min<std::int64_t>(width, step * width / total)) : 0;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.') + "]";
}

// "PP2·DP1·TP1 fast:0-3 slow:4-5": the plan's shape and each stage's GPU type and layers.
std::string plan_line(const Json& status_plan) {
  const std::optional<op::JobPlan> plan = op::JobPlan::from_status(status_plan);
  if (!plan) return "";
  std::string out = plan->summary();
  for (const op::PlanStage& s : plan->stages)
    out += " " + s.gpu_type.substr(s.gpu_type.rfind('-') + 1) + ":" + std::to_string(s.first_block) + "-" +
           std::to_string(s.last_block);
  return out;
}

}  // namespace

LiveView::LiveView(bool interactive, std::string title) : interactive_(interactive), title_(std::move(title)) {}

std::vector<std::string> LiveView::screen(const DemoObserver& o, const std::string& title) {
  std::vector<std::string> lines;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s  %s", title.c_str(), format_seconds(o.now_s()).c_str());
  lines.push_back(fit(buf));
  // Nodes by GPU type and state: "emu-fast: fast-0 Ready x2, fast-1 NotReady x2".
  std::map<std::string, std::string> by_type;
  for (const NodeRecord& n : o.nodes())
    by_type[n.gpu_type] += (by_type[n.gpu_type].empty() ? "" : ", ") + n.name + " " + n.state + " x" + std::to_string(n.gpus);
  for (const auto& [type, nodes] : by_type) lines.push_back(fit(" " + type + ": " + nodes));
  lines.push_back(std::string(kColumns, '-'));
  // Jobs: two lines each (progress, then plan and decision), the elastic job first.
  std::vector<std::string> names = o.job_names();
  std::stable_partition(names.begin(), names.end(), [](const std::string& n) { return n == "elastic"; });
  const std::size_t event_rows = 6;
  for (const std::string& name : names) {
    if (lines.size() + 2 > kRows - event_rows - 1) break;
    const Json& j = o.job(name);
    const Json status = j.value("status", Json::object());
    const Json progress = status.value("progress", Json::object());
    const std::int64_t total = j.value("spec", Json::object()).value("trainSteps", std::int64_t{0});
    const std::int64_t step = progress.value("step", std::int64_t{0});
    std::snprintf(buf, sizeof buf, "%-9.9s %-10.10s %s %4lld/%-4lld loss %.3f %6.0f tok/s", name.c_str(),
                  status.value("phase", "").c_str(), bar(step, total, 16).c_str(), static_cast<long long>(step),
                  static_cast<long long>(total), progress.value("loss", 0.0), progress.value("tokensPerSecond", 0.0));
    lines.push_back(fit(buf));
    const Json plan = status.value("plan", Json::object());
    const std::string decision = status.value("lastDecision", Json::object()).value("reason", "");
    lines.push_back(fit("  " + plan_line(plan) + (decision.empty() ? "" : " | " + decision)));
  }
  lines.push_back(std::string(kColumns, '-'));
  const auto& events = o.events();
  const std::size_t room = kRows - lines.size();
  for (std::size_t i = events.size() > room ? events.size() - room : 0; i < events.size(); ++i)
    lines.push_back(fit(events[i]));
  return lines;
}

void LiveView::render(const DemoObserver& o) {
  if (!interactive_) {
    for (; printed_events_ < o.events().size(); ++printed_events_)
      std::printf("%s\n", o.events()[printed_events_].c_str());
    std::fflush(stdout);
    return;
  }
  // Home, clear, then the lines; no newline after the last, so 24 lines never scroll 24 rows.
  std::string frame = "\x1b[H\x1b[2J";
  const std::vector<std::string> lines = screen(o, title_);
  for (std::size_t i = 0; i < lines.size(); ++i) frame += lines[i] + (i + 1 < lines.size() ? "\n" : "");
  std::fputs(frame.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace flotilla::cli
