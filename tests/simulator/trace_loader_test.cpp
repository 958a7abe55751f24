#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/data_path.h"
#include "simulator/trace_loader.h"

using namespace flotilla::simulator;
namespace fs = std::filesystem;

namespace {
fs::path write(const std::string& name, const std::string& text) {
  const auto p = fs::temp_directory_path() / ("flotilla_scaler_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p;
}
}  // namespace

TEST(ScalerTraceLoader, ElasticFlowCsv) {
  const auto p = write("ef.csv",
                       "job_id,submission_time,duration,num_gpu\n"
                       "b,20,5,4\n"
                       "a,10,100,64\n"
                       "z,30,7,0\n");
  const auto t = load_trace(p.string());
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].id, "a");  // sorted by submission
  EXPECT_DOUBLE_EQ(t.jobs[0].duration_s, 100);
  EXPECT_EQ(t.jobs[0].gpus, 64);
  EXPECT_EQ(t.skipped_rows, 1);  // 0 GPUs
  fs::remove(p);
}

TEST(ScalerTraceLoader, AlibabaPodList) {
  const auto p = write("ali.csv",
                       "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                       "creation_time,deletion_time,scheduled_time\n"
                       "p0,1000,100,2,1000,,LS,Running,100,1100,200\n"
                       "p1,1000,100,0,0,,LS,Running,100,500,100\n"
                       "p2,1000,100,1,500,V100M16,BE,Pending,300,,\n");
  const auto t = load_trace(p.string());
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(t.jobs[0].submit_s, 100);
  EXPECT_DOUBLE_EQ(t.jobs[0].duration_s, 900);  // deletion - scheduled
  EXPECT_EQ(t.skipped_rows, 2);
  fs::remove(p);
}

TEST(ScalerTraceLoader, BadInputIsOneClearLine) {
  EXPECT_NE(load_trace("/nonexistent/x.csv").error.find("cannot read trace"), std::string::npos);
  const auto p = write("bad.csv", "a,b,c\n1,2,3\n");
  EXPECT_NE(load_trace(p.string()).error.find("unknown header"), std::string::npos);
  const auto q = write("bad2.csv", "job_id,submission_time,duration,num_gpu\nx,abc,1,1\n");
  EXPECT_NE(load_trace(q.string()).error.find("line 2"), std::string::npos);
  fs::remove(p);
  fs::remove(q);
}

TEST(ScalerTraceLoader, GpuCountsMustBeWholeAndBounded) {
  // 2.5 GPUs used to be truncated to 2, and 1e12 cast to int (undefined behaviour).
  for (const std::string gpus : {"2.5", "1e12", "-4", "nan"}) {
    const auto p = write("gpus.csv", "job_id,submission_time,duration,num_gpu\nx,0,1," + gpus + "\n");
    const auto err = load_trace(p.string()).error;
    EXPECT_NE(err.find("line 2: num_gpu must be a whole number"), std::string::npos) << gpus << ": " << err;
    fs::remove(p);
  }
  const auto nodes = write("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,T4\nn1,1,1,eight,T4\n");
  const auto c = load_cluster(nodes.string());
  EXPECT_NE(c.error.find("line 3: gpu must be a whole number"), std::string::npos) << c.error;
  fs::remove(nodes);
}

TEST(ScalerTraceLoader, DirectoryIsNamedAsSuch) {
  const auto dir = fs::temp_directory_path();
  EXPECT_NE(load_trace(dir.string()).error.find("is a directory"), std::string::npos);
  EXPECT_NE(load_cluster(dir.string()).error.find("is a directory"), std::string::npos);
}

TEST(ScalerClusterLoader, YamlAndAlibabaNodeList) {
  const auto y = write("c.yaml",
                       "pools:\n"
                       "  - {gpu: H100-80, nodes: 3, gpus_per_node: 8, zone: a}\n"
                       "nodes:\n"
                       "  - {name: big, gpu: A100-40, count: 4, zone: b}\n");
  const auto c = load_cluster(y.string());
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.nodes.size(), 4u);
  int gpus = 0, a100 = 0;
  for (const auto& n : c.nodes) {
    gpus += n.gpus;
    a100 += n.gpu_type == "A100-40" ? n.gpus : 0;
  }
  EXPECT_EQ(gpus, 28);
  EXPECT_EQ(a100, 4);
  const auto bad = write("bad.yaml", "nodes:\n  - {name: x, gpu: H100-80, count: -2}\n");
  EXPECT_FALSE(load_cluster(bad.string()).error.empty());
  const auto notyaml = write("nope.yaml", "nodes: [\n");
  EXPECT_FALSE(load_cluster(notyaml.string()).error.empty());
  const auto ali = write("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,P100\nn1,1,1,0,\n");
  const auto a = load_cluster(ali.string());
  ASSERT_TRUE(a.error.empty()) << a.error;
  ASSERT_EQ(a.nodes.size(), 1u);
  EXPECT_EQ(a.nodes[0].gpu_type, "P100");
  for (const auto& p : {y, bad, notyaml, ali}) fs::remove(p);
}

TEST(ScalerClusterLoader, AutoClusterCoversTheLargestJobAndTheMeanDemand) {
  // 100 GPU-s per second of span on average: 100 / 0.5 = 200 GPUs = 25 nodes.
  const std::vector<TraceJob> jobs = {{"a", 0, 1000, 100}, {"b", 1000, 0, 1}};
  EXPECT_EQ(auto_cluster(jobs, 0.5).size(), 25u);
  const std::vector<TraceJob> big = {{"a", 0, 1, 64}, {"b", 1e6, 1, 1}};
  EXPECT_EQ(auto_cluster(big, 0.5).size(), 16u);  // 2 x 64 GPUs
}

TEST(ScalerTraceLoader, RealTracesLoad) {
  const auto ef = flotilla::data_path("traces/elasticflow/cluster04.csv");
  if (!ef) GTEST_SKIP() << flotilla::data_missing_message("traces/elasticflow/cluster04.csv");
  const auto t = load_trace(ef->string());
  ASSERT_TRUE(t.error.empty()) << t.error;
  size_t rows = 0;
  std::ifstream in(*ef);
  for (std::string line; std::getline(in, line);) rows += !line.empty();
  EXPECT_EQ(t.jobs.size() + t.skipped_rows, rows - 1);  // minus the header
  EXPECT_GT(t.jobs.size(), 15000u);
  const auto ali = flotilla::data_path("traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv");
  if (!ali) return;
  const auto c = load_cluster(ali->string());
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_GT(c.nodes.size(), 1000u);
}

// A row offering more GPUs than kMaxAvailabilityGpus (2^20 took ~31 s to plan) is refused in one
// line naming the file, the row and the limit; the limit itself loads.
TEST(ScalerTraceLoader, AbsurdAvailabilityGpuCountsAreRefusedWithFileRowAndLimit) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto big = dir / ("flotilla_avail_big_" + std::to_string(::getpid()) + ".json");
  const auto edge = dir / ("flotilla_avail_edge_" + std::to_string(::getpid()) + ".json");
  std::ofstream(big) << R"([{"Time":0,"GPUs":4},{"Time":60,"GPUs":1048576}])";
  std::ofstream(edge) << R"([{"Time":0,"GPUs":4},{"Time":60,"GPUs":16384}])";
  const auto r = flotilla::simulator::load_availability_trace(big.string());
  EXPECT_NE(r.error.find(big.string() + " row 1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("[0, 16384]"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("1048576"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
  const auto ok = flotilla::simulator::load_availability_trace(edge.string());
  EXPECT_TRUE(ok.error.empty()) << ok.error;
  ASSERT_EQ(ok.points.size(), 2u);
  EXPECT_EQ(ok.points[1].gpus, 16384);
  std::filesystem::remove(big);
  std::filesystem::remove(edge);
}
