// Discrete-event simulator of a GPU cluster running a job trace under a scaling policy.
//
// Events: job arrivals, completions, node loss and join; scaling events cost the job a
// restart overhead (scaler/restart_overhead.h) during which it holds its new GPUs without
// progress. Every scaling decision is the scaler's pure core (scaler/decide.h,
// scaler/scaling_policy.h), the same calls the operator makes; this room is the shell around it.
// Policies:
//   static      non-elastic FCFS (head-of-line blocking), best-fit placement; no scaling.
//   greedy      FlexTrain's predictive greedy scale-up without the Poisson check, + §5.2
//               preemption of scaled-up GPUs for a queued job that does not fit.
//   elasticflow ElasticFlow-style: every pass grows elastic jobs round-robin by one minimal
//               unit (the next scale-table entry) while GPUs are free, also while jobs wait
//               (ElasticFlow assumes an all-elastic cluster); same preemption.
//   flextrain   the full policy: greedy + Poisson benefit check + preemption.
// greedy/flextrain scale-up passes run only when the queue is empty (FlexTrain §5.1). Elastic
// jobs start at their requested layout and never shrink below it except after a node loss.
// A trace job becomes an elastic training job with probability elastic_fraction if it requests
// >= min_gpus GPUs and a Table-2 model fits its count (scaler/elastic_model.h); the trace
// duration is its work at the requested allocation and scale-table speedups scale its progress
// rate.
//
// Guarantees: pure and deterministic for a seed (no clock, no I/O, no threads); elastic marking
//   uses one uniform draw per large job in trace order, so the elastic set at fraction f is a
//   subset of the set at f' > f for the same seed. With check_invariants the run verifies after
//   every event that no GPU is allocated twice and at the end that every job finished and did
//   exactly its trace work; violations are listed in the result, never thrown.
// GPU types: every job runs on GPUs of ONE type, placed by the planner's best-fit packer
//   (cluster_state.h). A job's allowed types are its trace constraint (Alibaba gpu_spec) or, when
//   it has none, every type in the cluster (in node-list order). An elastic job is further
//   restricted to the types where its model has a scale table (sim_job_models.h: with planner
//   tables, the types its initial layout fits in memory) and ranks them fastest first; its work
//   is counted in seconds at its requested size on its fastest allowed type, so on a slower type
//   it progresses at iteration_s(fastest) / iteration_s(type) x speedup(GPUs on that type).
//   Non-elastic jobs run at speed 1 on any allowed type (the trace time is what they took).
//   Scale-up, preemption and node-loss shrinks only move GPUs of the job's own type.
// Caveats: jobs larger than every allowed type's total GPUs are skipped (counted in metrics).
//   Jobs requeued after a node loss resume their remaining work with no extra overhead (and may
//   restart on another type).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scaler/benefit_check.h"
#include "scaler/restart_overhead.h"
#include "scaler/scale_table.h"
#include "simulator/cluster_state.h"
#include "simulator/sim_job_models.h"

namespace flotilla::simulator {

enum class Policy { static_fcfs, greedy, elasticflow, flextrain };
std::optional<Policy> parse_policy(const std::string& name);
const char* policy_name(Policy p);

struct TraceJob {
  std::string id;
  double submit_s = 0;
  double duration_s = 0;  // run time at the requested allocation
  int gpus = 0;
  std::vector<std::string> gpu_types;  // allowed GPU types (Alibaba gpu_spec); empty: any
};

struct NodeEvent {
  double time_s = 0;
  int node = 0;     // index into the node list
  bool join = false;  // false: the node is lost
};

struct SimOptions {
  Policy policy = Policy::flextrain;
  double elastic_fraction = 0.2;
  std::uint64_t seed = 1;
  int min_gpus = 32;
  double window_s = 8 * 3600.0;
  scaler::BenefitCheckParams benefit;
  scaler::ScaleTableParams table;
  scaler::RestartOverheadParams overhead;
  std::vector<NodeEvent> node_events;
  bool check_invariants = true;
  JobModelSource job_models = JobModelSource::automatic;  // planner iff >1 GPU type
  std::vector<PlannerBand> planner_bands;  // empty: default_planner_bands(min_gpus)
};

struct JobOutcome {
  std::string id;
  int requested_gpus = 0;
  bool elastic = false;
  std::string model;       // Table-2 or planner preset for elastic jobs
  std::string gpu_type;    // the type it last ran on
  double submit_s = 0;
  double start_s = -1;     // first time its work could begin (queue time = start - submit)
  double finish_s = -1;
  int scaling_events = 0;
  int max_gpus = 0;
  double work_s = 0;       // work done, in seconds at the requested allocation
  double gpu_s = 0;        // GPU-seconds held
  double overhead_gpu_s = 0;  // GPU-seconds held while restarting
};

struct SimMetrics {
  int jobs = 0;
  int elastic_jobs = 0;
  int skipped_jobs = 0;  // larger than the cluster
  int unfinished_jobs = 0;
  double elastic_jct_mean_s = 0, elastic_jct_p50_s = 0, elastic_jct_p99_s = 0;
  double nonelastic_queue_mean_s = 0, nonelastic_queue_p50_s = 0, nonelastic_queue_p99_s = 0;
  double gpu_utilization = 0;
  int scaling_events = 0;
  int scale_ups = 0;
  int preemption_shrinks = 0;
  int preemptions_aborted = 0;
  int node_loss_shrinks = 0;
  int requeues = 0;
  int benefit_checks_passed = 0;
  int benefit_checks_refused = 0;
  // Of the passed checks: scale-ups not made, the job ending before the restart repays itself.
  int ends_before_restart_repays = 0;
  double overhead_gpu_hours = 0;
  double makespan_s = 0;
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // trace order, skipped jobs excluded
  SimMetrics metrics;
  std::vector<std::string> invariant_violations;
  std::vector<std::string> sample_decisions;  // first benefit-check explanations (at most 20)
};

SimResult simulate(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes,
                   const SimOptions& options);

}  // namespace flotilla::simulator
