// LoadGgufModel: hyper-parameters from `<arch>.*` metadata, tensors checked
// against them, tokenizer from `tokenizer.*`.
#include "model/gguf_loader.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/aligned_buffer.h"
#include "model/rope_config.h"

namespace beacon {
namespace {

// Every Tensor::data the loader hands out is aligned to this (see the header):
// what a mapped file with GGUF's default alignment gives for free. Copies are
// aligned further, by AllocateAligned.
constexpr size_t kTensorAlign = 32;

absl::Status Invalid(const GgufFile& f, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(f.name(), ": ", msg));
}

// An int metadata value; `def` when absent, else the key is required.
absl::StatusOr<int> ReadInt(const GgufFile& f, const std::string& key, std::optional<int> def) {
  if (!f.Has(key)) {
    if (def.has_value()) return *def;
    return Invalid(f, absl::StrCat("missing metadata '", key, "'"));
  }
  absl::StatusOr<int64_t> v = f.GetInt(key);
  if (!v.ok()) return v.status();
  if (*v < 0 || *v > INT32_MAX) {
    return Invalid(f, absl::StrCat("metadata '", key, "' = ", *v, " is out of range"));
  }
  return static_cast<int>(*v);
}

absl::StatusOr<float> ReadFloat(const GgufFile& f, const std::string& key, std::optional<float> def) {
  if (!f.Has(key)) {
    if (def.has_value()) return *def;
    return Invalid(f, absl::StrCat("missing metadata '", key, "'"));
  }
  return f.GetF32(key);
}

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string ShapeString(const int64_t* ne, int n) { return absl::StrCat("[", absl::StrJoin(ne, ne + n, ", "), "]"); }

// Looks tensors up, checks their shapes and produces Tensors whose bytes stay
// alive through `keep`.
class TensorReader {
 public:
  TensorReader(const GgufFile& file, std::vector<std::shared_ptr<const void>>& keep) : file_(file), keep_(keep) {}

  // A [rows, cols] matrix (GGUF ne = [cols, rows]) in its stored type.
  absl::StatusOr<Tensor> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    const int64_t want[2] = {cols, rows};
    absl::StatusOr<GgufTensor> t = Find(name, want, 2);
    if (!t.ok()) return t.status();
    absl::StatusOr<const void*> data = Aligned(name, t->data, t->nbytes);
    if (!data.ok()) return data.status();
    return Tensor{t->dtype, rows, cols, *data};
  }

  // A vector of `n`, converted to F32 when stored as anything else.
  absl::StatusOr<Tensor> Vector(const std::string& name, int64_t n) {
    const int64_t want[1] = {n};
    absl::StatusOr<GgufTensor> t = Find(name, want, 1);
    if (!t.ok()) return t.status();
    absl::StatusOr<const void*> src = Aligned(name, t->data, t->nbytes);
    if (!src.ok()) return src.status();
    if (t->dtype == DType::kF32) return Tensor{DType::kF32, 1, n, *src};
    std::shared_ptr<uint8_t> f32 = Allocate(static_cast<size_t>(n) * sizeof(float));
    if (f32 == nullptr) return OutOfMemory(name);
    DequantizeRow(t->dtype, *src, reinterpret_cast<float*>(f32.get()), n);
    return Tensor{DType::kF32, 1, n, f32.get()};
  }

 private:
  absl::StatusOr<GgufTensor> Find(const std::string& name, const int64_t* want, int n_want) {
    absl::StatusOr<GgufTensor> t = file_.FindTensor(name);
    if (absl::IsNotFound(t.status())) return Invalid(file_, absl::StrCat("missing tensor ", name));
    if (!t.ok()) return t.status();
    // Trailing dimensions of 1 are insignificant: [576] == [576, 1].
    bool match = true;
    for (int d = 0; d < kGgufMaxDims; ++d) {
      match = match && t->ne[d] == (d < n_want ? want[d] : 1);
    }
    if (!match) {
      return Invalid(file_, absl::StrCat("tensor ", name, " has shape ", ShapeString(t->ne.data(), t->n_dims),
                                         ", expected ", ShapeString(want, n_want)));
    }
    return t;
  }

  // `data` itself when suitably aligned (the normal case: a mapped file with
  // the default alignment), else an aligned copy.
  absl::StatusOr<const void*> Aligned(const std::string& name, const uint8_t* data, size_t nbytes) {
    if (reinterpret_cast<uintptr_t>(data) % kTensorAlign == 0) return data;
    std::shared_ptr<uint8_t> copy = Allocate(nbytes);
    if (copy == nullptr) return OutOfMemory(name);
    std::copy(data, data + nbytes, copy.get());
    return copy.get();
  }

  // An owned buffer, kept alive with the weights; null when out of memory.
  std::shared_ptr<uint8_t> Allocate(size_t nbytes) {
    std::shared_ptr<uint8_t> buf = AllocateAligned(nbytes);
    if (buf != nullptr) keep_.push_back(buf);
    return buf;
  }

  absl::Status OutOfMemory(const std::string& name) const {
    return absl::ResourceExhaustedError(absl::StrCat(file_.name(), ": out of memory copying tensor ", name));
  }

  const GgufFile& file_;
  std::vector<std::shared_ptr<const void>>& keep_;
};

absl::Status ReadLayer(TensorReader& r, const ModelConfig& c, int i, LayerWeights& l) {
  const std::string p = absl::StrCat("blk.", i, ".");
  struct Want {
    Tensor* out;
    const char* name;
    int64_t rows;  // 0: a vector of `cols`
    int64_t cols;
  };
  std::vector<Want> wants = {
      {&l.attn_norm, "attn_norm.weight", 0, c.hidden},        {&l.wq, "attn_q.weight", c.q_dim(), c.hidden},
      {&l.wk, "attn_k.weight", c.kv_dim(), c.hidden},         {&l.wv, "attn_v.weight", c.kv_dim(), c.hidden},
      {&l.wo, "attn_output.weight", c.hidden, c.q_dim()},     {&l.ffn_norm, "ffn_norm.weight", 0, c.hidden},
      {&l.w_gate, "ffn_gate.weight", c.ffn_hidden, c.hidden}, {&l.w_up, "ffn_up.weight", c.ffn_hidden, c.hidden},
      {&l.w_down, "ffn_down.weight", c.hidden, c.ffn_hidden},
  };
  if (c.qkv_bias) {
    wants.push_back({&l.bq, "attn_q.bias", 0, c.q_dim()});
    wants.push_back({&l.bk, "attn_k.bias", 0, c.kv_dim()});
    wants.push_back({&l.bv, "attn_v.bias", 0, c.kv_dim()});
  }
  if (c.qk_norm) {
    wants.push_back({&l.q_norm, "attn_q_norm.weight", 0, c.head_dim});
    wants.push_back({&l.k_norm, "attn_k_norm.weight", 0, c.head_dim});
  }
  for (const Want& w : wants) {
    const std::string name = p + w.name;
    absl::StatusOr<Tensor> t = w.rows == 0 ? r.Vector(name, w.cols) : r.Matrix(name, w.rows, w.cols);
    if (!t.ok()) return t.status();
    *w.out = *t;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ReadGgufModelConfig(const GgufFile& f) {
  if (!f.Has("general.architecture")) return Invalid(f, "missing metadata 'general.architecture'");
  absl::StatusOr<std::string> arch = f.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  absl::StatusOr<ModelFamily> family = ParseModelFamily(*arch);
  if (!family.ok()) return Invalid(f, std::string(family.status().message()));
  auto key = [&](const char* suffix) { return absl::StrCat(*arch, ".", suffix); };

  ModelConfig c;
  c.family = *family;
  c.name = Basename(f.name());
  if (f.Has("general.name")) {
    absl::StatusOr<std::string> name = f.GetString("general.name");
    if (!name.ok()) return name.status();
    c.name = std::move(*name);
  }
  struct IntField {
    int* out;
    std::string key;
    std::optional<int> def;
  };
  for (const IntField& field : {IntField{&c.n_layers, key("block_count"), std::nullopt},
                                IntField{&c.hidden, key("embedding_length"), std::nullopt},
                                IntField{&c.ffn_hidden, key("feed_forward_length"), std::nullopt},
                                IntField{&c.n_heads, key("attention.head_count"), std::nullopt},
                                IntField{&c.context_length, key("context_length"), std::nullopt}}) {
    absl::StatusOr<int> v = ReadInt(f, field.key, field.def);
    if (!v.ok()) return v.status();
    *field.out = *v;
  }
  absl::StatusOr<int> n_kv = ReadInt(f, key("attention.head_count_kv"), c.n_heads);
  if (!n_kv.ok()) return n_kv.status();
  c.n_kv_heads = *n_kv;
  if (!f.Has(key("attention.key_length")) && (c.n_heads <= 0 || c.hidden % c.n_heads != 0)) {
    return Invalid(f, absl::StrCat("embedding_length (", c.hidden, ") is not a multiple of head_count (", c.n_heads,
                                   ") and '", key("attention.key_length"), "' is absent"));
  }
  absl::StatusOr<int> head_dim = ReadInt(f, key("attention.key_length"), c.n_heads > 0 ? c.hidden / c.n_heads : 0);
  if (!head_dim.ok()) return head_dim.status();
  c.head_dim = *head_dim;
  // The forward pass uses one head size for K and V and rotates whole heads.
  absl::StatusOr<int> v_len = ReadInt(f, key("attention.value_length"), c.head_dim);
  if (!v_len.ok()) return v_len.status();
  if (*v_len != c.head_dim) {
    return Invalid(f, absl::StrCat("attention.value_length (", *v_len, ") differs from the key length (", c.head_dim,
                                   "): not supported"));
  }
  absl::StatusOr<int> rot = ReadInt(f, key("rope.dimension_count"), c.head_dim);
  if (!rot.ok()) return rot.status();
  if (*rot != c.head_dim) {
    return Invalid(f, absl::StrCat("partial rotary embedding (rope.dimension_count ", *rot, ", head_dim ", c.head_dim,
                                   ") is not supported"));
  }
  // Linear and YaRN metadata, Llama 3.1's rope_freqs.weight; extends
  // context_length by the scaling (model/rope_config.h).
  if (absl::Status st = ReadGgufRopeScaling(f, *arch, &c); !st.ok()) return st;
  absl::StatusOr<float> theta = ReadFloat(f, key("rope.freq_base"), 10000.0f);
  if (!theta.ok()) return theta.status();
  c.rope_theta = *theta;
  absl::StatusOr<float> eps = ReadFloat(f, key("attention.layer_norm_rms_epsilon"), std::nullopt);
  if (!eps.ok()) return eps.status();
  c.rms_eps = *eps;

  if (f.Has(key("vocab_size"))) {
    absl::StatusOr<int> vocab = ReadInt(f, key("vocab_size"), std::nullopt);
    if (!vocab.ok()) return vocab.status();
    c.vocab_size = *vocab;
  } else if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->is_array()) {
    c.vocab_size = static_cast<int>(std::min<uint64_t>(tokens->count, INT32_MAX));
  } else {
    for (const GgufTensorInfo& t : f.tensor_infos()) {
      if (t.name == "token_embd.weight") {
        c.vocab_size = static_cast<int>(std::min<int64_t>(t.ne[1], INT32_MAX));
      }
    }
  }
  c.rope_style = c.family == ModelFamily::kLlama ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  c.qkv_bias = c.family == ModelFamily::kQwen2;
  c.qk_norm = c.family == ModelFamily::kQwen3;
  c.tie_embeddings = !f.HasTensor("output.weight");
  if (absl::Status st = c.Validate(); !st.ok()) {
    return Invalid(f, absl::StrCat("invalid model config: ", st.message()));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModelFromFile(std::shared_ptr<const GgufFile> file) {
  const GgufFile& f = *file;
  absl::StatusOr<ModelConfig> config = ReadGgufModelConfig(f);
  if (!config.ok()) return config.status();
  const ModelConfig& c = *config;

  auto model = std::make_unique<LoadedModel>();
  model->source = f.name();
  ModelWeights& w = model->weights;
  w.config = c;
  w.keep_alive.push_back(std::move(file));  // `f` stays valid: the pointee lives on in keep_alive
  TensorReader r(f, w.keep_alive);

  absl::StatusOr<Tensor> t = r.Matrix("token_embd.weight", c.vocab_size, c.hidden);
  if (!t.ok()) return t.status();
  w.tok_embd = *t;
  if (t = r.Vector("output_norm.weight", c.hidden); !t.ok()) return t.status();
  w.output_norm = *t;
  if (c.tie_embeddings) {
    w.output = w.tok_embd;
  } else {
    if (t = r.Matrix("output.weight", c.vocab_size, c.hidden); !t.ok()) return t.status();
    w.output = *t;
  }
  w.layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    if (absl::Status st = ReadLayer(r, c, i, w.layers[i]); !st.ok()) return st;
  }

  absl::StatusOr<TokenizerData> tok = ReadGgufTokenizer(f);
  if (tok.ok()) {
    if (tok->tokens.size() > static_cast<size_t>(c.vocab_size)) {
      return Invalid(f, absl::StrCat("the tokenizer has ", tok->tokens.size(), " tokens but the model's vocabulary is ",
                                     c.vocab_size));
    }
    model->tokenizer = std::move(*tok);
  } else if (!absl::IsNotFound(tok.status())) {
    return tok.status();
  }
  return model;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModel(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return LoadGgufModelFromFile(std::move(*file));
}

}  // namespace beacon
