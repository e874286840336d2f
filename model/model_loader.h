// Loads a model from any supported source:
//   path/to/model.gguf          GGUF (llama, qwen2, qwen3 architectures)
//   path/to/hf_dir/             HF safetensors + config.json (+ tokenizer.json)
//   dummy:path/to/config.json   seeded random weights at the config's shape
//                               (optionally dummy:path/to/config.json@SEED)
// Every failure is a Status naming what is wrong (file, tensor, field).
#ifndef BEACON_MODEL_MODEL_LOADER_H_
#define BEACON_MODEL_MODEL_LOADER_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer_data.h"
#include "model/weights.h"

namespace beacon {

struct LoadedModel {
  ModelWeights weights;
  std::optional<TokenizerData> tokenizer;  // absent for dummy models without one
  std::string source;                      // the spec it was loaded from
};

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(std::string_view spec);

// The per-format entry points LoadModel dispatches to.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModel(const std::string& path);
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadHfModel(const std::string& dir);
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadDummyModel(const std::string& config_json_path, uint64_t seed);

}  // namespace beacon

#endif  // BEACON_MODEL_MODEL_LOADER_H_
