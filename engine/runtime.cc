#include "engine/runtime.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer_loader.h"
#ifdef BEACON_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace beacon {

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeOptions& options) {
  auto rt = std::unique_ptr<Runtime>(new Runtime());
  if (!IsKvDType(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache dtype ", std::string(DTypeName(options.kv_cache_dtype)),
                                                   " is not one of: f32, bf16, q8_0"));
  }
  rt->kv_dtype_ = options.kv_cache_dtype;
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(options.model);
  if (!model.ok()) return model.status();
  rt->model_ = std::move(*model);
  if (options.kv_cache_dtype == DType::kQ8_0 && rt->config().head_dim % kQuantBlock != 0) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache dtype q8_0 needs a head dim that is a multiple of 32; ",
                                                   options.model, " has ", rt->config().head_dim));
  }
  if (absl::Status s = rt->CreateTokenizer(options); !s.ok()) return s;
  rt->pool_ = std::make_unique<ThreadPool>(options.threads);
  CudaBackendOptions cuda = options.cuda;
  absl::StatusOr<bool> on_cuda = ParseDeviceSpec(options.device, &cuda.device);
  if (!on_cuda.ok()) return on_cuda.status();
  if (!*on_cuda) {
    rt->backend_ = std::make_unique<CpuBackend>(&rt->model_->weights, rt->pool_.get());
    return rt;
  }
  if (options.kv_cache_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache dtype ", std::string(DTypeName(options.kv_cache_dtype)),
                                                   " on device \"", options.device,
                                                   "\": the CUDA engine keeps KV in bf16 only"));
  }
#ifdef BEACON_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<Backend>> b = CreateCudaBackend(&rt->model_->weights, cuda);
  if (!b.ok()) return b.status();
  rt->backend_ = std::move(*b);
  return rt;
#else
  return absl::FailedPreconditionError(
      absl::StrCat("device \"", options.device, "\": this build has no CUDA (configure with nvcc on the PATH)"));
#endif
}

absl::Status Runtime::CreateTokenizer(const RuntimeOptions& options) {
  std::optional<TokenizerData>& data = model_->tokenizer;
  std::string source = options.model;
  if (!options.tokenizer.empty()) {
    absl::StatusOr<TokenizerData> tok = LoadTokenizerData(options.tokenizer);
    if (!tok.ok()) return tok.status();
    // Ids the tokenizer can produce must index the model's embeddings; a
    // model with more rows than tokens (padding) is fine: TokenBytes of an
    // id past the vocabulary is "".
    const int64_t vocab = config().vocab_size;
    if (static_cast<int64_t>(tok->tokens.size()) > vocab) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer ", options.tokenizer, " has ", tok->tokens.size(),
                                                     " tokens but the model ", options.model, " has vocab_size ", vocab,
                                                     ": they do not belong together"));
    }
    data = *std::move(tok);
    source = options.tokenizer;
  }
  if (!options.chat_template.empty()) {
    if (!data.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template ", options.chat_template, ": the model ",
                                                     options.model, " has no tokenizer (give --tokenizer too)"));
    }
    absl::StatusOr<std::string> t = ReadChatTemplateFile(options.chat_template);
    if (!t.ok()) return t.status();
    data->chat_template = *std::move(t);
    source = options.chat_template;
  }
  if (!data.has_value()) return absl::OkStatus();  // dummy weights: ids in, ids out
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(*data);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), absl::StrCat("tokenizer of ", source, ": ", tok.status().message()));
  }
  tokenizer_ = std::move(*tok);
  return absl::OkStatus();
}

absl::StatusOr<bool> ParseDeviceSpec(std::string_view spec, int* ordinal) {
  if (spec == "cpu") return false;
  if (spec == "cuda") return true;
  int n = 0;
  if (spec.substr(0, 5) == "cuda:" && absl::SimpleAtoi(absl::string_view(spec.data() + 5, spec.size() - 5), &n) &&
      n >= 0) {
    *ordinal = n;
    return true;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device \"", std::string(spec), "\" is not one of: cpu, cuda, cuda:N (N a GPU ordinal)"));
}

absl::StatusOr<DType> ParseKvCacheDType(std::string_view name) {
  if (name == "auto" || name == "bf16") return DType::kBF16;
  if (name == "f32") return DType::kF32;
  if (name == "q8_0") return DType::kQ8_0;
  return absl::InvalidArgumentError(
      absl::StrCat("KV cache dtype \"", std::string(name), "\" is not one of: auto, bf16, f32, q8_0"));
}

std::string_view KvCacheDTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kQ8_0: return "q8_0";
    default: return "bf16";
  }
}

KvCacheShape Runtime::KvShape(int block_size) const {
  KvCacheShape shape;
  shape.dtype = kv_dtype_;
  shape.n_layers = config().n_layers;
  shape.n_kv_heads = config().n_kv_heads;
  shape.head_dim = config().head_dim;
  shape.block_size = block_size;
  return shape;
}

absl::StatusOr<std::unique_ptr<KvCache>> Runtime::MakeKvCache(int64_t n_tokens, int block_size) const {
  const int32_t blocks = static_cast<int32_t>((n_tokens + block_size - 1) / block_size);
  return backend_->MakeKvCache(KvShape(block_size), blocks);
}

absl::StatusOr<Backend::DevicePool> Runtime::SizeKvPool(double fraction, int64_t step_tokens, int64_t max_sequences,
                                                        int block_size) const {
  return backend_->SizeKvPool(KvShape(block_size), fraction, step_tokens, max_sequences);
}

absl::StatusOr<std::vector<int32_t>> Runtime::EncodePrompt(const std::string& text, bool chat,
                                                           const std::string& system) const {
  if (tokenizer_ == nullptr) {
    return absl::FailedPreconditionError("this model has no tokenizer (dummy weights): pass token ids");
  }
  if (!chat) return tokenizer_->Encode(text, /*parse_special=*/false, /*add_bos=*/true);
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", text});
  absl::StatusOr<std::string> rendered = tokenizer_->ApplyChatTemplate(messages, true);
  if (!rendered.ok()) return rendered.status();
  // The template's own markers (<|im_start|> ...) are special tokens.
  return tokenizer_->Encode(*rendered, /*parse_special=*/true, /*add_bos=*/true);
}

}  // namespace beacon
