// A GPU as the capacity planner's cost model sees it: capacity, peak rates,
// the fraction of them real kernels reach, and fixed overheads. Every
// constant lives in one JSON profile file (configs/gpus/*.json) with its
// source and whether it is a datasheet figure, a modelled assumption or a
// measurement (tools/gpu-check.sh output, once the GPU backend has one).
//
// File format: an object with "name", optional "description", and
// "constants": {KEY: {"value": number, "unit": text, "kind": "datasheet" |
// "modelled" | "measured", "source": text}} for every KEY below. Unknown
// keys are errors (a typo must not silently fall back to a default).
#ifndef BEACON_PLANNER_GPU_PROFILE_H_
#define BEACON_PLANNER_GPU_PROFILE_H_

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon::planner {

// Where a constant comes from.
struct ConstantSource {
  std::string kind;  // datasheet, modelled or measured
  std::string unit;
  std::string source;  // citation or reasoning, free text
};

struct GpuProfile {
  std::string name;
  std::string file;  // where it was loaded from

  double memory_bytes = 0;             // HBM capacity
  double hbm_bandwidth = 0;            // bytes/s, peak
  double bf16_flops = 0;               // FLOP/s, dense bf16 tensor-core peak
  double bandwidth_efficiency = 0;     // (0, 1]: share of peak bandwidth streaming kernels reach
  double compute_efficiency = 0;       // (0, 1]: share of peak FLOP/s the matrix kernels reach
  double launch_overhead_s = 0;        // per kernel launch
  double kernels_per_layer = 0;        // launches per layer in one forward step
  double step_host_overhead_s = 0;     // per step: scheduling, sampling, host/device sync
  double evict_kernels_per_layer = 0;  // launches per layer for one step's evictions (batched)
  double runtime_reserve_bytes = 0;    // memory kept from the KV pool: context, workspace, activations

  std::map<std::string, ConstantSource> sources;  // by constant key

  // Bytes/s and FLOP/s the cost model uses (peak x efficiency).
  double effective_bandwidth() const { return hbm_bandwidth * bandwidth_efficiency; }
  double effective_flops() const { return bf16_flops * compute_efficiency; }
  // Keys whose kind is "measured" (empty: everything is datasheet or modelled).
  std::vector<std::string> MeasuredKeys() const;
};

// The constant keys, in file order.
const std::vector<std::string>& GpuProfileKeys();

// INVALID_ARGUMENT naming `source` and the key for a missing, unknown,
// mistyped or out-of-range constant.
absl::StatusOr<GpuProfile> ParseGpuProfile(const nlohmann::json& j, const std::string& source);

// Where shipped files are looked for: directories tried in order. The
// library reads no environment and assumes no working directory: the program
// says where (beacon-plan: --gpu-profile-dir, then ./, then the source tree
// it was built from, ShippedRoots).
struct ShippedRoots {
  std::vector<std::string> gpu_profile_dirs;  // each holding <name>.json
  std::vector<std::string> file_roots;        // each holding configs/..., docs/...
};
// The default: ./configs/gpus and ./, then the same under the source tree
// the planner was built from (BEACON_PLAN_SOURCE_DIR); `profile_dir`, when
// not empty, is tried first for profiles.
ShippedRoots DefaultShippedRoots(const std::string& profile_dir);

// `name_or_path`: a profile file, or the name of a shipped profile
// (<name>.json: "h100-sxm", "h200") looked up in roots.gpu_profile_dirs.
// NOT_FOUND lists the places tried and the shipped names.
absl::StatusOr<GpuProfile> LoadGpuProfile(const std::string& name_or_path, const ShippedRoots& roots);

// A file shipped in the source tree (e.g. "configs/qwen3-4b.json"): its path
// under the first of roots.file_roots that holds it; empty when none does.
std::string FindShippedFile(const std::string& relative, const ShippedRoots& roots);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_GPU_PROFILE_H_
