#include "worker/runtime/trainer.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "worker/model/optimizer.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/stage.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/emulated_pace.h"
#include "common/progress_line.h"
#include "process/stop_flag.h"
#include "worker/runtime/nccl_communicator.h"
#include "worker/runtime/pipeline_schedule.h"
#include "worker/runtime/progress_log.h"
#include "worker/runtime/run_summary.h"

namespace flotilla::worker {
namespace {

using json = nlohmann::json;

enum Tag : std::uint32_t {
  kResume = 1,
  kActivation,
  kGradient,
  kShardGrads,
  kTotalGrads,
  kControl,
  kDecision,
  kCheckpointFiles,
  kCheckpointDone,
  kNcclIds,
  kGpuIdentity,
  kCommChoice,
};

// What each tag carries, for "waiting for rank 2 to send ..." errors (index = tag).
const std::vector<std::string>& tag_names() {
  static const std::vector<std::string> names = {"",
          "the step to resume from",
          "an activation",
          "an activation gradient",
          "the running sum of its virtual-shard gradients",
          "the reduced data-parallel gradients",
          "its end-of-step control message",
          "the end-of-step decision",
          "its checkpoint file list",
          "the checkpoint-complete acknowledgement",
          "the NCCL unique ids",
          "its GPU's identity (for --comm auto)",
          "the --comm auto choice"};
  return names;
}

json model_json(const GPTConfig& c) {
  return {{"num_layers", c.num_layers}, {"hidden", c.hidden}, {"heads", c.heads},
          {"seq_len", c.seq_len},       {"vocab", c.vocab}};
}

json training_json(const JobOptions& o) {
  const TrainConfig& t = o.train;
  return {{"global_batch", o.geometry.global_batch},
          {"micro_batch", o.geometry.micro_batch},
          {"virtual_shards", o.geometry.virtual_shards},
          {"seed", t.seed},
          {"lr", t.lr},
          {"min_lr_ratio", t.min_lr_ratio},
          {"warmup_steps", t.warmup_steps},
          {"decay_steps", t.total_steps},
          {"beta1", t.beta1},
          {"beta2", t.beta2},
          {"eps", t.eps},
          {"weight_decay", t.weight_decay},
          {"grad_clip", t.grad_clip_norm}};
}

UnitFileInfo unit_info_from_json(const json& j) {
  UnitFileInfo info;
  info.unit = j.at("unit").get<int>();
  info.file = j.at("file").get<std::string>();
  info.bytes = j.at("bytes").get<std::uint64_t>();
  info.crc32 = j.at("crc32").get<std::uint32_t>();
  info.param_count = j.at("param_count").get<std::uint64_t>();
  return info;
}

json unit_info_to_json(const UnitFileInfo& i) {
  return {{"unit", i.unit},   {"file", i.file},       {"bytes", i.bytes},
          {"crc32", i.crc32}, {"param_count", i.param_count}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class RankRunner {
 public:
  RankRunner(const JobOptions& o, const RendezvousConfig& rz)
      : o_(o), rz_(rz), layout_(o.layout), g_(o.geometry) {}

  int run();

 private:
  void resume();
  bool every_rank_has_its_own_gpu();
  void train_step(std::int64_t step);
  void checkpoint(std::int64_t completed_steps);
  void collect_shard_grads(int local_shard);
  void reduce_data_parallel();
  void reduce_data_parallel_on_device();
  void send_tensor(int peer, Tag tag, const std::vector<float>& v);
  void recv_tensor(int peer, Tag tag, std::vector<float>& v);
  std::vector<float> stage_grads();
  void set_stage_grads(const std::vector<float>& flat);

  const JobOptions& o_;
  RendezvousConfig rz_;
  const Layout& layout_;
  const BatchGeometry& g_;
  int rank_ = 0, stage_ = 0, dpi_ = 0, shards_per_rank_ = 1, first_shard_ = 0, n_local_ = 0;
  bool is_first_ = false, is_last_ = false;
  std::unique_ptr<DataLoader> data_;
  std::unique_ptr<Backend> backend_;
  std::optional<EmulatedGpu> emulated_;  // the CPU backend standing in for this GPU type
  std::optional<EmulatedPace> pace_;
  std::unique_ptr<TcpTransport> net_;
  std::unique_ptr<NcclCommunicator> nccl_;  // null: tensors go over net_
  std::unique_ptr<Stage> model_;
  std::unique_ptr<ProgressLog> progress_;
  std::unique_ptr<LossLog> loss_log_;
  std::int64_t start_step_ = 0;
  double train_seconds_ = 0;  // sum of this run's step times (rank 0's summary)
  std::vector<std::vector<float>> shard_grads_;
  bool stop_ = false;
};

int RankRunner::run() {
  const auto t_process = std::chrono::steady_clock::now();
  const double start_ms = unix_time_ms();
  if (rz_.world_size != o_.world_size)
    throw std::runtime_error("WORLD_SIZE=" + std::to_string(rz_.world_size) +
                             " but the job's --world-size is " + std::to_string(o_.world_size));
  rank_ = rz_.rank;
  stage_ = layout_.stage_of(rank_);
  dpi_ = layout_.dp_index_of(rank_);
  shards_per_rank_ = g_.virtual_shards / layout_.dp;
  first_shard_ = dpi_ * shards_per_rank_;
  n_local_ = shards_per_rank_ * g_.micro_batches_per_shard();
  is_first_ = stage_ == 0;
  is_last_ = stage_ == layout_.pp - 1;
  data_ = std::make_unique<DataLoader>(o_.data_path, o_.model.seq_len, o_.train.seed);
  std::string err;
  // On an emulated GPU node (devcluster, common/emulated_gpu.h) the CPU backend takes that
  // type's memory and speed; a real GPU's backend never reads these variables.
  if (o_.backend == "cpu") {
    emulated_ = emulated_gpu_from_process_env(&err);
    if (!err.empty()) throw std::runtime_error("emulated GPU: " + err);
  }
  backend_ = emulated_ ? make_emulated_gpu_backend(static_cast<std::size_t>(emulated_->memory_bytes), emulated_->type)
                       : make_backend(o_.backend, &err);
  if (!backend_) throw std::runtime_error("backend: " + err);
  progress_ = std::make_unique<ProgressLog>(o_.progress);

  const auto t_connect = std::chrono::steady_clock::now();
  if (o_.recv_timeout_s > 0)
    rz_.recv_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o_.recv_timeout_s * 1000));
  if (o_.connect_timeout_s > 0)
    rz_.connect_timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(o_.connect_timeout_s * 1000));
  net_ = TcpTransport::connect(rz_);
  net_->name_tags(tag_names());
  const bool cuda_backend = o_.backend.rfind("cuda", 0) == 0;
  if (o_.comm == "nccl" || (o_.comm == "auto" && cuda_backend && nccl_compiled() &&
                            rz_.world_size > 1 && every_rank_has_its_own_gpu()))
    nccl_ = NcclCommunicator::connect(*net_, kNcclIds, rz_.recv_timeout);
  const double connect_s = seconds_since(t_connect);
  const auto t_load = std::chrono::steady_clock::now();
  auto [first_unit, end_unit] = layout_.stage_units[static_cast<std::size_t>(stage_)];
  model_ = std::make_unique<Stage>(o_.model, first_unit, end_unit, o_.train.seed, *backend_);
  if (emulated_) pace_.emplace(o_.model, first_unit, end_unit, *emulated_);
  // 1F1B keeps at most PP sends per direction in flight; reserve their staging up front.
  if (nccl_) nccl_->reserve_staging(model_->activation_count(g_.micro_batch), 2 * layout_.pp + 2);
  resume();
  const double load_s = seconds_since(t_load);
  if (rank_ == 0) loss_log_ = std::make_unique<LossLog>(o_.loss_log, start_step_);
  progress_->write_line(json{{"event", "start"},
                             {"rank", rank_},
                             {"pid", static_cast<long>(::getpid())},
                             {"stage", stage_},
                             {"dp_index", dpi_},
                             {"units", {first_unit, end_unit}},
                             {"resumed_from_step", start_step_},
                             {"connect_seconds", connect_s},
                             {"comm", nccl_ ? "nccl" : "tcp"},
                             {"load_seconds", load_s},
                             {"startup_seconds", seconds_since(t_process)},
                             {"process_start_unix_ms", start_ms},
                             {"time_unix_ms", unix_time_ms()}}
                            .dump());

  for (std::int64_t step = start_step_; step < o_.steps && !stop_; ++step) {
    try {
      train_step(step);
      bool periodic = o_.checkpoint_every > 0 && (step + 1) % o_.checkpoint_every == 0;
      if (stop_ || step + 1 == o_.steps || periodic) checkpoint(step + 1);
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError("step " + std::to_string(step) + ": " + e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error("step " + std::to_string(step) + ": " + e.what());
    }
  }
  if (nccl_) nccl_->wait_sends();
  net_->flush();
  return 0;
}

// --comm auto when ranks were started by something other than our launcher (which resolves
// auto itself): NCCL cannot put two ranks of a communicator on one GPU, and one rank cannot
// see which GPUs the others got. So every rank sends rank 0 its GPU's UUID; rank 0 answers
// NCCL only when all are distinct. Several ranks sharing one GPU then train over TCP instead
// of failing in ncclCommInitRank.
bool RankRunner::every_rank_has_its_own_gpu() {
  constexpr std::size_t kIdBytes = 64;
  auto fixed = [](const std::string& id) {
    std::array<char, kIdBytes> out{};
    id.copy(out.data(), kIdBytes - 1);
    return out;
  };
  char choice = 0;
  if (rank_ == 0) {
    const std::string own = cuda_device_identity();
    bool distinct = !own.empty();
    std::set<std::string> seen = {own};
    for (int r = 1; r < rz_.world_size; ++r) {
      std::array<char, kIdBytes> id{};
      net_->recv(r, kGpuIdentity, id.data(), id.size());
      const std::string s(id.data());
      if (s.empty() || !seen.insert(s).second) distinct = false;
    }
    choice = distinct ? 1 : 0;
    for (int r = 1; r < rz_.world_size; ++r) net_->send(r, kCommChoice, &choice, 1);
    net_->flush();
  } else {
    const auto id = fixed(cuda_device_identity());
    net_->send(0, kGpuIdentity, id.data(), id.size());
    net_->recv(0, kCommChoice, &choice, 1);
  }
  return choice == 1;
}

void RankRunner::resume() {
  std::int64_t step = -1;
  if (rank_ == 0) {
    if (auto ref = find_latest_complete(o_.checkpoint_dir)) step = ref->step;
    for (int r = 1; r < rz_.world_size; ++r) net_->send(r, kResume, &step, sizeof step);
  } else {
    net_->recv(0, kResume, &step, sizeof step);
  }
  if (step < 0) return;
  auto folder = step_folder(o_.checkpoint_dir, step);
  json meta;
  try {
    meta = json::parse(read_meta(folder));
  } catch (const json::exception& e) {
    throw std::runtime_error("checkpoint '" + folder.string() + "' has a corrupt meta.json (" +
                             e.what() + "); delete that folder to fall back to the previous one");
  }
  if (auto e = resume_compatibility_error(meta, resume_identity(o_), folder, step); !e.empty())
    throw std::runtime_error(e);
  for (int u = model_->first_unit(); u < model_->end_unit(); ++u) {
    UnitFileInfo info = unit_info_from_json(meta["units"][static_cast<std::size_t>(u)]);
    if (info.unit != u || info.param_count != unit_param_count(o_.model, u))
      throw std::runtime_error("checkpoint '" + folder.string() + "' meta.json entry " +
                               std::to_string(u) + " does not describe unit " +
                               std::to_string(u) + " of this model");
    UnitState s = read_unit_file(folder, info);
    model_->unit(u).set_state(s.params, s.m, s.v);
  }
  start_step_ = meta.at("step").get<std::int64_t>();
}

std::vector<float> RankRunner::stage_grads() {
  std::vector<float> flat, tmp;
  for (auto& unit : model_->units()) {
    unit.get_grads(&tmp);
    flat.insert(flat.end(), tmp.begin(), tmp.end());
  }
  return flat;
}

void RankRunner::set_stage_grads(const std::vector<float>& flat) {
  std::size_t off = 0;
  std::vector<float> tmp;
  for (auto& unit : model_->units()) {
    tmp.assign(flat.begin() + static_cast<std::ptrdiff_t>(off),
               flat.begin() + static_cast<std::ptrdiff_t>(off + unit.param_count()));
    unit.set_grads(tmp);
    off += unit.param_count();
  }
}

void RankRunner::collect_shard_grads(int local_shard) {
  shard_grads_[static_cast<std::size_t>(local_shard)] = stage_grads();
  model_->zero_grads();
}

// Sum of the V per-shard gradients as one left fold in shard order, ((s0 + s1) + s2) + ...,
// whatever the DP degree: replica d receives the running sum of shards [0, d*V/DP) from
// replica d-1, adds its own shards in order and passes it on; the last replica sends the
// total back to the others. Each link carries one buffer, so no rank gathers all V shards.
void RankRunner::reduce_data_parallel() {
  std::vector<float> total;
  if (dpi_ == 0) {
    total = shard_grads_.front();
  } else {
    total.resize(shard_grads_.front().size());
    net_->recv_vec(layout_.rank_of(stage_, dpi_ - 1), kShardGrads, total);
  }
  for (std::size_t j = (dpi_ == 0 ? 1 : 0); j < shard_grads_.size(); ++j) {
    const std::vector<float>& shard = shard_grads_[j];
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += shard[i];
  }
  const int last = layout_.dp - 1;
  if (dpi_ < last) {
    net_->send_vec(layout_.rank_of(stage_, dpi_ + 1), kShardGrads, total);
    net_->recv_vec(layout_.rank_of(stage_, last), kTotalGrads, total);
  } else {
    for (int d = 0; d < last; ++d) net_->send_vec(layout_.rank_of(stage_, d), kTotalGrads, total);
  }
  set_stage_grads(total);
}

NcclCommunicator::Channel channel_of(std::uint32_t tag) {
  if (tag == kActivation) return NcclCommunicator::kForward;
  if (tag == kGradient) return NcclCommunicator::kBackward;
  return NcclCommunicator::kDataParallel;
}

void RankRunner::send_tensor(int peer, Tag tag, const std::vector<float>& v) {
  if (nccl_) nccl_->send_host(channel_of(tag), peer, v.data(), v.size());
  else net_->send_vec(peer, tag, v);
}

void RankRunner::recv_tensor(int peer, Tag tag, std::vector<float>& v) {
  if (nccl_) nccl_->recv_host(channel_of(tag), peer, v.data(), v.size(), tag_names()[tag]);
  else net_->recv_vec(peer, tag, v);
}

// The same chain and the same left fold as reduce_data_parallel(), with the running sum on
// the GPU: shard buffers are added by Backend::accumulate (one IEEE float add per element,
// exactly like the host loop) and the sum moves between replicas over NCCL. So the reduced
// gradients are bit-identical to the TCP path's and independent of the DP degree.
void RankRunner::reduce_data_parallel_on_device() {
  const std::size_t n = shard_grads_.front().size();
  DeviceBuffer<float> total(*backend_, n), shard(*backend_, n);
  // The backend allocates and zeroes on its own stream; NCCL's streams must not race that.
  backend_->synchronize();
  std::size_t first = 0;
  if (dpi_ == 0) {
    backend_->copy_from_host(total.data(), shard_grads_.front().data(), total.bytes());
    first = 1;
  } else {
    nccl_->recv_device(NcclCommunicator::kDataParallel, layout_.rank_of(stage_, dpi_ - 1),
                       total.data(), n, tag_names()[kShardGrads]);
  }
  for (std::size_t j = first; j < shard_grads_.size(); ++j) {
    backend_->copy_from_host(shard.data(), shard_grads_[j].data(), shard.bytes());
    backend_->accumulate(total.data(), shard.data(), n);
  }
  backend_->synchronize();
  const int last = layout_.dp - 1;
  if (dpi_ < last) {
    nccl_->send_device(NcclCommunicator::kDataParallel, layout_.rank_of(stage_, dpi_ + 1),
                       total.data(), n);
    // Same stream: this receive starts after the send above has completed.
    nccl_->recv_device(NcclCommunicator::kDataParallel, layout_.rank_of(stage_, last),
                       total.data(), n, tag_names()[kTotalGrads]);
  } else {
    for (int d = 0; d < last; ++d)
      nccl_->send_device(NcclCommunicator::kDataParallel, layout_.rank_of(stage_, d),
                         total.data(), n);
  }
  nccl_->wait_sends();
  std::vector<float> host(n);
  backend_->copy_to_host(host.data(), total.data(), total.bytes());
  set_stage_grads(host);
}

void RankRunner::train_step(std::int64_t step) {
  const auto t_step = std::chrono::steady_clock::now();
  const int M = g_.micro_batches_per_shard();
  const bool sharded = g_.virtual_shards > 1;
  const float dloss = 1.0f / static_cast<float>(g_.total_micro_batches());
  const int prev = is_first_ ? -1 : layout_.rank_of(stage_ - 1, dpi_);
  const int next = is_last_ ? -1 : layout_.rank_of(stage_ + 1, dpi_);
  const std::size_t act_count = model_->activation_count(g_.micro_batch);
  std::vector<std::vector<std::int32_t>> tokens(static_cast<std::size_t>(n_local_)),
      targets(static_cast<std::size_t>(n_local_));
  std::vector<float> losses(static_cast<std::size_t>(n_local_), 0.0f);
  std::vector<double> fwd_s(static_cast<std::size_t>(n_local_)), bwd_s(fwd_s);
  shard_grads_.assign(sharded ? static_cast<std::size_t>(shards_per_rank_) : 0, {});
  model_->zero_grads();
  std::vector<float> in, grad_out;
  for (const PipelineOp& op : one_f_one_b(stage_, layout_.pp, n_local_)) {
    const auto i = static_cast<std::size_t>(op.micro_batch);
    const int shard = first_shard_ + op.micro_batch / M;
    if (op.forward) {
      data_->micro_batch(g_, step, shard, op.micro_batch % M, tokens[i], targets[i]);
      MicroBatch batch{g_.micro_batch, tokens[i].data(), targets[i].data()};
      in.clear();
      if (!is_first_) {
        in.resize(act_count);
        recv_tensor(prev, kActivation, in);
      }
      const auto t0 = std::chrono::steady_clock::now();
      float loss = 0.0f;
      std::vector<float> out = model_->forward(static_cast<std::uint64_t>(op.micro_batch), batch,
                                               in, &loss);
      if (pace_) pad_until(t0, pace_->forward_seconds(g_.micro_batch));
      fwd_s[i] = seconds_since(t0);
      if (is_last_) losses[i] = loss;
      else send_tensor(next, kActivation, out);
    } else {
      grad_out.clear();
      if (!is_last_) {
        grad_out.resize(act_count);
        recv_tensor(next, kGradient, grad_out);
      }
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<float> din = model_->backward(static_cast<std::uint64_t>(op.micro_batch),
                                                grad_out, is_last_ ? dloss : 0.0f);
      if (pace_) pad_until(t0, pace_->backward_seconds(g_.micro_batch));
      bwd_s[i] = seconds_since(t0);
      if (!is_first_) send_tensor(prev, kGradient, din);
      if (sharded && op.micro_batch % M == M - 1) collect_shard_grads(op.micro_batch / M);
    }
  }
  const double pipeline_s = seconds_since(t_step);
  const auto t_reduce = std::chrono::steady_clock::now();
  if (sharded && nccl_) reduce_data_parallel_on_device();
  else if (sharded) reduce_data_parallel();
  const double reduce_s = seconds_since(t_reduce);

  // Control round trip: every rank reports its stop flag, the last stages their micro-batch
  // losses, each stage's DP root its per-unit grad sums of squares; rank 0 decides.
  std::vector<double> control = {process::stop_requested() ? 1.0 : 0.0};
  if (is_last_) control.insert(control.end(), losses.begin(), losses.end());
  if (dpi_ == 0) {
    auto sq = model_->grad_sum_squares();
    control.insert(control.end(), sq.begin(), sq.end());
  }
  double decision[4] = {1.0, 0.0, 0.0, 0.0};  // clip scale, stop, loss, grad norm
  if (rank_ == 0) {
    std::vector<double> mb_losses(static_cast<std::size_t>(g_.total_micro_batches()), 0.0);
    std::vector<double> unit_sq(static_cast<std::size_t>(o_.model.num_units()), 0.0);
    bool stop = false;
    for (int r = 0; r < rz_.world_size; ++r) {
      std::vector<double> msg = control;
      if (r != 0) {
        auto bytes = net_->recv_bytes(r, kControl);
        msg.resize(bytes.size() / sizeof(double));
        std::memcpy(msg.data(), bytes.data(), msg.size() * sizeof(double));
      }
      std::size_t at = 0;
      const bool rank_stops = msg.at(at++) != 0.0;  // read before ||: it advances `at`
      stop = stop || rank_stops;
      const int s = layout_.stage_of(r), d = layout_.dp_index_of(r);
      if (s == layout_.pp - 1)
        for (int k = 0; k < n_local_; ++k)
          mb_losses[static_cast<std::size_t>(d * n_local_ + k)] = msg.at(at++);
      if (d == 0)
        for (int u = layout_.stage_units[static_cast<std::size_t>(s)].first;
             u < layout_.stage_units[static_cast<std::size_t>(s)].second; ++u)
          unit_sq[static_cast<std::size_t>(u)] = msg.at(at++);
    }
    double loss_sum = 0.0;
    for (double l : mb_losses) loss_sum += l;
    const double norm = grad_norm(unit_sq);
    decision[0] = clip_scale(norm, o_.train.grad_clip_norm);
    decision[1] = stop ? 1.0 : 0.0;
    decision[2] = loss_sum / static_cast<double>(mb_losses.size());
    decision[3] = norm;
    for (int r = 1; r < rz_.world_size; ++r) net_->send(r, kDecision, decision, sizeof decision);
  } else {
    net_->send_vec(0, kControl, control);
    net_->recv(0, kDecision, decision, sizeof decision);
  }
  stop_ = decision[1] != 0.0;
  const auto t_update = std::chrono::steady_clock::now();
  model_->adamw_step(o_.train, step, static_cast<float>(decision[0]));
  if (pace_) pad_until(t_update, pace_->update_seconds());
  const double step_s = seconds_since(t_step);
  if (loss_log_) loss_log_->append(step, decision[2]);
  if (rank_ == 0) {
    train_seconds_ += step_s;
    write_run_summary(o_.checkpoint_dir, start_step_, step + 1,
                      static_cast<double>(step + 1 - start_step_) * g_.global_batch *
                          o_.model.seq_len,
                      train_seconds_, decision[2]);
  }
  const double step_tokens = static_cast<double>(g_.global_batch) * o_.model.seq_len;
  StepProgress line;
  line.rank = rank_;
  line.stage = stage_;
  line.dp_index = dpi_;
  line.step = step;
  line.loss = decision[2];
  line.grad_norm = decision[3];
  line.lr = learning_rate(o_.train, step);
  line.tokens_per_s = step_tokens / step_s;
  line.step_seconds = step_s;
  line.pipeline_seconds = pipeline_s;
  line.dp_reduce_seconds = reduce_s;
  line.first_global_micro_batch = static_cast<std::int64_t>(dpi_) * n_local_;
  line.forward_seconds = fwd_s;
  line.backward_seconds = bwd_s;
  line.time_unix_ms = unix_time_ms();
  progress_->write_line(format_step_line(line));
  // The high-water mark is reached in the first step (1F1B's warm-up holds the most
  // activations); what a GPU (or an emulated one) held is what the planner's memory model
  // predicts, so the operator can compare the two.
  if (step != start_step_) return;
  if (const auto device = backend_->device_memory()) {
    MemoryProgress memory;
    memory.rank = rank_;
    memory.stage = stage_;
    memory.gpu_type = device->gpu_type;
    memory.peak_bytes = static_cast<std::int64_t>(backend_->peak_bytes());
    memory.capacity_bytes = static_cast<std::int64_t>(device->capacity_bytes);
    memory.time_unix_ms = unix_time_ms();
    progress_->write_line(format_memory_line(memory));
  }
}

void RankRunner::checkpoint(std::int64_t completed_steps) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto folder = step_folder(o_.checkpoint_dir, completed_steps);
  json files = json::array();
  if (dpi_ == 0) {
    std::vector<float> params, m, v;
    int written = 0;
    for (auto& unit : model_->units()) {
      unit.get_state(&params, &m, &v);
      files.push_back(unit_info_to_json(write_unit_file(folder, unit.index(), params, m, v)));
      maybe_pause_for_test(completed_steps, ++written);
    }
  }
  if (rank_ == 0) {
    for (int s = 1; s < layout_.pp; ++s) {
      auto bytes = net_->recv_bytes(layout_.rank_of(s, 0), kCheckpointFiles);
      for (auto& f : json::parse(bytes.begin(), bytes.end())) files.push_back(f);
    }
    json partition = json::array();
    for (const auto& [a, b] : layout_.stage_units) partition.push_back({a, b});
    json meta = {
        {"format", "flotilla-worker-checkpoint/1"},
        {"step", completed_steps},
        {"data_position",
         {{"next_step", completed_steps},
          {"samples_consumed", completed_steps * g_.global_batch}}},
        {"rng", {{"seed", o_.train.seed}, {"next_step", completed_steps},
                 {"scheme", "splitmix64(seed, step, sample index); init per (seed, unit)"}}},
        {"model", model_json(o_.model)},
        {"training", training_json(o_)},
        {"layout",
         {{"world_size", layout_.world_size()}, {"pp", layout_.pp}, {"dp", layout_.dp},
          {"virtual_shards", g_.virtual_shards}, {"partition", partition}}},
        {"units", files},
        {"written_unix_ms", unix_time_ms()}};
    write_meta_and_done(folder, meta.dump(1));
    prune_checkpoints(o_.checkpoint_dir, o_.keep);
    const std::uint8_t ack = 1;
    for (int r = 1; r < rz_.world_size; ++r) net_->send(r, kCheckpointDone, &ack, 1);
  } else {
    if (dpi_ == 0) {
      std::string text = files.dump();
      net_->send(0, kCheckpointFiles, text.data(), text.size());
    }
    std::uint8_t ack = 0;
    net_->recv(0, kCheckpointDone, &ack, 1);
  }
  progress_->write_line(json{{"event", "checkpoint"},
                             {"rank", rank_},
                             {"step", completed_steps},
                             {"write_seconds", seconds_since(t0)},
                             {"stopping", stop_},
                             {"time_unix_ms", unix_time_ms()}}
                            .dump());
}

}  // namespace

int run_rank(const JobOptions& options, const RendezvousConfig& rendezvous) {
  RankRunner runner(options, rendezvous);
  return runner.run();
}

ResumeIdentity resume_identity(const JobOptions& options) {
  return {model_json(options.model), training_json(options), options.model.num_units()};
}

}  // namespace flotilla::worker
