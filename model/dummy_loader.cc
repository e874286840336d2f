// LoadDummyModel: seeded pseudo-random weights at the shape of an HF
// config.json, for benchmarks at real model sizes without the real weights.
//
// Determinism contract: element i of the tensor with HF name N is a pure
// function of (seed, N, i): value = scale * U(splitmix64-mix(key + i * phi))
// with key = mix(seed ^ fnv1a(N)). Output is therefore identical across runs,
// machines and thread counts, and a tensor does not change when others are
// added. Generation runs in parallel over rows for large tensors.
//
// Scales keep activations in a sane range through a forward pass: a matrix
// with `cols` inputs is uniform with variance 1/cols (so W x keeps unit
// variance for unit-variance x); norm weights are 1; biases uniform in
// [-0.02, 0.02]. Matrices are stored as the chosen dtype, vectors as F32.
//
// Matrix dtype: the config key "beacon_dummy_dtype", else BF16 (what
// production checkpoints ship); a library reads no environment (issue 47),
// so a program that wants another writes it into its config. Values: f32, f16, bf16, q8_0, q4_0, q4_1,
// q5_0, q5_1, q2_k..q6_k (quantised with QuantizeRow; every matrix's cols
// must then be a multiple of the type's block: 32, or 256 for the K-quants).
// Dummy models have no tokenizer.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"
#include "model/aligned_buffer.h"
#include "model/hf_config.h"
#include "model/model_loader.h"
#include "util/status_macros.h"

namespace beacon {
namespace {

inline uint64_t Mix64(uint64_t z) {  // the splitmix64 output function
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in [-1, 1) from the top 24 bits (exactly representable in float).
inline float UnitUniform(uint64_t key, uint64_t i) {
  const uint64_t h = Mix64(key + i * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(static_cast<int64_t>(h >> 40) - (1 << 23)) * (1.0f / (1 << 23));
}

absl::StatusOr<DType> ParseDummyDType(absl::string_view name, absl::string_view where) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "f32") return DType::kF32;
  if (n == "f16") return DType::kF16;
  if (n == "bf16") return DType::kBF16;
  if (n == "q8_0") return DType::kQ8_0;
  if (n == "q4_0") return DType::kQ4_0;
  if (n == "q4_1") return DType::kQ4_1;
  // The 5-bit types and the K-quants (QuantizeGroupRow's min/max scheme): a
  // K-quant dummy at a real shape measures the kernels a Q4_K_M file runs.
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    if (n == absl::AsciiStrToLower(std::string(DTypeName(t)))) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": unknown dummy weight dtype '", name,
                   "' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k)"));
}

absl::StatusOr<DType> ChooseDType(const nlohmann::json& config, const std::string& path) {
  const auto it = config.find("beacon_dummy_dtype");
  if (it == config.end() || it->is_null()) return DType::kBF16;
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field 'beacon_dummy_dtype' must be a string"));
  }
  return ParseDummyDType(it->get<std::string>(), absl::StrCat(path, ": field 'beacon_dummy_dtype'"));
}

// Runs fn(begin, end) over [0, rows) on enough threads that each gets at
// least ~1M elements; inline for small tensors.
void ParallelRows(int64_t rows, int64_t cols, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t hw = AvailableCpus();
  const int64_t threads = std::min({hw, rows, rows * cols / (int64_t{1} << 20) + 1});
  if (threads <= 1) {
    fn(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (rows + threads - 1) / threads;
  for (int64_t b = 0; b < rows; b += chunk) pool.emplace_back(fn, b, std::min(rows, b + chunk));
  for (auto& t : pool) t.join();
}

class DummyBuilder {
 public:
  DummyBuilder(uint64_t seed, DType dtype, ModelWeights* w) : seed_(seed), dtype_(dtype), w_(w) {}

  // [rows, cols] of dtype_, uniform with variance 1/cols.
  absl::StatusOr<Tensor> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    if (cols % DTypeBlockElems(dtype_) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("dummy tensor ", name, ": ", cols,
                                                     " columns are not a multiple of ", DTypeBlockElems(dtype_), " as ",
                                                     std::string(DTypeName(dtype_)), " needs"));
    }
    const float scale = std::sqrt(3.0f / static_cast<float>(cols));
    Tensor t{dtype_, rows, cols, nullptr};
    auto buf = AllocateAligned(t.bytes());
    if (buf == nullptr) return OutOfMemory(name, t.bytes());
    const uint64_t key = Key(name);
    const DType dtype = dtype_;
    uint8_t* base = buf.get();
    ParallelRows(rows, cols, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(cols);
      for (int64_t r = r0; r < r1; ++r) {
        const uint64_t first = static_cast<uint64_t>(r) * cols;
        for (int64_t c = 0; c < cols; ++c) row[c] = scale * UnitUniform(key, first + c);
        QuantizeRow(dtype, row.data(), base + t.row_bytes() * r, cols);
      }
    });
    t.data = base;
    w_->keep_alive.push_back(std::move(buf));
    return t;
  }

  // [n] F32: all `fill` when scale is 0, else uniform in [-scale, scale).
  absl::StatusOr<Tensor> Vector(const std::string& name, int64_t n, float fill, float scale) {
    auto buf = AllocateAligned(n * sizeof(float));
    if (buf == nullptr) return OutOfMemory(name, n * sizeof(float));
    float* v = reinterpret_cast<float*>(buf.get());
    const uint64_t key = Key(name);
    for (int64_t i = 0; i < n; ++i) v[i] = scale == 0.0f ? fill : scale * UnitUniform(key, i);
    w_->keep_alive.push_back(std::move(buf));
    return Tensor{DType::kF32, 1, n, v};
  }

 private:
  uint64_t Key(const std::string& name) const { return Mix64(seed_ ^ Fnv1a(name)); }
  static absl::Status OutOfMemory(const std::string& name, size_t bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes for dummy tensor ", name));
  }

  uint64_t seed_;
  DType dtype_;
  ModelWeights* w_;
};

constexpr float kBiasScale = 0.02f;

// Tensors are named as in an HF checkpoint, so a tensor's values depend on
// its role and layer only.
absl::Status BuildLayer(const ModelConfig& c, int l, DummyBuilder& b, LayerWeights* L) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_hidden;
  BEACON_ASSIGN_OR_RETURN(L->attn_norm, b.Vector(p + "input_layernorm.weight", h, 1.0f, 0.0f));
  BEACON_ASSIGN_OR_RETURN(L->wq, b.Matrix(p + "self_attn.q_proj.weight", q, h));
  BEACON_ASSIGN_OR_RETURN(L->wk, b.Matrix(p + "self_attn.k_proj.weight", kv, h));
  BEACON_ASSIGN_OR_RETURN(L->wv, b.Matrix(p + "self_attn.v_proj.weight", kv, h));
  BEACON_ASSIGN_OR_RETURN(L->wo, b.Matrix(p + "self_attn.o_proj.weight", h, q));
  if (c.qkv_bias) {
    BEACON_ASSIGN_OR_RETURN(L->bq, b.Vector(p + "self_attn.q_proj.bias", q, 0.0f, kBiasScale));
    BEACON_ASSIGN_OR_RETURN(L->bk, b.Vector(p + "self_attn.k_proj.bias", kv, 0.0f, kBiasScale));
    BEACON_ASSIGN_OR_RETURN(L->bv, b.Vector(p + "self_attn.v_proj.bias", kv, 0.0f, kBiasScale));
  }
  if (c.qk_norm) {
    BEACON_ASSIGN_OR_RETURN(L->q_norm, b.Vector(p + "self_attn.q_norm.weight", c.head_dim, 1.0f, 0.0f));
    BEACON_ASSIGN_OR_RETURN(L->k_norm, b.Vector(p + "self_attn.k_norm.weight", c.head_dim, 1.0f, 0.0f));
  }
  BEACON_ASSIGN_OR_RETURN(L->ffn_norm, b.Vector(p + "post_attention_layernorm.weight", h, 1.0f, 0.0f));
  BEACON_ASSIGN_OR_RETURN(L->w_gate, b.Matrix(p + "mlp.gate_proj.weight", f, h));
  BEACON_ASSIGN_OR_RETURN(L->w_up, b.Matrix(p + "mlp.up_proj.weight", f, h));
  BEACON_ASSIGN_OR_RETURN(L->w_down, b.Matrix(p + "mlp.down_proj.weight", h, f));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadDummyModel(const std::string& config_json_path, uint64_t seed) {
  auto json = ReadJsonFile(config_json_path);
  if (!json.ok()) return json.status();
  // Random weights make rope scaling, sliding windows etc. irrelevant: only
  // the shapes (and so the cost) matter.
  auto config = ParseHfConfigFile(config_json_path, {.ignore_unsupported_features = true});
  if (!config.ok()) return config.status();
  auto dtype = ChooseDType(*json, config_json_path);
  if (!dtype.ok()) return dtype.status();

  auto model = std::make_unique<LoadedModel>();
  model->source = absl::StrCat("dummy:", config_json_path, "@", seed);
  ModelWeights& w = model->weights;
  w.config = *config;
  const ModelConfig& c = w.config;
  DummyBuilder b(seed, *dtype, &w);
  BEACON_ASSIGN_OR_RETURN(w.tok_embd, b.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden));
  BEACON_ASSIGN_OR_RETURN(w.output_norm, b.Vector("model.norm.weight", c.hidden, 1.0f, 0.0f));
  if (c.tie_embeddings) {
    w.output = w.tok_embd;
  } else {
    BEACON_ASSIGN_OR_RETURN(w.output, b.Matrix("lm_head.weight", c.vocab_size, c.hidden));
  }
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    if (absl::Status s = BuildLayer(c, l, b, &w.layers[l]); !s.ok()) return s;
  }
  return model;
}

}  // namespace beacon
