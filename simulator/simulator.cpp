#include "simulator/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <set>

#include "scaler/arrival_rate.h"
#include "scaler/decide.h"
#include "scaler/elastic_model.h"
#include "scaler/scaling_policy.h"

namespace flotilla::simulator {

// The scaler's pure core, which this shell drives.
using scaler::ArrivalRateEstimator;
using scaler::DecideParams;
using scaler::Decision;
using scaler::ElasticJobView;
using scaler::JobSnapshot;
using scaler::ScaleAction;
using scaler::ScaleEntry;
using scaler::decide;
using scaler::estimate_restart_overhead;
using scaler::plan_preemption;
using scaler::scale_up_order;

std::optional<Policy> parse_policy(const std::string& name) {
  if (name == "static") return Policy::static_fcfs;
  if (name == "greedy") return Policy::greedy;
  if (name == "elasticflow") return Policy::elasticflow;
  if (name == "flextrain") return Policy::flextrain;
  return std::nullopt;
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::static_fcfs: return "static";
    case Policy::greedy: return "greedy";
    case Policy::elasticflow: return "elasticflow";
    case Policy::flextrain: return "flextrain";
  }
  return "?";
}

namespace {

// splitmix64: portable, so a seed gives the same elastic set on every standard library.
struct SplitMix {
  std::uint64_t s;
  double uniform() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

enum class Status { pending, queued, running, done };

struct Job {
  TraceJob trace;
  bool elastic = false;
  std::vector<int> types;                          // allowed GPU types, preferred first
  std::vector<const SimJobModel*> model_by_type;   // elastic: per type id, nullptr = cannot run
  std::vector<double> factor_by_type;              // elastic: throughput vs its fastest type
  int type = -1;                                   // while running
  const SimJobModel* mt = nullptr;                 // elastic, while running: model_by_type[type]
  Status status = Status::pending;
  int gpus = 0;
  Allocation alloc;
  double work = 0, last_s = 0, pause_until = 0, speed = 1;
  double end_s = 0;  // while running: when it completes at its current speed
  int version = 0;
  JobOutcome out;
};

struct Event {
  double time_s;
  int kind;  // 0 completion, 1 node event
  long seq;
  int index;
  int version;
  bool operator>(const Event& o) const {
    if (time_s != o.time_s) return time_s > o.time_s;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / v.size();
}

// Takes n GPUs out of an allocation, latest-acquired chunks first; returns what was removed.
Allocation take_back(Allocation& alloc, int n) {
  Allocation removed;
  while (n > 0 && !alloc.empty()) {
    auto& [node, count] = alloc.back();
    const int k = std::min(n, count);
    removed.emplace_back(node, k);
    count -= k;
    n -= k;
    if (count == 0) alloc.pop_back();
  }
  return removed;
}

class Simulation {
 public:
  Simulation(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes,
             const SimOptions& opt)
      : opt_(opt), cluster_(nodes), arrivals_(opt.window_s, opt.min_gpus) {
    SplitMix rng{opt.seed};
    source_ = opt.job_models != JobModelSource::automatic ? opt.job_models
              : cluster_.types().size() > 1               ? JobModelSource::planner
                                                          : JobModelSource::table2;
    bands_ = opt.planner_bands.empty() ? default_planner_bands(opt.min_gpus) : opt.planner_bands;
    const int n_types = static_cast<int>(cluster_.types().size());
    for (const auto& t : trace) {
      const bool large = t.gpus >= opt.min_gpus;
      const double u = large ? rng.uniform() : 1.0;
      Job j;
      // Allowed types in node-list order: the trace's constraint, else all; only those with
      // enough GPUs in total for the request.
      for (int ty = 0; ty < n_types; ++ty) {
        const auto& name = cluster_.types()[ty];
        const bool wanted = t.gpu_types.empty() ||
                            std::find(t.gpu_types.begin(), t.gpu_types.end(), name) != t.gpu_types.end();
        if (wanted && t.gpus <= cluster_.nodes_capacity_of_type(ty)) j.types.push_back(ty);
      }
      if (t.gpus <= 0 || j.types.empty() || !(t.duration_s >= 0)) {
        ++result_.metrics.skipped_jobs;
        continue;
      }
      j.trace = t;
      j.out.id = t.id;
      j.out.requested_gpus = t.gpus;
      j.out.submit_s = t.submit_s;
      if (large && u < opt.elastic_fraction) make_elastic(j);
      j.out.elastic = j.elastic;
      jobs_.push_back(std::move(j));
    }
    std::stable_sort(jobs_.begin(), jobs_.end(), [](const Job& a, const Job& b) {
      return a.trace.submit_s < b.trace.submit_s;
    });
    for (size_t i = 0; i < opt.node_events.size(); ++i) {
      const auto& e = opt.node_events[i];
      if (e.node < 0 || e.node >= static_cast<int>(nodes.size())) {
        result_.invariant_violations.push_back("node event for unknown node " +
                                               std::to_string(e.node) + " ignored");
        continue;
      }
      push({e.time_s, 1, seq_++, static_cast<int>(i), 0});
    }
  }

  SimResult run() {
    size_t next_arrival = 0;
    double now = jobs_.empty() ? 0 : jobs_.front().trace.submit_s;
    first_s_ = now;
    last_event_s_ = now;
    while (next_arrival < jobs_.size() || !events_.empty()) {
      const double t_arr = next_arrival < jobs_.size() ? jobs_[next_arrival].trace.submit_s
                                                        : INFINITY;
      const double t_ev = events_.empty() ? INFINITY : events_.top().time_s;
      now = std::min(t_arr, t_ev);
      advance_clock(now);
      // Completions and node events at `now` first (they free GPUs), then arrivals at `now`.
      while (!events_.empty() && events_.top().time_s <= now) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == 0) complete(e, now);
        else node_event(opt_.node_events[e.index], now);
      }
      while (next_arrival < jobs_.size() && jobs_[next_arrival].trace.submit_s <= now) {
        Job& j = jobs_[next_arrival++];
        arrivals_.record(j.trace.submit_s, j.trace.gpus);
        j.status = Status::queued;
        queue_.push_back(&j);
      }
      schedule(now);
      if (opt_.check_invariants) check_allocations(now);
    }
    return finish();
  }

 private:
  // Scale tables are built once per (GPU count, type) — per GPU count for Table-2 jobs, whose
  // cost model does not depend on the type — and cached, never per event.
  const SimJobModel* model_for(int gpus, int type) {
    const auto key = std::make_pair(gpus, source_ == JobModelSource::table2 ? -1 : type);
    auto it = tables_.find(key);
    if (it != tables_.end()) return it->second.get();
    const auto built = source_ == JobModelSource::table2
                           ? table2_job_model(gpus, opt_.min_gpus, opt_.table)
                           : planner_job_model(gpus, cluster_.types()[type], bands_, opt_.table);
    std::unique_ptr<SimJobModel> m;
    if (built.model) m = std::make_unique<SimJobModel>(*built.model);
    const SimJobModel* raw = m.get();
    tables_[key] = std::move(m);
    return raw;
  }

  // Keeps the allowed types where the job's model runs, fastest first (ties: node-list order).
  void make_elastic(Job& j) {
    j.model_by_type.assign(cluster_.types().size(), nullptr);
    j.factor_by_type.assign(cluster_.types().size(), 0.0);
    std::vector<int> usable;
    double fastest_s = INFINITY;
    for (int ty : j.types) {
      const SimJobModel* m = model_for(j.trace.gpus, ty);
      if (!m) continue;
      j.model_by_type[ty] = m;
      usable.push_back(ty);
      fastest_s = std::min(fastest_s, m->initial_iteration_s);
    }
    if (usable.empty()) return;  // no type runs its model: the job stays non-elastic
    std::stable_sort(usable.begin(), usable.end(), [&](int a, int b) {
      return j.model_by_type[a]->initial_iteration_s < j.model_by_type[b]->initial_iteration_s;
    });
    for (int ty : usable) {
      const double s = j.model_by_type[ty]->initial_iteration_s;
      j.factor_by_type[ty] = s > 0 && std::isfinite(fastest_s) ? fastest_s / s : 1.0;
    }
    j.types = usable;
    j.elastic = true;
    j.out.model = j.model_by_type[usable.front()]->name;
  }

  void push(Event e) { events_.push(e); }

  void advance_clock(double now) {
    const double dt = now - last_event_s_;
    if (dt > 0) {
      busy_gpu_s_ += dt * (cluster_.capacity_total() - cluster_.free_total());
      capacity_gpu_s_ += dt * cluster_.capacity_total();
      last_event_s_ = now;
    }
  }

  // Brings a running job's progress and accounting up to `now`.
  void settle(Job& j, double now) {
    const double dt = now - j.last_s;
    if (dt <= 0) return;
    const double paused = std::clamp(j.pause_until - j.last_s, 0.0, dt);
    j.out.gpu_s += j.gpus * dt;
    j.out.overhead_gpu_s += j.gpus * paused;
    j.work += j.speed * (dt - paused);
    j.last_s = now;
  }

  double speed_of(const Job& j) const {
    return j.elastic ? j.factor_by_type[j.type] * j.mt->table.speedup_at(j.gpus) : 1.0;
  }

  void reschedule_completion(Job& j, double now) {
    ++j.version;
    const double left = std::max(0.0, j.trace.duration_s - j.work);
    const double t = std::max(now, j.pause_until) + left / j.speed;
    j.end_s = t;
    push({t, 0, seq_++, static_cast<int>(&j - jobs_.data()), j.version});
  }

  void start(Job& j, int type, const Allocation& a, double now, double delay_s) {
    cluster_.take(a);
    j.alloc = a;
    j.type = type;
    if (j.elastic) j.mt = j.model_by_type[type];
    j.out.gpu_type = cluster_.types()[type];
    j.gpus = j.trace.gpus;
    j.status = Status::running;
    running_.insert(static_cast<int>(&j - jobs_.data()));
    j.last_s = now;
    j.pause_until = now + delay_s;
    j.speed = speed_of(j);
    j.out.max_gpus = std::max(j.out.max_gpus, j.gpus);
    if (j.out.start_s < 0) j.out.start_s = now + delay_s;
    reschedule_completion(j, now);
  }

  void complete(const Event& e, double now) {
    Job& j = jobs_[e.index];
    if (j.status != Status::running || e.version != j.version) return;
    settle(j, now);
    cluster_.give(j.alloc);
    j.alloc.clear();
    j.status = Status::done;
    running_.erase(e.index);
    j.out.finish_s = now;
    j.out.work_s = j.work;
  }

  double overhead_s(const Job& j, int from, int to) const {
    return estimate_restart_overhead(j.mt->checkpoint_bytes, from, to, std::nullopt,
                                     opt_.overhead)
        .total_s();
  }

  // Moves a running elastic job to `to` GPUs (its extra GPUs already in `added`, or GPUs to
  // free already removed by the caller), charging the restart overhead.
  void resize(Job& j, int to, const Allocation& added, double now) {
    settle(j, now);
    const int from = j.gpus;
    j.alloc.insert(j.alloc.end(), added.begin(), added.end());
    j.gpus = to;
    j.speed = speed_of(j);
    j.pause_until = now + overhead_s(j, from, to);
    ++j.out.scaling_events;
    ++result_.metrics.scaling_events;
    j.out.max_gpus = std::max(j.out.max_gpus, j.gpus);
    reschedule_completion(j, now);
  }

  // Running elastic jobs, of one GPU type when type >= 0.
  std::vector<ElasticJobView> elastic_views(bool only_scaled_up, int type = -1) {
    std::vector<ElasticJobView> views;
    view_jobs_.clear();
    for (int idx : running_) {
      Job& j = jobs_[idx];
      if (!j.elastic || (type >= 0 && j.type != type)) continue;
      if (only_scaled_up && j.gpus <= j.mt->table.initial.gpus()) continue;
      views.push_back({static_cast<int>(views.size()), j.gpus, &j.mt->table, 0.0});
      view_jobs_.push_back(&j);
    }
    return views;
  }

  // §5.2 for the queue head, one allowed GPU type at a time (preferred first): victims must run
  // on that type, since only their GPUs of that type can serve the head.
  bool try_preempt(Job& head, double now) {
    bool had_victims = false;
    for (int type : head.types) {
      const auto views = elastic_views(true, type);
      if (views.empty()) continue;
      had_victims = true;
      if (try_preempt_on(head, type, views, now)) return true;
    }
    if (had_victims) ++result_.metrics.preemptions_aborted;
    return false;
  }

  bool try_preempt_on(Job& head, int type, const std::vector<ElasticJobView>& views, double now) {
    const auto plan = plan_preemption(head.trace.gpus, cluster_.free_of_type(type), views);
    if (!plan.feasible || plan.shrinks.empty()) return false;
    // Dry run on a copy: the head must actually be placeable on the GPUs the victims free.
    std::vector<int> free = cluster_.free_per_node();
    std::vector<Allocation> released(plan.shrinks.size());
    std::vector<Allocation> kept(plan.shrinks.size());
    for (size_t k = 0; k < plan.shrinks.size(); ++k) {
      Job& v = *view_jobs_[plan.shrinks[k].job_id];
      kept[k] = v.alloc;
      released[k] = take_back(kept[k], plan.shrinks[k].from_gpus - plan.shrinks[k].to_gpus);
      for (auto [node, n] : released[k]) free[node] += n;
    }
    if (!cluster_.place_on(free, head.trace.gpus, type)) return false;
    double delay_s = 0;
    for (size_t k = 0; k < plan.shrinks.size(); ++k) {
      Job& v = *view_jobs_[plan.shrinks[k].job_id];
      settle(v, now);
      cluster_.give(released[k]);
      v.alloc = kept[k];
      // The victim's GPUs are usable once it has saved its checkpoint.
      delay_s = std::max(delay_s, estimate_restart_overhead(v.mt->checkpoint_bytes, v.gpus,
                                                            plan.shrinks[k].to_gpus, std::nullopt,
                                                            opt_.overhead)
                                      .save_s);
      resize(v, plan.shrinks[k].to_gpus, {}, now);
      ++result_.metrics.preemption_shrinks;
    }
    start(head, type, *cluster_.place_job(head.trace.gpus, type), now, delay_s);
    return true;
  }

  void scale_up_pass(double now) {
    if (cluster_.free_total() <= 0) return;
    auto views = elastic_views(false);
    // Jobs mid-restart are left alone until they run again.
    std::vector<ElasticJobView> ready;
    std::vector<Job*> ready_jobs;
    for (size_t i = 0; i < views.size(); ++i) {
      if (view_jobs_[i]->pause_until > now) continue;
      views[i].job_id = static_cast<int>(ready.size());
      views[i].overhead_s = 0;
      ready.push_back(views[i]);
      ready_jobs.push_back(view_jobs_[i]);
    }
    if (ready.empty()) return;
    const auto order = scale_up_order(ready);
    if (opt_.policy == Policy::elasticflow) {
      std::vector<int> target(ready.size());
      for (size_t i = 0; i < ready.size(); ++i) target[i] = ready[i].current_gpus;
      std::vector<int> free(cluster_.types().size());
      for (size_t ty = 0; ty < free.size(); ++ty) free[ty] = cluster_.free_of_type(static_cast<int>(ty));
      for (bool grew = true; grew;) {
        grew = false;
        for (int i : order) {
          const auto& t = *ready[i].table;
          const ScaleEntry* next = nullptr;
          for (const auto& e : t.entries)
            if (e.gpus > target[i] && e.gpus <= t.cap_gpus) { next = &e; break; }
          int& type_free = free[ready_jobs[i]->type];
          if (!next || next->gpus - target[i] > type_free) continue;
          type_free -= next->gpus - target[i];
          target[i] = next->gpus;
          grew = true;
        }
      }
      for (int i : order) {
        if (target[i] == ready[i].current_gpus) continue;
        auto a = cluster_.place(target[i] - ready[i].current_gpus, true, ready_jobs[i]->type);
        if (!a) continue;
        cluster_.take(*a);
        resize(*ready_jobs[i], target[i], *a, now);
        ++result_.metrics.scale_ups;
      }
      return;
    }
    // The same per-job decision the operator makes (scaler/decide.h).
    DecideParams params;
    params.benefit = opt_.benefit;
    params.overhead = opt_.overhead;
    params.use_benefit_check = opt_.policy == Policy::flextrain;
    const double lambda = arrivals_.rate_per_s(now);
    for (int i : order) {
      if (cluster_.free_total() <= 0) break;
      Job& j = *ready_jobs[i];
      const int free = cluster_.free_of_type(j.type);  // it grows only on its own type
      if (free <= 0) continue;
      JobSnapshot snap;
      snap.current_gpus = j.gpus;
      snap.free_gpus = free;
      snap.arrival_rate_per_s = lambda;
      snap.checkpoint_bytes = j.mt->checkpoint_bytes;
      snap.remaining_s = j.end_s - now;  // it is not restarting (ready), so all of it is training
      const auto d = decide(j.mt->table, snap, params);
      if (d.benefit && params.use_benefit_check) {
        if (result_.sample_decisions.size() < 20) result_.sample_decisions.push_back(j.trace.id + " " + d.reason);
        if (d.benefit->scale_up) ++result_.metrics.benefit_checks_passed;
        else ++result_.metrics.benefit_checks_refused;
        if (d.ends_before_restart_repays) ++result_.metrics.ends_before_restart_repays;
      }
      if (d.action != ScaleAction::scale_up) continue;
      auto a = cluster_.place(d.target_gpus - j.gpus, true, j.type);
      if (!a) continue;
      cluster_.take(*a);
      resize(j, d.target_gpus, *a, now);
      ++result_.metrics.scale_ups;
    }
  }

  void schedule(double now) {
    while (!queue_.empty()) {
      Job& head = *queue_.front();
      if (place_head(head, now)) {
        queue_.pop_front();
        continue;
      }
      if (opt_.policy != Policy::static_fcfs && try_preempt(head, now)) {
        queue_.pop_front();
        continue;
      }
      break;
    }
    // FlexTrain and greedy grow jobs only when nobody waits (§5.1). ElasticFlow was designed for
    // all-elastic clusters and hands idle GPUs to elastic jobs even while a job waits.
    if (opt_.policy == Policy::elasticflow || (queue_.empty() && opt_.policy != Policy::static_fcfs))
      scale_up_pass(now);
  }

  // An elastic job: HAS over its ranked types (fastest first), the first type it fits on,
  // best-fit placed. A job without a model runs equally well on any allowed type, so it takes
  // the best placement over all of them: fewest nodes first (HAS keeps a job on one node when
  // one can hold it; without this, an 8-GPU pod spanned four 2-GPU P100 nodes while whole 8-GPU
  // nodes of another type were idle), then the first node left with the fewest free GPUs (best
  // fit), ties: node-list order of the type.
  bool place_head(Job& head, double now) {
    std::optional<Allocation> best;
    int best_type = -1, best_left = 0;
    for (int type : head.types) {
      auto a = cluster_.place_job(head.trace.gpus, type);
      if (!a) continue;
      if (head.elastic) {
        best = std::move(a);
        best_type = type;
        break;
      }
      const int left = cluster_.free_on(a->front().first) - a->front().second;
      if (!best || a->size() < best->size() || (a->size() == best->size() && left < best_left)) {
        best = std::move(a);
        best_type = type;
        best_left = left;
      }
    }
    if (!best) return false;
    start(head, best_type, *best, now, 0.0);
    return true;
  }

  void requeue(Job& j) {
    cluster_.give(j.alloc);
    j.alloc.clear();
    j.gpus = 0;
    j.type = -1;
    j.mt = nullptr;
    ++j.version;  // cancels its completion event
    j.status = Status::queued;
    running_.erase(static_cast<int>(&j - jobs_.data()));
    queue_.push_front(&j);
    ++result_.metrics.requeues;
  }

  void node_event(const NodeEvent& e, double now) {
    if (e.join) {
      cluster_.set_node_up(e.node, true);
      return;
    }
    if (!cluster_.node_up(e.node)) return;
    cluster_.set_node_up(e.node, false);
    const std::vector<int> running(running_.begin(), running_.end());
    for (int idx : running) {
      Job& j = jobs_[idx];
      int lost = 0;
      Allocation left;
      for (auto [node, n] : j.alloc) {
        if (node == e.node) lost += n;
        else left.emplace_back(node, n);
      }
      if (lost == 0) continue;
      settle(j, now);
      j.alloc = left;
      const int remaining = j.gpus - lost;
      std::optional<Decision> d;
      if (j.elastic) {
        JobSnapshot snap;
        snap.current_gpus = j.gpus;
        snap.gpus_alive = remaining;
        snap.checkpoint_bytes = j.mt->checkpoint_bytes;
        d = decide(j.mt->table, snap);
      }
      if (!d || d->action != ScaleAction::shrink) {
        j.gpus = remaining;
        requeue(j);
        continue;
      }
      cluster_.give(take_back(j.alloc, remaining - d->target_gpus));
      j.gpus = remaining;
      resize(j, d->target_gpus, {}, now);
      ++result_.metrics.node_loss_shrinks;
    }
  }

  void check_allocations(double now) {
    std::vector<int> used(cluster_.nodes().size(), 0);
    for (int idx : running_) {
      const Job& j = jobs_[idx];
      int sum = 0;
      for (auto [node, n] : j.alloc) {
        used[node] += n;
        sum += n;
        if (cluster_.node_type(node) != j.type && violations_ < 20) {
          ++violations_;
          result_.invariant_violations.push_back(
              "t=" + std::to_string(now) + " job " + j.trace.id + " runs on " +
              cluster_.types()[j.type] + " but holds GPUs of node " + std::to_string(node) +
              " (" + cluster_.nodes()[node].gpu_type + ")");
        }
      }
      if (sum != j.gpus && violations_ < 20) {
        ++violations_;
        result_.invariant_violations.push_back("t=" + std::to_string(now) + " job " + j.trace.id +
                                               " holds " + std::to_string(sum) +
                                               " GPUs but runs on " + std::to_string(j.gpus));
      }
    }
    for (size_t n = 0; n < used.size(); ++n) {
      const int cap = cluster_.node_up(n) ? cluster_.nodes()[n].gpus : 0;
      if ((used[n] > cap || used[n] + cluster_.free_on(n) != cap) && violations_ < 20) {
        ++violations_;
        result_.invariant_violations.push_back(
            "t=" + std::to_string(now) + " node " + std::to_string(n) + ": " +
            std::to_string(used[n]) + " GPUs allocated + " + std::to_string(cluster_.free_on(n)) +
            " free != capacity " + std::to_string(cap) + " (a GPU allocated twice or lost)");
      }
    }
  }

  SimResult finish() {
    auto& m = result_.metrics;
    std::vector<double> jct, queue;
    double last_finish = first_s_, job_gpu_s = 0, overhead_gpu_s = 0;
    for (auto& j : jobs_) {
      ++m.jobs;
      if (j.status != Status::done) {
        ++m.unfinished_jobs;
        if (opt_.check_invariants && violations_ < 20) {
          ++violations_;
          result_.invariant_violations.push_back("job " + j.trace.id + " never finished");
        }
      } else {
        last_finish = std::max(last_finish, j.out.finish_s);
        if (opt_.check_invariants && std::fabs(j.out.work_s - j.trace.duration_s) >
                                         1e-6 * std::max(1.0, j.trace.duration_s)) {
          if (violations_ < 20) {
            ++violations_;
            result_.invariant_violations.push_back(
                "job " + j.trace.id + " did " + std::to_string(j.out.work_s) +
                " s of work, trace says " + std::to_string(j.trace.duration_s));
          }
        }
        if (j.elastic) {
          ++m.elastic_jobs;
          jct.push_back(j.out.finish_s - j.out.submit_s);
        } else {
          queue.push_back(j.out.start_s - j.out.submit_s);
        }
      }
      job_gpu_s += j.out.gpu_s;
      overhead_gpu_s += j.out.overhead_gpu_s;
      result_.jobs.push_back(j.out);
    }
    if (opt_.check_invariants &&
        std::fabs(job_gpu_s - busy_gpu_s_) > 1e-6 * std::max(1.0, busy_gpu_s_) && violations_ < 20) {
      ++violations_;
      result_.invariant_violations.push_back(
          "GPU-seconds held by jobs (" + std::to_string(job_gpu_s) +
          ") differ from GPU-seconds busy in the cluster (" + std::to_string(busy_gpu_s_) + ")");
    }
    m.elastic_jct_mean_s = mean(jct);
    m.elastic_jct_p50_s = percentile(jct, 0.50);
    m.elastic_jct_p99_s = percentile(jct, 0.99);
    m.nonelastic_queue_mean_s = mean(queue);
    m.nonelastic_queue_p50_s = percentile(queue, 0.50);
    m.nonelastic_queue_p99_s = percentile(queue, 0.99);
    m.gpu_utilization = capacity_gpu_s_ > 0 ? busy_gpu_s_ / capacity_gpu_s_ : 0;
    m.overhead_gpu_hours = overhead_gpu_s / 3600.0;
    m.makespan_s = last_finish - first_s_;
    return std::move(result_);
  }

  SimOptions opt_;
  ClusterState cluster_;
  ArrivalRateEstimator arrivals_;
  std::vector<Job> jobs_;
  std::deque<Job*> queue_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::map<std::pair<int, int>, std::unique_ptr<SimJobModel>> tables_;
  JobModelSource source_ = JobModelSource::table2;
  std::vector<PlannerBand> bands_;
  std::vector<Job*> view_jobs_;
  std::set<int> running_;  // indices into jobs_, ordered so iteration is deterministic
  SimResult result_;
  long seq_ = 0;
  int violations_ = 0;
  double first_s_ = 0, last_event_s_ = 0, busy_gpu_s_ = 0, capacity_gpu_s_ = 0;
};

}  // namespace

SimResult simulate(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes,
                   const SimOptions& options) {
  return Simulation(trace, nodes, options).run();
}

}  // namespace flotilla::simulator
