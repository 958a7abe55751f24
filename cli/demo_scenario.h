// `flotilla demo`'s scripted scenario on a running local cluster (cli/local_cluster.h): it
// applies the example TrainingJobs (examples/demo/*.yaml) and changes the cluster through
// devcluster's admin API, waiting after each move for the operator's answer:
//   1. the elastic job is admitted and grows through the benefit check;
//   2. fast-1 fails mid-training: PP-first shrink onto what is left;
//   3. slow-0 joins: benefit check, scale-up onto a heterogeneous plan;
//   4. short jobs arrive often, fast-2 joins briefly: the benefit check refuses, fast-2 leaves;
//   5. a higher-priority job arrives: the elastic job's extra GPUs are reclaimed for it;
//   6. that job finishes: the elastic job grows back; every job runs to the end.
// Guarantees: every wait is bounded; a wait that runs out is recorded as a failed step with what
//   was expected and what the job's status said, and the scenario goes on to the end when it
//   can (so the report shows everything that did happen). `tick` is called on every poll (the
//   live view).
// Assumes: the cluster was started with examples/demo/nodes.yaml and examples/local-catalog.yaml.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/demo_observer.h"
#include "kube/client.h"

namespace flotilla::cli {

struct ScenarioOptions {
  std::string examples_dir;  // examples/demo
  std::string work_dir;      // data.txt, checkpoints, loss logs
  bool quick = false;        // the CI scenario: fewer steps
};

struct ScenarioStep {
  std::string name;
  bool ok = false;
  std::string detail;  // what was expected and seen
};

struct BriefNode {
  double joined_s = -1, left_s = -1;
  bool refused = false;  // the elastic job's benefit check refused while it was there
  DecisionRecord decision;
};

struct ScenarioResult {
  std::vector<ScenarioStep> steps;
  BriefNode brief;
  std::vector<std::string> jobs;  // every job applied
  int elastic_steps = 0, urgent_steps = 0, burst_steps = 0;
  bool ok() const;
};

ScenarioResult run_scenario(kube::Client& client, DemoObserver& observer, const ScenarioOptions& options,
                            const std::function<void()>& tick);

}  // namespace flotilla::cli
