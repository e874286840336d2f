// Test helpers: write safetensors files (well-formed or deliberately broken)
// and tiny HF checkpoints with known values.
//
// Header-only because the model_tests target compiles tests/model/
// *_test.cc only; a separate .cc here would not be built.
#ifndef BEACON_TESTS_ENGINE_MODEL_SAFETENSORS_WRITER_H_
#define BEACON_TESTS_ENGINE_MODEL_SAFETENSORS_WRITER_H_

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "model/model_config.h"

namespace beacon::testing_util {

struct TensorSpec {
  std::string name;
  std::string dtype;  // safetensors name: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Encodes `values` as dtype ("F32", "F16" or "BF16").
inline std::vector<uint8_t> Encode(const std::vector<float>& values, const std::string& dtype) {
  std::vector<uint8_t> out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == "F16" ? Fp32ToFp16(values[i]) : Fp32ToBf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// The safetensors header for `tensors` laid out back to back, in order.
inline nlohmann::json HeaderFor(const std::vector<TensorSpec>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  return h;
}

// Writes the length field, `header` verbatim (padded with spaces to
// `pad_to` bytes when larger), then `data`. `length_field` overrides the
// written length (to corrupt it) when non-negative.
inline void WriteRaw(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                     int64_t length_field = -1, size_t pad_to = 0) {
  std::string h = header;
  if (h.size() < pad_to) h.append(pad_to - h.size(), ' ');
  const uint64_t len = length_field >= 0 ? static_cast<uint64_t>(length_field) : h.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// A well-formed file. The header is padded to a multiple of 8 as real
// writers do, plus `misalign_by` bytes, which moves the data section off its
// natural alignment (legal, and what a loader must cope with).
inline void WriteSafetensors(const std::string& path, const std::vector<TensorSpec>& tensors, size_t misalign_by = 0) {
  std::string header = HeaderFor(tensors).dump();
  const size_t padded = (header.size() + 7) / 8 * 8 + misalign_by;
  std::vector<uint8_t> data;
  for (const auto& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  WriteRaw(path, header, data, -1, padded);
}

// Deterministic, distinct, exactly-representable-in-BF16 values for a tensor:
// small multiples of 1/64 so every dtype stores them without rounding.
inline std::vector<float> PatternValues(size_t n, uint32_t salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const int k = static_cast<int>((i * 7 + salt * 13) % 127) - 63;  // [-63, 63]
    v[i] = static_cast<float>(k) / 64.0f;
  }
  return v;
}

// Every tensor of an HF checkpoint for `c`, named as HF names them, with
// PatternValues (norms as 1 + pattern so they are not all equal). Tied
// configs get no lm_head.
inline std::vector<TensorSpec> MakeHfTensors(const ModelConfig& c, const std::string& dtype) {
  std::vector<TensorSpec> out;
  uint32_t salt = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool vector_one = false) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v = PatternValues(n, ++salt);
    if (vector_one) {
      for (float& x : v) x += 1.0f;
    }
    out.push_back({name, dtype, std::move(shape), Encode(v, dtype)});
  };
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_hidden;
  add("model.embed_tokens.weight", {c.vocab_size, h});
  add("model.norm.weight", {h}, true);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, h});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {h}, true);
    add(p + "self_attn.q_proj.weight", {q, h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
    add(p + "self_attn.o_proj.weight", {h, q});
    if (c.qkv_bias) {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {c.head_dim}, true);
      add(p + "self_attn.k_norm.weight", {c.head_dim}, true);
    }
    add(p + "post_attention_layernorm.weight", {h}, true);
    add(p + "mlp.gate_proj.weight", {f, h});
    add(p + "mlp.up_proj.weight", {f, h});
    add(p + "mlp.down_proj.weight", {h, f});
  }
  return out;
}

// Decodes a TensorSpec's F32/F16/BF16 bytes to floats.
inline std::vector<float> Decode(const TensorSpec& t) {
  const size_t elem = t.dtype == "F32" ? 4 : 2;
  std::vector<float> v(t.bytes.size() / elem);
  const DType dt = t.dtype == "F32" ? DType::kF32 : t.dtype == "F16" ? DType::kF16 : DType::kBF16;
  DequantizeRow(dt, t.bytes.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// A fresh empty directory under gtest's temp dir; the pid keeps tests that
// ctest runs in parallel processes apart.
inline std::string MakeTempDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("beacon_", name, "_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace beacon::testing_util

#endif  // BEACON_TESTS_ENGINE_MODEL_SAFETENSORS_WRITER_H_
