// libFuzzer target for the GGUF reader and the GGUF model loader.
//
// Any input must either parse or fail with a Status; once parsed, every
// metadata value is decoded through every typed getter (most fail on a type
// mismatch, which is fine), every readable tensor's bytes are read (so ASan
// sees an out-of-bounds extent), and the tokenizer and weight loading paths
// run on the result. Built with -fsanitize=fuzzer,address,undefined by
// `make fuzz`; replay_main.cc drives the same entry point over the corpus in
// ordinary builds.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "model/gguf/gguf_file.h"
#include "model/gguf_loader.h"

namespace {

void TouchMetadata(const beacon::GgufFile& file) {
  volatile size_t sink = 0;
  for (const beacon::GgufKeyValue& kv : file.metadata()) {
    sink = sink + beacon::FormatGgufValue(kv.value, 16).size();
    sink = sink + file.GetString(kv.key).ok();
    sink = sink + file.GetInt(kv.key).ok();
    sink = sink + file.GetU32(kv.key).ok();
    sink = sink + file.GetF32(kv.key).ok();
    sink = sink + file.GetBool(kv.key).ok();
    if (auto a = file.GetStringArray(kv.key); a.ok()) sink = sink + a->size();
    if (auto a = file.GetI32Array(kv.key); a.ok()) sink = sink + a->size();
    if (auto a = file.GetF32Array(kv.key); a.ok()) sink = sink + a->size();
  }
}

void TouchTensors(const beacon::GgufFile& file) {
  volatile uint8_t sink = 0;
  for (const beacon::GgufTensorInfo& info : file.tensor_infos()) {
    auto t = file.FindTensor(info.name);
    if (!t.ok()) continue;
    uint8_t x = 0;
    for (size_t i = 0; i < t->nbytes; ++i) x ^= t->data[i];
    sink = sink ^ x;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = beacon::GgufFile::FromBuffer(bytes, "<fuzz>");
  if (!file.ok()) return 0;
  TouchMetadata(**file);
  TouchTensors(**file);
  std::shared_ptr<const beacon::GgufFile> shared = std::move(*file);
  (void)beacon::ReadGgufTokenizer(*shared);
  auto model = beacon::LoadGgufModelFromFile(shared);
  if (model.ok()) {
    // The loader's contract: every tensor it hands out is readable in full.
    volatile uint8_t sink = 0;
    auto touch = [&](const beacon::Tensor& t) {
      if (t.empty()) return;
      const auto* p = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < t.bytes(); ++i) sink = sink ^ p[i];
    };
    const beacon::ModelWeights& w = (*model)->weights;
    touch(w.tok_embd);
    touch(w.output_norm);
    touch(w.output);
    for (const beacon::LayerWeights& l : w.layers) {
      for (const beacon::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm,
                                      &l.k_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
        touch(*t);
      }
    }
  }
  return 0;
}
