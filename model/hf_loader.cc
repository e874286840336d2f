// LoadHfModel: an HF checkpoint directory (config.json + safetensors, and
// tokenizer.json when present) -> LoadedModel.
//
// Layout contract (see weights.h): an HF Linear weight is [out, in] row-major,
// which is exactly our Tensor with rows = out, cols = in, so matrices are used
// in place from the mapping (F32/F16/BF16, no transpose). HF stores Q and K
// unpermuted for rotate-half RoPE, hence rope_style kHalf and no permutation.
// Vectors (norms, biases) are converted to F32 into buffers owned through
// keep_alive, as weights.h requires.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/aligned_buffer.h"
#include "model/hf_config.h"
#include "model/hf_tokenizer_json.h"
#include "model/model_loader.h"
#include "model/safetensors.h"
#include "model/tokenizer_loader.h"
#include "util/status_macros.h"

namespace beacon {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ShapeString(int64_t rows, int64_t cols) {
  return rows < 0 ? absl::StrCat("[", cols, "]") : absl::StrCat("[", rows, ", ", cols, "]");
}

absl::Status OutOfMemory(const std::string& name, size_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes for tensor ", name));
}

// Turns checkpoint tensors into Tensor views, checking names and shapes.
class TensorReader {
 public:
  TensorReader(const SafetensorsCheckpoint& ckpt, ModelWeights* w) : ckpt_(ckpt), w_(w) {}

  // A 2-D [rows, cols] matrix, zero-copy unless the mapping leaves it
  // misaligned for its element type (then copied once, aligned).
  absl::StatusOr<Tensor> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    auto t = Checked(name, rows, cols);
    if (!t.ok()) return t.status();
    const SafetensorsTensor& st = **t;
    Tensor out{*st.dtype, rows, cols, st.data};
    const size_t elem = DTypeBlockBytes(*st.dtype);
    if (reinterpret_cast<uintptr_t>(st.data) % elem != 0) {
      std::shared_ptr<uint8_t> copy = AllocateAligned(st.nbytes);
      if (copy == nullptr) return OutOfMemory(name, st.nbytes);
      std::memcpy(copy.get(), st.data, st.nbytes);
      out.data = copy.get();
      w_->keep_alive.push_back(std::move(copy));
    }
    return out;
  }

  // A 1-D [n] vector, converted to an owned F32 buffer.
  absl::StatusOr<Tensor> Vector(const std::string& name, int64_t n) {
    auto t = Checked(name, -1, n);
    if (!t.ok()) return t.status();
    std::shared_ptr<uint8_t> buf = AllocateAligned(n * sizeof(float));
    if (buf == nullptr) return OutOfMemory(name, n * sizeof(float));
    float* dst = reinterpret_cast<float*>(buf.get());
    // DequantizeRow reads the source with plain loads; copy first so a
    // misaligned mapping is never read as float/uint16.
    std::vector<uint8_t> aligned((*t)->data, (*t)->data + (*t)->nbytes);
    DequantizeRow(*(*t)->dtype, aligned.data(), dst, n);
    Tensor out{DType::kF32, 1, n, dst};
    w_->keep_alive.push_back(std::move(buf));
    return out;
  }

 private:
  // rows < 0 asks for a 1-D tensor of `cols` elements.
  absl::StatusOr<const SafetensorsTensor*> Checked(const std::string& name, int64_t rows, int64_t cols) {
    auto t = ckpt_.Get(name);
    if (!t.ok()) return t.status();
    const auto& shape = (*t)->shape;
    const bool ok = rows < 0 ? (shape.size() == 1 && shape[0] == cols)
                             : (shape.size() == 2 && shape[0] == rows && shape[1] == cols);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has shape ", (*t)->ShapeString(), ", expected ",
                                                     ShapeString(rows, cols), " (in ", ckpt_.FileOf(name), ")"));
    }
    return *t;
  }

  const SafetensorsCheckpoint& ckpt_;
  ModelWeights* w_;
};

// LayerWeights has no output-projection bias; a checkpoint with a non-zero
// one (llama/qwen3 with attention_bias) would be computed wrongly.
absl::Status RefuseOutputBias(const SafetensorsCheckpoint& ckpt, const std::string& name, TensorReader& reader,
                              int64_t n) {
  if (ckpt.Find(name) == nullptr) return absl::OkStatus();
  Tensor b;
  BEACON_ASSIGN_OR_RETURN(b, reader.Vector(name, n));
  for (int64_t i = 0; i < n; ++i) {
    if (b.f32()[i] != 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": a bias on the attention output projection is not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadLayer(const SafetensorsCheckpoint& ckpt, const ModelConfig& c, int l, TensorReader& r,
                       LayerWeights* L) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_hidden;
  BEACON_ASSIGN_OR_RETURN(L->attn_norm, r.Vector(p + "input_layernorm.weight", h));
  BEACON_ASSIGN_OR_RETURN(L->wq, r.Matrix(p + "self_attn.q_proj.weight", q, h));
  BEACON_ASSIGN_OR_RETURN(L->wk, r.Matrix(p + "self_attn.k_proj.weight", kv, h));
  BEACON_ASSIGN_OR_RETURN(L->wv, r.Matrix(p + "self_attn.v_proj.weight", kv, h));
  BEACON_ASSIGN_OR_RETURN(L->wo, r.Matrix(p + "self_attn.o_proj.weight", h, q));
  if (c.qkv_bias) {
    BEACON_ASSIGN_OR_RETURN(L->bq, r.Vector(p + "self_attn.q_proj.bias", q));
    BEACON_ASSIGN_OR_RETURN(L->bk, r.Vector(p + "self_attn.k_proj.bias", kv));
    BEACON_ASSIGN_OR_RETURN(L->bv, r.Vector(p + "self_attn.v_proj.bias", kv));
  }
  if (absl::Status s = RefuseOutputBias(ckpt, p + "self_attn.o_proj.bias", r, h); !s.ok()) return s;
  if (c.qk_norm) {
    BEACON_ASSIGN_OR_RETURN(L->q_norm, r.Vector(p + "self_attn.q_norm.weight", c.head_dim));
    BEACON_ASSIGN_OR_RETURN(L->k_norm, r.Vector(p + "self_attn.k_norm.weight", c.head_dim));
  }
  BEACON_ASSIGN_OR_RETURN(L->ffn_norm, r.Vector(p + "post_attention_layernorm.weight", h));
  BEACON_ASSIGN_OR_RETURN(L->w_gate, r.Matrix(p + "mlp.gate_proj.weight", f, h));
  BEACON_ASSIGN_OR_RETURN(L->w_up, r.Matrix(p + "mlp.up_proj.weight", f, h));
  BEACON_ASSIGN_OR_RETURN(L->w_down, r.Matrix(p + "mlp.down_proj.weight", h, f));
  return absl::OkStatus();
}

// token id(s) under `key`: an integer or a list of integers.
std::vector<int32_t> TokenIds(const json& j, const char* key) {
  std::vector<int32_t> ids;
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end()) return ids;
  auto add = [&](const json& v) {
    if (v.is_number_unsigned() && v.get<uint64_t>() < (1u << 31)) ids.push_back(v.get<int32_t>());
  };
  if (it->is_array()) {
    for (const json& v : *it) add(v);
  } else {
    add(*it);
  }
  return ids;
}

// Completes BOS/EOS from generation_config.json (what HF generate() stops
// on) or config.json: Llama 3.1 and Qwen3 list several end tokens there.
// generation_config.json is optional, but one that exists must parse: its
// stop tokens are what ends a chat turn.
absl::Status AddGenerationTokens(const std::string& dir, const json& config, TokenizerData* tok) {
  json gen;
  const fs::path gen_path = fs::path(dir) / "generation_config.json";
  std::error_code ec;
  if (fs::exists(gen_path, ec)) {
    auto g = ReadJsonFile(gen_path.string());
    if (!g.ok()) return g.status();
    gen = *std::move(g);
  }
  const int32_t n = static_cast<int32_t>(tok->tokens.size());
  std::vector<int32_t> eos = TokenIds(gen, "eos_token_id");
  if (eos.empty()) eos = TokenIds(config, "eos_token_id");
  std::vector<int32_t> bos = TokenIds(gen, "bos_token_id");
  if (bos.empty()) bos = TokenIds(config, "bos_token_id");
  if (tok->bos_id < 0 && !bos.empty() && bos[0] < n) tok->bos_id = bos[0];
  for (int32_t id : eos) {
    if (id >= n) continue;
    if (tok->eos_id < 0) {
      tok->eos_id = id;
    } else if (id != tok->eos_id) {
      auto& extra = tok->extra_eos_ids;
      if (std::find(extra.begin(), extra.end(), id) == extra.end()) extra.push_back(id);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadHfModel(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  auto config_json = ReadJsonFile(config_path);
  if (!config_json.ok()) return config_json.status();
  auto config = ParseHfConfigFile(config_path);
  if (!config.ok()) return config.status();
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir);
  if (!ckpt.ok()) return ckpt.status();

  auto model = std::make_unique<LoadedModel>();
  model->source = dir;
  ModelWeights& w = model->weights;
  w.config = *config;
  ModelConfig& c = w.config;
  w.keep_alive = ckpt->Mappings();
  TensorReader r(*ckpt, &w);

  BEACON_ASSIGN_OR_RETURN(w.tok_embd, r.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden));
  BEACON_ASSIGN_OR_RETURN(w.output_norm, r.Vector("model.norm.weight", c.hidden));
  // HF ties whenever the config says so, even if lm_head was also saved; a
  // checkpoint without lm_head can only mean tied.
  if (c.tie_embeddings || ckpt->Find("lm_head.weight") == nullptr) {
    c.tie_embeddings = true;
    w.output = w.tok_embd;
  } else {
    BEACON_ASSIGN_OR_RETURN(w.output, r.Matrix("lm_head.weight", c.vocab_size, c.hidden));
  }
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    if (absl::Status s = ReadLayer(*ckpt, c, l, r, &w.layers[l]); !s.ok()) return s;
  }

  const fs::path tok_path = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (fs::exists(tok_path, ec)) {
    auto tok = ReadHfTokenizerJson(tok_path.string());
    if (!tok.ok()) return tok.status();
    if (static_cast<int64_t>(tok->tokens.size()) > c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(tok_path.string(), " has ", tok->tokens.size(),
                                                     " tokens but the model's vocab_size is ", c.vocab_size));
    }
    if (absl::Status s = AddGenerationTokens(dir, *config_json, &*tok); !s.ok()) return s;
    if (absl::Status s = UseChatTemplateJinja(dir, &*tok); !s.ok()) return s;
    model->tokenizer = *std::move(tok);
  }
  return model;
}

}  // namespace beacon
