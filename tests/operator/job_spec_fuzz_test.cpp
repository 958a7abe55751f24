// Fuzz of the operator's pure path with mutated manifests, without the API server's schema in
// front (as for a TrainingJob stored before the schema changed): parse_job_spec() refuses with a
// line naming the spec field, or the spec goes through the job table and a plan without an
// exception, a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "operator/job_plan.h"
#include "operator/job_spec.h"
#include "operator/job_table.h"
#include "tests/operator/manifest_mutator.h"
#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
using flotilla::op::testing::node;
using flotilla::op::testing::World;

TEST(JobSpecFuzz, ThreeThousandMutantsAreRefusedWithAFieldPathOrPlannedWithoutACrash) {
  World world;
  fo::ClusterView cluster{{node("n0", 2), node("n1", 2)}};
  const auto context = world.context();
  operator_fuzz::ManifestMutator mutator(20261124);
  int refused = 0, planned = 0, unplaceable = 0;
  double slowest_s = 0;
  for (int i = 0; i < 3000; ++i) {
    nlohmann::json job = mutator.mutate(operator_fuzz::valid_job("fuzz-" + std::to_string(i), "/d.txt", "/ckpt"));
    if (!job.is_object()) continue;
    job["metadata"] = {{"name", "fuzz-" + std::to_string(i)},
                       {"namespace", "team"},
                       {"uid", "u-" + std::to_string(i)},
                       {"generation", 1},
                       {"creationTimestamp", "2026-11-24T00:00:00Z"}};
    const auto started = std::chrono::steady_clock::now();
    const auto parsed = fo::parse_job_spec(job);
    if (const auto* error = std::get_if<std::string>(&parsed)) {
      ++refused;
      EXPECT_EQ(error->rfind("spec", 0), 0u) << "mutant " << i << ": the refusal names no spec field: " << *error
                                             << "\n" << job.dump();
      continue;
    }
    const fo::JobSpec& spec = std::get<fo::JobSpec>(parsed);
    const auto snapshot = cluster.snapshot_for(spec.key());
    const fo::JobTable table = fo::build_job_table(spec, snapshot, context);
    if (table.initial_gpus == 0) {
      ++unplaceable;
      EXPECT_FALSE(table.why_not.empty()) << "mutant " << i << " fits nowhere and nothing says why\n" << job.dump();
    } else {
      ++planned;
      fo::PlanConstraints limits;
      limits.min_gpus = table.initial_gpus;
      limits.max_gpus = table.initial_gpus;
      const fo::PlanOutcome outcome = fo::plan_job(spec, snapshot, limits, context, 1);
      EXPECT_TRUE(outcome.plan) << "mutant " << i << ": the table's admission size has no plan: " << outcome.message;
    }
    const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (took_s > 0.5) std::printf("mutant %d took %.2f s: %s\n", i, took_s, job["spec"].dump().c_str());
    slowest_s = std::max(slowest_s, took_s);
  }
  std::printf("3000 mutants: %d refused by parse_job_spec, %d planned, %d fit nowhere; slowest %.3f s\n", refused,
              planned, unplaceable, slowest_s);
  // The mutants must exercise every outcome, or the fuzz tests less than it says.
  EXPECT_GT(refused, 300);
  EXPECT_GT(planned, 300);
  EXPECT_GT(unplaceable, 10);
  // A hang, not a slow absurd model, is what this catches: the slowest mutant is a 30,000-layer
  // (the search's limit), 1 M-token Megatron model whose searches build 30,000-block tables
  // before finding that its embedding alone fits no GPU (1.9 s on an idle 2-core machine; 6.4 s
  // before the search remembered that verdict across micro-batch sizes).
  EXPECT_LT(slowest_s, 30.0) << "one spec took the operator's planning path this long";
}
