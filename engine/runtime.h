// Everything a process needs to run a model: the loaded weights,
// the tokenizer, a thread pool and the backend, built in the right order from
// one model spec. Shared by beacon-run, beacon-bench and beacon-logits (and
// the server, which adds the scheduler on top).
#ifndef BEACON_ENGINE_RUNTIME_H_
#define BEACON_ENGINE_RUNTIME_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu_backend.h"
#include "engine/cuda_options.h"
#include "kernels/cpu/thread_pool.h"
#include "kv/store/kv_cache.h"
#include "model/model_loader.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

struct RuntimeOptions {
  std::string model = "models/default.gguf";  // see LoadModel for the forms
  // The tokenizer and chat template from another file than the weights (a
  // GGUF, vocab-only or not, or an HF directory: LoadTokenizerData); "" uses
  // the model's. Its vocabulary must fit the model's vocab_size.
  std::string tokenizer;
  // A Jinja file replacing the tokenizer's chat template ("" keeps it).
  std::string chat_template;
  int threads = 0;  // 0: every hardware thread
  // "cpu", "cuda" (GPU cuda.device, 0 unless set) or "cuda:N" (GPU N):
  // weights in bf16 on the device, engine/cuda/. A CUDA device is
  // FAILED_PRECONDITION in a build without CUDA or with no GPU.
  std::string device = "cpu";
  CudaBackendOptions cuda;  // read only when the device is CUDA
  // Element type of the KV cache: kBF16 (the default: half the bytes of f32,
  // as llama.cpp's f16 cache), kQ8_0 (CPU only, head_dim % 32 == 0: 34 bytes
  // per 32 elements, as llama.cpp's --cache-type-k q8_0; for long contexts,
  // whose decode steps stream the cache from DRAM) or kF32 (CPU only: the
  // reference tests' exact arithmetic). A CUDA device keeps KV in bf16 and
  // refuses the others (INVALID_ARGUMENT) rather than ignore them.
  DType kv_cache_dtype = DType::kBF16;
};

// "auto" and "bf16" -> kBF16, "f32" -> kF32, "q8_0" -> kQ8_0 (the
// --kv-cache-dtype forms);
// INVALID_ARGUMENT naming the value and the forms otherwise.
absl::StatusOr<DType> ParseKvCacheDType(std::string_view name);
// The --kv-cache-dtype spelling of a KV type: "f32", "bf16", "q8_0".
std::string_view KvCacheDTypeName(DType t);

// "cpu" -> false; "cuda" -> true, `ordinal` untouched; "cuda:N" -> true,
// *ordinal = N. INVALID_ARGUMENT naming the spec and the forms otherwise.
absl::StatusOr<bool> ParseDeviceSpec(std::string_view spec, int* ordinal);

class Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const RuntimeOptions& options);

  const ModelConfig& config() const { return model_->weights.config; }
  const ModelWeights& weights() const { return model_->weights; }
  // Null for dummy models, which have no vocabulary.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  Backend* backend() { return backend_.get(); }
  ThreadPool* pool() { return pool_.get(); }
  // The host KV cache's element type (RuntimeOptions::kv_cache_dtype).
  DType kv_cache_dtype() const { return kv_dtype_; }

  // A KV cache able to hold `n_tokens` slots in blocks of `block_size`, its
  // data where the backend reads it (host, RuntimeOptions::kv_cache_dtype;
  // or device bf16).
  // RESOURCE_EXHAUSTED (Backend::MakeKvCache) when the device cannot hold it.
  absl::StatusOr<std::unique_ptr<KvCache>> MakeKvCache(int64_t n_tokens, int block_size = 16) const;
  // Backend::SizeKvPool for this model's cache in blocks of `block_size`:
  // the slots a pool may take so that the device's memory in use stays
  // within `fraction` of its total. UNIMPLEMENTED on the CPU.
  absl::StatusOr<Backend::DevicePool> SizeKvPool(double fraction, int64_t step_tokens, int64_t max_sequences,
                                                 int block_size = 16) const;

  // Prompt text to ids: plain text, or as a single user turn of the model's
  // chat template (with an optional system message).
  absl::StatusOr<std::vector<int32_t>> EncodePrompt(const std::string& text, bool chat,
                                                    const std::string& system) const;

 private:
  // The model's tokenizer, or options.tokenizer's, with options.chat_template.
  absl::Status CreateTokenizer(const RuntimeOptions& options);
  // The cache shape of this model and KV dtype.
  KvCacheShape KvShape(int block_size) const;

  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;
  DType kv_dtype_ = DType::kBF16;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_RUNTIME_H_
