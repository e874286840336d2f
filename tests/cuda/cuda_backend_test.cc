// The CUDA backend against the CPU backend on the same weights: whole-model
// logits (dummy models of each family and head size, the default GGUF
// model), greedy ids, CUDA graphs, BeaconKV eviction on the device, and the
// errors of the Backend contract. Every test skips without a GPU.
//
// Tolerance: the CPU runs f32 activations; the GPU keeps the residual stream
// and every activation in bf16 (relative rounding 2^-9 per value, compounded
// over layers) with fp32 accumulation. Relative RMS error of a logits row
// (|gpu - cpu|_2 / |cpu|_2) is therefore ~1e-2 on small dummy models; 3e-2
// bounds it with margin while a wrong kernel (a missed norm, a RoPE pairing,
// a GQA head mapping) gives errors of order 1. On the default model the CPU
// itself quantises activations to int8 (2-4% from an exact reference,
// docs/fidelity.md), so the bound there is 8e-2.
#include "engine/cuda/cuda_backend.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using backend_test::MakeRuntime;
using backend_test::RelRms;

int Argmax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

std::vector<int32_t> Tokens(int n, int vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (salt * 97 + i * 31 + 5) % vocab;
  return t;
}

// Runs the same schedule on both backends: two sequences; A prefills in two
// chunks (the second with all logits), B prefills at once; then `decode`
// batched decode steps fed the CPU's greedy ids (teacher forcing, so both
// see identical inputs). Every logits row is compared.
void CompareBackends(const std::string& model, double tol, int decode, CudaBackendOptions cuda = {}) {
  std::unique_ptr<Runtime> cpu = MakeRuntime(model, "cpu");
  std::unique_ptr<Runtime> gpu = MakeRuntime(model, "cuda", cuda);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  const int vocab = cpu->config().vocab_size;
  std::unique_ptr<KvCache> cc = *cpu->MakeKvCache(512), gc = *gpu->MakeKvCache(512);
  SequenceKv ca(cc.get()), cb(cc.get()), ga(gc.get()), gb(gc.get());
  std::vector<float> cl, gl;
  double worst = 0;
  auto run = [&](std::vector<ForwardEntry> c_batch, std::vector<ForwardEntry> g_batch, const char* what) {
    ASSERT_TRUE(cpu->backend()->Forward(c_batch, &cl).ok()) << what;
    gl.assign(cl.size(), std::nanf(""));  // poisoned: a row the GPU forgot fails
    ASSERT_TRUE(gpu->backend()->Forward(g_batch, &gl).ok()) << what;
    ASSERT_EQ(gl.size(), cl.size()) << what;
    for (size_t r = 0; r < cl.size() / vocab; ++r) {
      const double e = RelRms(&gl[r * vocab], &cl[r * vocab], vocab);
      worst = std::max(worst, e);
      EXPECT_LE(e, tol) << what << " row " << r;
    }
  };
  const std::vector<int32_t> a1 = Tokens(25, vocab, 1), a2 = Tokens(15, vocab, 2), b1 = Tokens(33, vocab, 3);
  run({ForwardEntry{&ca, a1, 0, false}}, {ForwardEntry{&ga, a1, 0, false}}, "A chunk 1");
  run({ForwardEntry{&ca, a2, 25, true}, ForwardEntry{&cb, b1, 0, false}},
      {ForwardEntry{&ga, a2, 25, true}, ForwardEntry{&gb, b1, 0, false}}, "A chunk 2 (all logits) + B prefill");
  std::vector<int32_t> na = {Argmax(&cl[14 * vocab], vocab)}, nb = {Argmax(&cl[15 * vocab], vocab)};
  for (int s = 0; s < decode; ++s) {
    run({ForwardEntry{&ca, na, 40 + s, false}, ForwardEntry{&cb, nb, 33 + s, false}},
        {ForwardEntry{&ga, na, 40 + s, false}, ForwardEntry{&gb, nb, 33 + s, false}}, "decode");
    na = {Argmax(&cl[0], vocab)};
    nb = {Argmax(&cl[vocab], vocab)};
  }
  EXPECT_EQ(ga.num_slots(), ca.num_slots());
  std::printf("%s: worst relative RMS logits error %.3g\n", model.c_str(), worst);
  for (SequenceKv* s : {&ca, &cb, &ga, &gb}) s->Release();
  EXPECT_EQ(gc->pool().num_free(), gc->pool().num_blocks());
}

const std::string kSrc = BEACON_SOURCE_DIR;

TEST(CudaBackendTest, DummyLlamaMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-llama.json", 3e-2, 12);
}

TEST(CudaBackendTest, DummyQwen2WithBiasMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-qwen2.json", 3e-2, 12);
}

TEST(CudaBackendTest, DummyQwen3HeadDim128MatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12);
}

// GQA 7 (R1-Distill-Qwen-7B's group: 14 query heads on 2 KV heads) at
// head_dim 128, on our kernels; the FlashInfer test below runs it on hers.
TEST(CudaBackendTest, DummyGqa7HeadDim128MatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CompareBackends("dummy:" + kSrc + "/tests/data/small-gqa7-hd128.json", 3e-2, 12);
}

// Decode attention on tensor cores (head_dim 128 here; the tiny models' 16
// run the CUDA-core kernel whichever is asked).
TEST(CudaBackendTest, TensorCoreDecodeMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions cuda;
  cuda.tensor_core_decode = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, cuda);
}

// Decode attention by FlashInfer (built with its headers, on a GPU): decode
// steps plan, capture and replay graphs over growing contexts; prefill stays
// ours. Its CUDA-core kernel at GQA 4, also under programmatic launch (its
// kernel waits on the device as ours do); its tensor-core kernel at GQA 4
// and 7 (R1-Distill-Qwen-7B's group, which only that kernel covers).
TEST(CudaBackendTest, FlashInferDecodeMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
#ifndef BEACON_HAVE_FLASHINFER
  GTEST_SKIP() << "built without FlashInfer (the emulator never has it)";
#else
  CudaBackendOptions cuda;
  cuda.flashinfer_decode = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, cuda);
  cuda.programmatic_launch = true;
  cuda.small_batch_gemv = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, cuda);
  CudaBackendOptions tensor;
  tensor.flashinfer_decode = true;
  tensor.tensor_core_decode = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, tensor);
  CompareBackends("dummy:" + kSrc + "/tests/data/small-gqa7-hd128.json", 3e-2, 12, tensor);
#endif
}

// Refused at start, naming why: a build without FlashInfer (the emulator's),
// a head_dim it does not cover (the tiny models' 16), a GQA group outside
// its CUDA-core kernel's dispatch (7) unless its tensor-core kernel is asked.
TEST(CudaBackendTest, FlashInferDecodeRefusedWhereItCannotRun) {
  BEACON_REQUIRE_CUDA_DEVICE();
  auto create = [](const std::string& config, bool tensor_cores) {
    RuntimeOptions o;
    o.model = "dummy:" + kSrc + "/tests/data/" + config;
    o.device = "cuda";
    o.cuda.flashinfer_decode = true;
    o.cuda.tensor_core_decode = tensor_cores;
    return Runtime::Create(o);
  };
  absl::StatusOr<std::unique_ptr<Runtime>> rt = create("tiny-qwen2.json", false);
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("--cuda-flashinfer-decode"), std::string::npos) << rt.status();
#ifdef BEACON_HAVE_FLASHINFER
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kInvalidArgument) << rt.status();
  EXPECT_NE(rt.status().message().find("head_dim 16"), std::string::npos) << rt.status();
  rt = create("small-gqa7-hd128.json", false);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kInvalidArgument) << rt.status();
  EXPECT_NE(rt.status().message().find("14 query heads on 2 KV heads"), std::string::npos) << rt.status();
  EXPECT_NE(rt.status().message().find("--cuda-tensor-core-decode"), std::string::npos) << rt.status();
  EXPECT_TRUE(create("small-gqa7-hd128.json", true).ok());
#else
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kFailedPrecondition) << rt.status();
#endif
}

// Projections of the decode steps (2 tokens) and the LM head's rows on the
// matrix-vector kernel; prefill's 25-33 tokens stay on cuBLAS.
TEST(CudaBackendTest, SmallBatchGemvMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions cuda;
  cuda.small_batch_gemv = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, cuda);
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-qwen2.json", 3e-2, 12, cuda);
}

// Programmatic dependent launch of the step's own kernels, with the projections
// on the matrix-vector kernel so that decode steps are ours end to end (and
// with cuBLAS between them in prefill). The emulator checks that every
// thread of such a launch waits for the previous kernel; a GPU, that
// nothing reads before the wait.
TEST(CudaBackendTest, ProgrammaticLaunchMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions cuda;
  cuda.programmatic_launch = true;
  cuda.small_batch_gemv = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json", 3e-2, 12, cuda);
  cuda.small_batch_gemv = false;
  cuda.tensor_core_decode = true;
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-qwen2.json", 3e-2, 12, cuda);
}

// Scaled RoPE (the uploaded RopeTable, YaRN's attention factor on q and k)
// rotates as on the CPU.
TEST(CudaBackendTest, DummyRopeScalingMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-qwen2-yarn.json", 3e-2, 12);
  CompareBackends("dummy:" + kSrc + "/tests/data/tiny-llama3-rope.json", 3e-2, 12);
}

// K-quant GGUFs made by llama.cpp's quantiser (tests/fixtures/kquant): the
// device holds bf16 weights dequantised on the host (DequantizeRow, equal to
// the gguf package's bit for bit); the CPU runs its integer K kernels.
TEST(CudaBackendTest, KQuantModelsMatchCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  for (const char* f : {"smollm2-l1-q4_k_m.gguf", "smollm2-l1-q4_k-pure.gguf", "smollm2-l1-q5_k-pure.gguf"}) {
    CompareBackends(kSrc + "/tests/fixtures/kquant/" + f, 5e-2, 8);
  }
}

TEST(CudaBackendTest, DefaultModelMatchesCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  if (FILE* f = std::fopen(BEACON_MODEL_PATH, "rb"); f != nullptr) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH << " (make model)";
  }
  CompareBackends(BEACON_MODEL_PATH, 8e-2, 16);
}

// Greedy ids on the device, in captured graphs, from a backend with
// `graphed_options`, against the argmax of a plain backend's logits (the
// same kernels, without graphs or programmatic launches: the same
// arithmetic) over three sequences and 20 decode steps.
void GreedyAgreesWithPlainLogits(const CudaBackendOptions& graphed_options) {
  const std::string model = "dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json";
  std::unique_ptr<Runtime> rt = MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  CudaBackendOptions plain_options = graphed_options;
  plain_options.cuda_graphs = false;
  plain_options.programmatic_launch = false;
  absl::StatusOr<std::unique_ptr<CudaBackend>> plain = CudaBackend::Create(&rt->weights(), plain_options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<std::unique_ptr<CudaBackend>> made = CudaBackend::Create(&rt->weights(), graphed_options);
  ASSERT_TRUE(made.ok()) << made.status();
  CudaBackend* graphed = made->get();
  const int vocab = rt->config().vocab_size;
  const std::unique_ptr<KvCache> sized = *rt->MakeKvCache(1024);  // the shape and blocks of 1,024 slots
  std::unique_ptr<KvCache> c1 = *graphed->MakeKvCache(sized->shape(), sized->pool().num_blocks()),
                           c2 = *(*plain)->MakeKvCache(sized->shape(), sized->pool().num_blocks());
  std::vector<SequenceKv> s1, s2;
  for (int i = 0; i < 3; ++i) {
    s1.emplace_back(c1.get());
    s2.emplace_back(c2.get());
  }
  std::vector<std::vector<int32_t>> next(3);
  std::vector<float> logits;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> p = Tokens(20 + 7 * i, vocab, i);
    ForwardEntry e1{&s1[i], p, 0, false}, e2{&s2[i], p, 0, false};
    ASSERT_TRUE(graphed->ForwardGreedy(std::span(&e1, 1), &ids).ok());
    ASSERT_TRUE((*plain)->Forward(std::span(&e2, 1), &logits).ok());
    EXPECT_EQ(ids[0], Argmax(logits.data(), vocab));
    next[i] = {ids[0]};
  }
  for (int step = 0; step < 20; ++step) {
    std::vector<ForwardEntry> b1, b2;
    for (int i = 0; i < 3; ++i) {
      b1.push_back(ForwardEntry{&s1[i], next[i], 20 + 7 * i + step, false});
      b2.push_back(ForwardEntry{&s2[i], next[i], 20 + 7 * i + step, false});
    }
    ASSERT_TRUE(graphed->ForwardGreedy(b1, &ids).ok());
    ASSERT_TRUE((*plain)->Forward(b2, &logits).ok());
    for (int i = 0; i < 3; ++i) {
      // Same kernels, same inputs: a graph replay computes what a direct run does.
      EXPECT_EQ(ids[i], Argmax(&logits[i * vocab], vocab)) << "step " << step << " seq " << i;
      next[i] = {ids[i]};
    }
  }
  EXPECT_GE(graphed->graphs_captured(), 1);
  EXPECT_GT(graphed->graph_replays(), graphed->graphs_captured());
  EXPECT_EQ((*plain)->graphs_captured(), 0);
  for (auto* v : {&s1, &s2}) {
    for (SequenceKv& s : *v) s.Release();
  }
}

TEST(CudaBackendTest, GreedyAndGraphsAgreeWithPlainLogits) {
  BEACON_REQUIRE_CUDA_DEVICE();
  GreedyAgreesWithPlainLogits(CudaBackendOptions{});
}

// The same with the step's own kernels (argmax included) launched
// programmatically, and the projections on the matrix-vector kernel.
TEST(CudaBackendTest, ProgrammaticGreedyAndGraphsAgreeWithPlainLogits) {
  BEACON_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions cuda;
  cuda.programmatic_launch = true;
  cuda.small_batch_gemv = true;
  GreedyAgreesWithPlainLogits(cuda);
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

// Device sampling through the backend: temperature 0 is the greedy id; a
// seeded draw is a function of (logits, seed, step) alone; top_k 1 is greedy
// whatever the temperature; draws stay inside the top-k set.
TEST(CudaBackendTest, ForwardSampleDrawsOnTheDevice) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::string model = "dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json";
  std::unique_ptr<Runtime> rt = MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  Backend* be = rt->backend();
  ASSERT_TRUE(be->samples_on_device());
  const int vocab = rt->config().vocab_size;
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(512);
  const std::vector<int32_t> prompt = Tokens(30, vocab, 9);
  std::vector<float> logits;
  std::vector<int32_t> ids;
  int32_t first_draw = -1;
  for (int trial = 0; trial < 4; ++trial) {
    // A fresh sequence per trial: same prompt, so the same logits row.
    SequenceKv s(cache.get());
    ForwardEntry e{&s, prompt, 0, false};
    EntrySampling p;
    switch (trial) {
      case 0: break;  // greedy
      case 1:
        p.temperature = 1.0f;
        p.top_k = 1;
        break;  // top-1 is greedy
      case 2:
        p.temperature = 1.3f;
        p.top_k = 5;
        p.seed = 42;
        p.step = 7;
        break;
      case 3:
        p.temperature = 1.3f;
        p.top_k = 5;
        p.seed = 42;
        p.step = 7;
        break;  // same draw again
    }
    ASSERT_TRUE(be->ForwardSample(std::span(&e, 1), std::span(&p, 1), &ids).ok());
    const int32_t drawn = ids[0];
    s.Truncate(0);
    ASSERT_TRUE(be->Forward(std::span(&e, 1), &logits).ok());
    const int32_t best = Argmax(logits.data(), vocab);
    if (trial <= 1) {
      EXPECT_EQ(drawn, best) << "trial " << trial;
    }
    if (trial >= 2) {
      std::vector<int> order(vocab);
      for (int i = 0; i < vocab; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                        [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
      EXPECT_NE(std::find(order.begin(), order.begin() + 5, drawn), order.begin() + 5) << "outside the top 5";
    }
    if (trial == 2) first_draw = drawn;
    if (trial == 3) {
      EXPECT_EQ(drawn, first_draw) << "same (logits, seed, step), different token";
    }
    s.Release();
  }
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

// A grammar's mask on the device (structured output): the greedy draw is the
// best allowed token of the same logits, a sampled draw stays among the
// allowed, and an unconstrained row of the same batch draws as without masks.
TEST(CudaBackendTest, ForwardSampleAppliesGrammarMasks) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::string model = "dummy:" + kSrc + "/tests/data/small-qwen3-hd128.json";
  std::unique_ptr<Runtime> rt = MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  Backend* be = rt->backend();
  const int vocab = rt->config().vocab_size;
  const int words = (vocab + 31) / 32;
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(1024);
  const std::vector<int32_t> prompt = Tokens(24, vocab, 3);
  // The logits row first, to build masks around it.
  std::vector<float> logits;
  {
    SequenceKv s(cache.get());
    ForwardEntry e{&s, prompt, 0, false};
    ASSERT_TRUE(be->Forward(std::span(&e, 1), &logits).ok());
    s.Release();
  }
  const int32_t best = Argmax(logits.data(), vocab);
  // Allowed: every third token but the best one.
  std::vector<uint32_t> mask(words, 0u);
  for (int t = 1; t < vocab; t += 3) {
    if (t != best) mask[t / 32] |= 1u << (t % 32);
  }
  int32_t best_allowed = -1;
  for (int t = 0; t < vocab; ++t) {
    if (((mask[t / 32] >> (t % 32)) & 1u) && (best_allowed < 0 || logits[t] > logits[best_allowed])) best_allowed = t;
  }
  for (float temperature : {0.0f, 1.5f}) {
    SequenceKv a(cache.get()), b(cache.get());
    std::vector<ForwardEntry> batch = {ForwardEntry{&a, prompt, 0, false}, ForwardEntry{&b, prompt, 0, false}};
    std::vector<EntrySampling> p(2);
    p[0].temperature = p[1].temperature = temperature;
    p[0].seed = p[1].seed = 11;
    p[0].allowed = mask;  // row 1 unconstrained
    std::vector<int32_t> ids;
    ASSERT_TRUE(be->ForwardSample(batch, p, &ids).ok());
    EXPECT_TRUE((mask[ids[0] / 32] >> (ids[0] % 32)) & 1u) << "drew a token the mask forbids: " << ids[0];
    if (temperature == 0.0f) {
      EXPECT_EQ(ids[0], best_allowed);
      EXPECT_EQ(ids[1], best);
    }
    a.Release();
    b.Release();
  }
}

}  // namespace
}  // namespace beacon
