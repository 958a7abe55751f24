// The operator's Prometheus metrics and their text exposition (format 0.0.4).
//
// Guarantees: thread-safe; names follow Prometheus conventions (flotilla_ prefix, base units,
//   _total counters, _seconds histograms); label sets are small and bounded (direction, reason,
//   phase, GPU type, state: never a job name); every series the dashboards query exists at 0
//   from the start (pre-created), so rate() and absent() behave. render() emits HELP and TYPE
//   once per family and escapes label values.
// Assumes: label values come from bounded sets chosen by the operator.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace flotilla::op {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  Metrics();
  void inc(const std::string& name, const Labels& labels = {}, double by = 1);
  void set(const std::string& name, const Labels& labels, double value);
  void observe(const std::string& name, const Labels& labels, double value);
  // Gauges of one family replaced as a whole (jobs by phase, GPUs by type and state).
  void replace_family(const std::string& name, const std::map<Labels, double>& series);
  std::string render() const;
  double value(const std::string& name, const Labels& labels = {}) const;  // tests

 private:
  struct Family {
    std::string help;
    std::string type;  // counter, gauge, histogram
    std::vector<double> buckets;
    std::map<Labels, double> values;                      // counter, gauge
    std::map<Labels, std::vector<double>> bucket_counts;  // histogram: cumulative per bucket
    std::map<Labels, double> sums;
    std::map<Labels, double> counts;
  };
  void define(const std::string& name, const std::string& type, const std::string& help,
              std::vector<double> buckets = {});
  void precreate_histogram(const std::string& name, const Labels& labels);  // a series at 0 (constructor)
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace flotilla::op
