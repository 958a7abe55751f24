// Monitoring end to end: a real operator (flotilla up) scaling a job up, scraped by a real
// Prometheus (Debian's package) that also loads the chart's rules. Checks: `promtool check metrics`
// on a real scrape; the rescale histogram adds up (total = drain + restart); every query of every
// dashboard panel (files/dashboard.json, $variables substituted) returns data; every rule is healthy.
#include <gtest/gtest.h>

#include <cmath>

#include "kube/net/http_client.h"
#include "kube/net/http_message.h"
#include "process/free_port.h"
#include "process/spawn.h"
#include "tests/operator/local_cluster_fixture.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;
using operator_e2e::run_command;
using operator_e2e::slurp;

fs::path chart_file(const char* rel) { return fs::path(FLOTILLA_SOURCE_DIR) / "helm/flotilla" / rel; }

std::unique_ptr<flotilla::kube::net::HttpClient> http_to(int port) {
  flotilla::kube::net::ClientConfig c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  c.connect_timeout = 1000ms;
  std::string error;
  auto client = flotilla::kube::net::HttpClient::create(c, &error);
  EXPECT_TRUE(client) << error;
  return client;
}

// Sum over the exposition's lines that start with `series` (name and labels, up to the value).
double scraped(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return NAN;
}

class Monitoring : public operator_e2e::LocalCluster {
 protected:
  void SetUp() override {
    if (run_command("prometheus --version").exit_code != 0 || run_command("promtool --version").exit_code != 0)
      GTEST_SKIP() << "prometheus/promtool are not installed: run scripts/install-deps.sh (Debian package prometheus)";
    LocalCluster::SetUp();
  }
  void TearDown() override {
    if (prometheus_.valid()) prometheus_.terminate(3000ms);
    LocalCluster::TearDown();
  }
  void start_prometheus(int metrics_port) {
    prometheus_port_ = flotilla::process::pick_free_port();
    std::ofstream(dir_ / "prometheus.yml")
        << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        << "rule_files: [" << chart_file("files/rules.yaml").string() << "]\n"
        << "scrape_configs:\n  - job_name: flotilla-operator\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << metrics_port << "']\n";
    flotilla::process::SpawnOptions o;
    o.argv = {"prometheus",
              "--config.file=" + (dir_ / "prometheus.yml").string(),
              "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
              "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_),
              "--log.level=warn"};
    o.stdout_path = o.stderr_path = dir_ / "prometheus.log";
    o.parent_death_signal = SIGKILL;
    prometheus_ = flotilla::process::spawn(o);
    prom_ = http_to(prometheus_port_);
    ASSERT_TRUE(wait_for(
        [&] {
          const auto r = prom_->get("/-/ready");
          return r.ok() && r.response.status == 200;
        },
        20s))
        << slurp(dir_ / "prometheus.log");
  }
  // The instant vector of a PromQL query, or null (with the reason in *why).
  Json query(const std::string& promql, std::string* why) {
    const auto r = prom_->get("/api/v1/query?query=" + flotilla::kube::net::url_encode(promql));
    if (!r.ok() || r.response.status != 200) {
      *why = r.error + " HTTP " + std::to_string(r.response.status) + " " + r.response.body;
      return nullptr;
    }
    const Json body = Json::parse(r.response.body);
    return body["data"]["result"];
  }
  flotilla::process::Child prometheus_;
  int prometheus_port_ = 0;
  std::unique_ptr<flotilla::kube::net::HttpClient> prom_;
};

}  // namespace

TEST_F(Monitoring, PrometheusScrapesARescaleAndEveryDashboardQueryReturnsData) {
  const auto started = std::chrono::steady_clock::now();
  const Json up = Json::parse(slurp(dir_ / "state/flotilla-up.json"));
  const int metrics_port = up["metricsPort"];
  start_prometheus(metrics_port);
  // The series exist at 0 before the job (pre-created), so rate() sees the rescale's increase
  // once Prometheus has scraped them before it.
  std::string why;
  ASSERT_TRUE(wait_for(
      [&] {
        const Json r = query("flotilla_rescale_duration_seconds_count{phase=\"total\"} == 0", &why);
        return r.is_array() && r.size() == 1;
      },
      20s))
      << why << slurp(dir_ / "prometheus.log");
  apply_job(400);
  // Admitted at 1 GPU, then scaled up through the benefit check: at least one rescale completes.
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "4" && field(".status.phase") == "Running"; }, 60s))
      << field(".status") << "\n"
      << events();

  // A real scrape passes promtool's linter.
  auto operator_metrics = http_to(metrics_port);
  const auto scrape = operator_metrics->get("/metrics");
  ASSERT_TRUE(scrape.ok() && scrape.response.status == 200) << scrape.error;
  std::ofstream(dir_ / "scrape.txt") << scrape.response.body;
  const auto check = run_command("promtool check metrics < " + (dir_ / "scrape.txt").string());
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "") << "promtool's lint findings";
  // The rescale phases add up: for each rescale, total = drain + restart (same clock readings).
  const std::string& text = scrape.response.body;
  const double drain = scraped(text, "flotilla_rescale_duration_seconds_sum{phase=\"drain\"}");
  const double restart = scraped(text, "flotilla_rescale_duration_seconds_sum{phase=\"restart\"}");
  const double total = scraped(text, "flotilla_rescale_duration_seconds_sum{phase=\"total\"}");
  const double rescales = scraped(text, "flotilla_rescale_duration_seconds_count{phase=\"total\"}");
  EXPECT_GE(rescales, 1) << text;
  EXPECT_GE(scraped(text, "flotilla_scaling_decisions_total{direction=\"up\",reason=\"BenefitCheckPassed\"}"), 1)
      << text;
  EXPECT_EQ(scraped(text, "flotilla_rescale_duration_seconds_count{phase=\"drain\"}"), rescales);
  EXPECT_NEAR(total, drain + restart, 1e-6) << text;
  EXPECT_GT(total, 0);
  EXPECT_LT(total / rescales, 60) << "a rescale took longer than the test waited";
  EXPECT_EQ(scraped(text, "flotilla_leader"), 1);

  // Prometheus has the rescale once its next scrapes land.
  ASSERT_TRUE(wait_for(
      [&] {
        const Json r = query("flotilla_rescale_duration_seconds_count{phase=\"total\"} > 0", &why);
        return r.is_array() && !r.empty();
      },
      20s))
      << why;
  std::this_thread::sleep_for(2s);  // a few more samples for rate()

  // Every target of every panel, with the dashboard's variables as Grafana would substitute them.
  const Json dashboard = Json::parse(slurp(chart_file("files/dashboard.json")));
  int queries = 0;
  for (const Json& panel : dashboard["panels"]) {
    for (const Json& target : panel["targets"]) {
      std::string expr = target["expr"];
      for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
               {"$__rate_interval", "1m"}, {"$instance", ".*"}})
        for (auto at = expr.find(var); at != std::string::npos; at = expr.find(var))
          expr.replace(at, var.size(), value);
      ASSERT_EQ(expr.find('$'), std::string::npos) << "an unsubstituted variable in " << expr;
      const Json result = query(expr, &why);
      ASSERT_TRUE(result.is_array()) << panel["title"] << ": " << why;
      EXPECT_FALSE(result.empty()) << "panel '" << panel["title"].get<std::string>() << "' has no data: " << expr;
      bool finite = false;
      for (const Json& sample : result) finite |= std::isfinite(std::stod(sample["value"][1].get<std::string>()));
      EXPECT_TRUE(finite) << "panel '" << panel["title"].get<std::string>() << "' has only NaN: " << expr << "\n"
                          << result.dump();
      ++queries;
    }
  }
  EXPECT_GE(queries, 10);

  // The chart's rules load in a real Prometheus and evaluate without errors.
  const auto rules = prom_->get("/api/v1/rules");
  ASSERT_TRUE(rules.ok() && rules.response.status == 200);
  int healthy = 0;
  const Json rule_groups = Json::parse(rules.response.body)["data"]["groups"];
  for (const Json& group : rule_groups)
    for (const Json& rule : group["rules"]) {
      EXPECT_EQ(rule.value("health", ""), "ok") << rule.dump();
      healthy += rule.value("health", "") == "ok";
    }
  EXPECT_EQ(healthy, 12) << rules.response.body;
  // Nobody is stuck rescaling and a leader exists: those alerts stay quiet on a healthy run.
  const Json firing = query("ALERTS{alertstate=\"firing\"}", &why);
  EXPECT_TRUE(firing.is_array() && firing.empty()) << firing.dump();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 90) << "the monitoring e2e must stay short";
  std::printf("monitoring e2e: %d panel queries with data, %.0f rescale(s), mean %.2f s (drain %.2f s, restart %.2f s), "
              "%.1f s in all\n",
              queries, rescales, total / rescales, drain / rescales, restart / rescales, seconds);
}
