// The sampling defaults a request gets for the fields it leaves out
// (temperature, top_p, top_k, min_p, repetition_penalty), as vLLM chooses
// them (`--generation-config`):
//  - "auto" (the default): the model's own generation config when it ships
//    one: generation_config.json beside an HF model's config.json, or a
//    GGUF's general.sampling.* keys (llama.cpp's convert writes them from
//    that same file); else OpenAI's documented defaults (temperature 1,
//    top_p 1, the rest off).
//  - "none": OpenAI's defaults whatever the model ships (vLLM's "vllm").
//  - a path: that generation_config.json, or the one in that directory.
// Then `--override-generation-config '{"temperature": 0}'` (vLLM's flag)
// replaces single values. Only the five sampling keys are read;
// generation_config.json's other keys (do_sample, max_new_tokens, eos ids)
// are not used, and a value out of range is a start-up error naming it.
#ifndef BEACON_ENGINE_SERVING_GENERATION_CONFIG_H_
#define BEACON_ENGINE_SERVING_GENERATION_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/serving/serve_request.h"

namespace beacon {

// `model` is --model (a .gguf file or an HF model directory); `override_json`
// is --override-generation-config ("" for none). INVALID_ARGUMENT naming the
// flag, file and key for what cannot be read or is out of range.
absl::StatusOr<DefaultSampling> ResolveGenerationConfig(const std::string& mode, const std::string& model,
                                                        const std::string& override_json);

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_GENERATION_CONFIG_H_
