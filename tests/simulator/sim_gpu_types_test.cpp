// Simulator on heterogeneous clusters: one GPU type per job, memory decides the type, slower
// types progress slower by the planner's iteration-time ratio, and the invariants hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/data_path.h"
#include "simulator/cluster_state.h"
#include "simulator/sim_job_models.h"
#include "simulator/simulator.h"
#include "simulator/trace_loader.h"

using namespace flotilla::simulator;

namespace {
const JobOutcome& job(const SimResult& r, const std::string& id) {
  return *std::find_if(r.jobs.begin(), r.jobs.end(), [&](const auto& j) { return j.id == id; });
}
// GPT-Neo-2.7B with DP 1, PP = GPUs: at 4 GPUs the planner's memory model puts stage 0 at
// ~35 GB, so it fits A100-40 and A100-80 but not V100-16.
std::vector<PlannerBand> small_bands() { return {{4, "GPT-Neo-2.7B", 1, 1, 64, false}}; }
// Static FCFS rescales nothing, so where each job lands is the placement's choice alone.
SimResult simulate_static_fcfs(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes) {
  SimOptions o;
  o.policy = Policy::static_fcfs;
  return simulate(trace, nodes, o);
}

SimOptions all_elastic_from_4_gpus(Policy p) {
  SimOptions o;
  o.policy = p;
  o.elastic_fraction = 1.0;
  o.min_gpus = 4;
  o.planner_bands = small_bands();
  return o;
}
}  // namespace

TEST(ScalerClusterState, PlacesOnlyOnTheRequestedTypeBestFit) {
  ClusterState c({{"a", "V100-16", "z", 8}, {"b", "A100-80", "z", 8}, {"c", "A100-80", "z", 4}});
  ASSERT_EQ(c.types().size(), 2u);
  const int a100 = c.type_id("A100-80");
  EXPECT_EQ(c.type_id("H100-80"), -1);
  // Best fit: the 4-GPU A100 node, not the 8-GPU one and never the V100 node.
  EXPECT_EQ(*c.place_job(4, a100), (Allocation{{2, 4}}));
  c.take({{1, 6}});
  EXPECT_EQ(c.free_of_type(a100), 6);
  EXPECT_EQ(c.free_of_type(c.type_id("V100-16")), 8);
  // 5 A100s: no single node has them, spanning is not allowed up to a node's size.
  EXPECT_FALSE(c.place_job(5, a100));
  // 6 across nodes when spanning is allowed: the packer's best fit over the A100 nodes only.
  const auto span = c.place(6, true, a100);
  ASSERT_TRUE(span);
  int sum = 0;
  for (auto [node, n] : *span) {
    EXPECT_NE(node, 0);
    sum += n;
  }
  EXPECT_EQ(sum, 6);
  c.set_node_up(2, false);
  EXPECT_EQ(c.free_of_type(a100), 2);
  EXPECT_EQ(c.capacity_of_type(a100), 8);
  c.set_node_up(2, true);
  EXPECT_EQ(c.free_of_type(a100), 6);
}

TEST(ScalerSimGpuTypes, JobThatFitsOnlyLargeMemoryWaitsForItsTypeByHand) {
  // n0: 8 V100-16 (idle all along); n1: 4 A100-40; n2: 4 A100-80.
  // B (2 GPUs, A100-80 only) and C (2 GPUs, A100-40 only) hold half of n2 and n1 for 0-100 s.
  // E and F (4 GPUs each, elastic GPT-Neo-2.7B) do not fit a V100-16, so they wait for the A100s
  // although 8 V100s are free. At t=100, E (first in line) takes the faster A100-80; F takes the
  // A100-40 and runs slower by the planner's iteration-time ratio. G (3 GPUs, no model, no
  // constraint) waits behind F (FCFS) and then takes the only type with room left: V100-16.
  const std::vector<SimNode> cluster = {
      {"n0", "V100-16", "z", 8}, {"n1", "A100-40", "z", 4}, {"n2", "A100-80", "z", 4}};
  std::vector<TraceJob> trace = {{"B", 0, 100, 2, {"A100-80"}},
                                 {"C", 0, 100, 2, {"A100-40"}},
                                 {"E", 10, 50, 4, {}},
                                 {"F", 20, 50, 4, {}},
                                 {"G", 30, 10, 3, {}}};
  const SimOptions o = all_elastic_from_4_gpus(Policy::static_fcfs);
  const auto r = simulate(trace, cluster, o);
  ASSERT_TRUE(r.invariant_violations.empty()) << r.invariant_violations.front();

  const auto v100 = planner_job_model(4, "V100-16", small_bands(), {});
  const auto a40 = planner_job_model(4, "A100-40", small_bands(), {});
  const auto a80 = planner_job_model(4, "A100-80", small_bands(), {});
  EXPECT_FALSE(v100.model);
  EXPECT_NE(v100.why.find("OOM"), std::string::npos) << v100.why;
  ASSERT_TRUE(a40.model && a80.model);
  const double ratio = a40.model->initial_iteration_s / a80.model->initial_iteration_s;
  EXPECT_GT(ratio, 1.2);  // an A100-40 is clearly slower in the planner's model

  const auto& e = job(r, "E");
  EXPECT_TRUE(e.elastic);
  EXPECT_EQ(e.model, "GPT-Neo-2.7B");
  EXPECT_EQ(e.gpu_type, "A100-80");
  EXPECT_DOUBLE_EQ(e.start_s, 100);
  EXPECT_NEAR(e.finish_s, 150, 1e-9);  // its fastest type: speed 1
  const auto& f = job(r, "F");
  EXPECT_EQ(f.gpu_type, "A100-40");
  EXPECT_DOUBLE_EQ(f.start_s, 100);
  EXPECT_NEAR(f.finish_s, 100 + 50 * ratio, 1e-6);
  EXPECT_NEAR(f.work_s, 50, 1e-9);
  const auto& g = job(r, "G");
  EXPECT_FALSE(g.elastic);
  EXPECT_EQ(g.gpu_type, "V100-16");
  EXPECT_DOUBLE_EQ(g.start_s, 100);
  EXPECT_NEAR(g.finish_s, 110, 1e-9);
  EXPECT_EQ(job(r, "B").gpu_type, "A100-80");
  EXPECT_EQ(job(r, "C").gpu_type, "A100-40");
}

TEST(ScalerSimGpuTypes, ScaleUpTakesOnlyFreeGpusOfTheJobsType) {
  // One elastic job on a cluster of 4 A100-80 and 8 idle A100-40: it may grow only into A100-80
  // GPUs, and there are none spare, so it never scales although 8 GPUs are free.
  const std::vector<SimNode> cluster = {{"a", "A100-80", "z", 4}, {"b", "A100-40", "z", 8}};
  std::vector<TraceJob> trace = {{"E", 0, 1000, 4, {"A100-80"}}};
  const SimOptions o = all_elastic_from_4_gpus(Policy::greedy);
  const auto r = simulate(trace, cluster, o);
  ASSERT_TRUE(r.invariant_violations.empty()) << r.invariant_violations.front();
  EXPECT_EQ(job(r, "E").gpu_type, "A100-80");
  EXPECT_EQ(job(r, "E").max_gpus, 4);
  EXPECT_EQ(r.metrics.scale_ups, 0);
  // With 4 more A100-80s it grows on them.
  const std::vector<SimNode> bigger = {{"a", "A100-80", "z", 4}, {"b", "A100-40", "z", 8},
                                       {"c", "A100-80", "z", 4}};
  const auto g = simulate(trace, bigger, o);
  ASSERT_TRUE(g.invariant_violations.empty()) << g.invariant_violations.front();
  EXPECT_GT(job(g, "E").max_gpus, 4);
  EXPECT_LE(job(g, "E").max_gpus, 8);
  EXPECT_LT(job(g, "E").finish_s, job(r, "E").finish_s);
}

namespace {
// The auto cluster for a real trace, its nodes dealt round-robin to four GPU types.
std::vector<SimNode> mixed_cluster(const std::vector<TraceJob>& trace) {
  auto nodes = auto_cluster(trace, 0.6);
  const char* types[] = {"H100-80", "A100-80", "A100-40", "V100-32"};
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].gpu_type = types[i % 4];
  return nodes;
}
}  // namespace

TEST(ScalerSimGpuTypes, InvariantsHoldOnAHeterogeneousClusterForEveryPolicy) {
  const auto p = flotilla::data_path("traces/elasticflow/cluster03.csv");
  if (!p) GTEST_SKIP() << flotilla::data_missing_message("traces/elasticflow/cluster03.csv");
  const auto t = load_trace(p->string());
  ASSERT_TRUE(t.error.empty()) << t.error;
  const auto cluster = mixed_cluster(t.jobs);
  const int n = static_cast<int>(cluster.size());
  double first = t.jobs.front().submit_s;
  for (Policy pol : {Policy::static_fcfs, Policy::greedy, Policy::elasticflow, Policy::flextrain}) {
    SimOptions o;
    o.policy = pol;
    o.elastic_fraction = 0.6;
    // Lose one node of each type a day in, bring two back a day later.
    o.node_events = {{first + 86400, 0, false}, {first + 86400, 1, false},
                     {first + 90000, 2, false}, {first + 90000, 3, false},
                     {first + 2 * 86400, 0, true}, {first + 2 * 86400, 2, true},
                     {first + 3 * 86400, n - 1, false}};
    const auto r = simulate(t.jobs, cluster, o);
    EXPECT_TRUE(r.invariant_violations.empty()) << policy_name(pol) << ": " << r.invariant_violations.front();
    EXPECT_EQ(r.metrics.unfinished_jobs, 0) << policy_name(pol);
    EXPECT_EQ(r.metrics.jobs + r.metrics.skipped_jobs, static_cast<int>(t.jobs.size()));
    EXPECT_GT(r.metrics.elastic_jobs, 0);
    std::set<std::string> types_used;
    for (const auto& j : r.jobs) {
      types_used.insert(j.gpu_type);
      if (j.elastic) {  // planner models on a mixed cluster: 32-63 GPUs and 64-255 GPUs
        EXPECT_TRUE(j.model == "GPT-Neo-2.7B" || j.model == "Llama-2-7B") << j.id << " " << j.model;
      }
    }
    EXPECT_EQ(types_used.size(), 4u) << policy_name(pol);
    if (pol != Policy::static_fcfs) {
      EXPECT_GT(r.metrics.scale_ups, 0) << policy_name(pol);
    }
    // Deterministic for a seed.
    const auto again = simulate(t.jobs, cluster, o);
    ASSERT_EQ(again.jobs.size(), r.jobs.size());
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      EXPECT_EQ(again.jobs[i].finish_s, r.jobs[i].finish_s);
      EXPECT_EQ(again.jobs[i].gpu_type, r.jobs[i].gpu_type);
    }
  }
}

TEST(ScalerSimGpuTypes, AlibabaPodsKeepTheirGpuSpec) {
  const auto pods = flotilla::data_path("traces/alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv");
  const auto nodes = flotilla::data_path("traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv");
  if (!pods || !nodes)
    GTEST_SKIP() << flotilla::data_missing_message("traces/alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv");
  const auto t = load_trace(pods->string());
  const auto c = load_cluster(nodes->string());
  ASSERT_TRUE(t.error.empty() && c.error.empty()) << t.error << c.error;
  const auto r = simulate_static_fcfs(t.jobs, c.nodes);
  EXPECT_TRUE(r.invariant_violations.empty()) << r.invariant_violations.front();
  EXPECT_EQ(r.metrics.unfinished_jobs, 0);
  std::map<std::string, const TraceJob*> by_id;
  for (const auto& j : t.jobs) by_id[j.id] = &j;
  int constrained = 0;
  for (const auto& out : r.jobs) {
    const auto& spec = by_id.at(out.id)->gpu_types;
    if (spec.empty()) continue;
    ++constrained;
    EXPECT_NE(std::find(spec.begin(), spec.end(), out.gpu_type), spec.end()) << out.id;
  }
  EXPECT_GT(constrained, 1000);
}

// Why Alibaba pods without gpu_spec land on P100, V100M16 and A10 only (docs/simulator.md): a
// model-less pod takes the best fit over all types — the node left with the fewest free GPUs —
// and ties go to the type listed first. By hand, types in node-list order P100, V100M16, G2:
//   a (1 GPU): P100 node leaves 1, V100M16 node leaves 0, G2 leaves 7  -> V100M16
//   b (1 GPU): P100 leaves 1, G2 leaves 7                              -> P100
//   c (1 GPU): P100 leaves 0                                           -> P100
//   d (1 GPU): only G2 has room                                        -> G2
// So the big 8-GPU nodes (most of the Alibaba cluster: G2) are used only once every small node is
// full, which at the Alibaba pod lists' 0.27 % load never happens. A pod constrained to G2 goes
// there at once.
TEST(ScalerSimGpuTypes, UnconstrainedPodsBestFitAcrossTypesByHand) {
  const std::vector<SimNode> nodes = {{"p0", "P100", "z", 2}, {"v0", "V100M16", "z", 1},
                                      {"g0", "G2", "z", 8}};
  const std::vector<TraceJob> trace = {{"a", 0, 100, 1, {}},
                                       {"b", 1, 100, 1, {}},
                                       {"c", 2, 100, 1, {}},
                                       {"d", 3, 100, 1, {}},
                                       {"e", 4, 100, 1, {"G2"}}};
  const auto r = simulate_static_fcfs(trace, nodes);
  EXPECT_TRUE(r.invariant_violations.empty());
  EXPECT_EQ(job(r, "a").gpu_type, "V100M16");
  EXPECT_EQ(job(r, "b").gpu_type, "P100");
  EXPECT_EQ(job(r, "c").gpu_type, "P100");
  EXPECT_EQ(job(r, "d").gpu_type, "G2");
  EXPECT_EQ(job(r, "e").gpu_type, "G2");
  for (const char* id : {"a", "b", "c", "d", "e"}) EXPECT_DOUBLE_EQ(job(r, id).start_s, job(r, id).submit_s);
}

// A pod that fits on one node of some allowed type is not spread over several nodes of another,
// even if that type comes first in the node list and leaves its first node full: HAS keeps a job
// on one node when it can. A 4-GPU pod with P100 2-GPU nodes listed before a 4-GPU T4 node goes
// to the T4 node (before the fix it spanned both P100 nodes, which is why the Alibaba pod lists'
// 4- and 8-GPU pods all ran on P100).
TEST(ScalerSimGpuTypes, PodPrefersOneNodeOfAnotherTypeOverSpanningByHand) {
  const std::vector<SimNode> nodes = {{"p0", "P100", "z", 2}, {"p1", "P100", "z", 2},
                                      {"t0", "T4", "z", 4}};
  const std::vector<TraceJob> trace = {{"four", 0, 100, 4, {}}, {"span", 1, 100, 4, {}}};
  const auto r = simulate_static_fcfs(trace, nodes);
  EXPECT_TRUE(r.invariant_violations.empty());
  EXPECT_EQ(job(r, "four").gpu_type, "T4");
  // With the T4 node taken, spanning the two P100 nodes is what is left (4 > a P100 node).
  EXPECT_EQ(job(r, "span").gpu_type, "P100");
  EXPECT_DOUBLE_EQ(job(r, "span").start_s, 1);
}
