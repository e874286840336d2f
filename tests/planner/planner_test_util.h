// Test helpers: a toy GPU whose rates make step costs easy to compute by
// hand, a toy model, and paths into the source tree.
#ifndef BEACON_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
#define BEACON_TESTS_PLANNER_PLANNER_TEST_UTIL_H_

#include <string>

#include "gtest/gtest.h"
#include "model/hf_config.h"
#include "planner/cost_model.h"
#include "planner/gpu_profile.h"

namespace beacon::planner::test {

inline std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

// 1 TB/s, 1 PFLOP/s, both fully reached; no overheads unless set.
inline GpuProfile ToyGpu() {
  GpuProfile g;
  g.name = "toy";
  g.memory_bytes = 100e9;
  g.hbm_bandwidth = 1e12;
  g.bf16_flops = 1e15;
  g.bandwidth_efficiency = 1;
  g.compute_efficiency = 1;
  return g;
}

// 2 layers, 4 query heads, 2 KV heads, head_dim 8: 128 KV bytes per token
// (bf16); 1,000 layer matrix parameters, a 100-parameter LM head, tied.
inline ModelCost ToyModel() {
  ModelCost m;
  m.name = "toy";
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 8;
  m.hidden = 10;
  m.vocab = 10;
  m.context_length = 100000;
  m.params_layers = 1000;
  m.params_lm_head = 100;
  m.params_total = 1200;  // + 100 of norms
  return m;
}

inline ModelCost ShippedModel(const std::string& file) {
  HfConfigOptions o;
  o.ignore_unsupported_features = true;
  absl::StatusOr<ModelConfig> c = ParseHfConfigFile(Src("configs/" + file), o);
  EXPECT_TRUE(c.ok()) << c.status();
  return ModelCostFromConfig(*c);
}

}  // namespace beacon::planner::test

#endif  // BEACON_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
