#include "simulator/sailor_job_loader.h"

#include <memory>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"

namespace flotilla::simulator {

SailorJobLoad load_sailor_planner_job(const std::string& model, const std::string& gpu,
                                      int global_batch, const std::string& profiles_dir,
                                      const std::string& network_dir) {
  SailorJobLoad out;
  const auto spec = planner::find_preset(model);
  if (!spec) {
    out.error = "unknown model '" + model + "': use a planner preset (e.g. OPT-350, GPT-Neo-2.7)";
    return out;
  }
  auto profiles = planner::load_profile_dir(profiles_dir);
  if (!profiles.ok()) {
    out.error = "profiles: " + profiles.error();
    return out;
  }
  auto network = planner::load_network_dir(network_dir);
  if (!network.ok()) {
    out.error = "network: " + network.error();
    return out;
  }
  out.job.model = *spec;
  out.job.gpu_type = gpu;
  out.job.global_batch = global_batch;
  out.job.profiles = std::make_shared<const planner::ProfileSet>(std::move(profiles.value()));
  out.job.network = std::make_shared<const planner::NetworkModel>(std::move(network.value()));
  // As the planner resolves it: the catalog type's name or any alias ("GH200-96" finds GH-96).
  const auto catalog = planner::builtin_gpu_catalog();
  const planner::GpuType* type = catalog.find(gpu);
  out.profiled = (type ? out.job.profiles->find(out.job.model, *type)
                       : out.job.profiles->find(out.job.model, gpu)) != nullptr;
  return out;
}

}  // namespace flotilla::simulator
