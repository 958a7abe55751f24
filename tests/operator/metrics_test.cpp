// The operator's metrics: pre-created series, _total counters, histograms in base units.
#include "operator/metrics.h"

#include <gtest/gtest.h>

TEST(OperatorMetrics, SeriesArePreCreatedAndRenderedInTextFormat) {
  flotilla::op::Metrics m;
  std::string text = m.render();
  EXPECT_NE(text.find("# TYPE flotilla_scaling_decisions_total counter"), std::string::npos);
  EXPECT_NE(text.find("flotilla_scaling_decisions_total{direction=\"up\",reason=\"none\"} 0"), std::string::npos);
  EXPECT_NE(text.find("flotilla_jobs{phase=\"Running\"} 0"), std::string::npos);
  EXPECT_NE(text.find("flotilla_leader 0"), std::string::npos);
  // Histograms too exist at 0 before the first observation.
  EXPECT_NE(text.find("flotilla_rescale_duration_seconds_count{phase=\"drain\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("flotilla_rescale_duration_seconds_bucket{phase=\"total\",le=\"+Inf\"} 0"), std::string::npos);
  EXPECT_NE(text.find("flotilla_rescaling_oldest_seconds 0"), std::string::npos);
  m.observe("flotilla_reconcile_duration_seconds", {{"kind", "job"}}, 0.003);
  m.observe("flotilla_reconcile_duration_seconds", {{"kind", "job"}}, 0.2);
  text = m.render();
  EXPECT_NE(text.find("flotilla_reconcile_duration_seconds_bucket{kind=\"job\",le=\"0.005\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("flotilla_reconcile_duration_seconds_bucket{kind=\"job\",le=\"+Inf\"} 2"), std::string::npos);
  EXPECT_NE(text.find("flotilla_reconcile_duration_seconds_count{kind=\"job\"} 2"), std::string::npos);
  m.inc("flotilla_scaling_decisions_total", {{"direction", "up"}, {"reason", "BenefitCheckPassed"}});
  EXPECT_EQ(m.value("flotilla_scaling_decisions_total", {{"direction", "up"}, {"reason", "BenefitCheckPassed"}}), 1);
}
