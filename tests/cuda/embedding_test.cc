#include "kernels/cuda/embedding.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::RandomBf16;

// Tolerance: none. A gather copies bits, so the output must equal the naive
// loop's bit for bit (and the NaN poison must be gone everywhere).

struct Result {
  std::vector<uint16_t> out;
  int32_t flag = -1;
};

// Runs the kernel with the output poisoned and the flag zeroed first.
void RunEmbedding(const std::vector<uint16_t>& table, int64_t vocab, int dim, const std::vector<int32_t>& ids,
                  Result* r) {
  DeviceBuffer<uint16_t> dtable(table.size()), dout(ids.size() * dim);
  DeviceBuffer<int32_t> dids(ids.size()), dflag(1);
  BEACON_CUDA_ASSERT_OK(dtable.Upload(table));
  BEACON_CUDA_ASSERT_OK(dids.Upload(ids));
  BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
  BEACON_CUDA_ASSERT_OK(cudaMemset(dflag.get(), 0, sizeof(int32_t)));
  BEACON_CUDA_ASSERT_OK(LaunchEmbedding(reinterpret_cast<const __nv_bfloat16*>(dtable.get()), vocab, dim, dids.get(),
                                        static_cast<int64_t>(ids.size()), reinterpret_cast<__nv_bfloat16*>(dout.get()),
                                        dflag.get(), nullptr));
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
  BEACON_CUDA_ASSERT_OK(dout.Download(&r->out));
  std::vector<int32_t> flag;
  BEACON_CUDA_ASSERT_OK(dflag.Download(&flag));
  r->flag = flag[0];
}

std::vector<uint16_t> NaiveGather(const std::vector<uint16_t>& table, int64_t vocab, int dim,
                                  const std::vector<int32_t>& ids) {
  std::vector<uint16_t> out(ids.size() * dim, Fp32ToBf16(0.0f));
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) continue;
    for (int i = 0; i < dim; ++i) out[t * dim + i] = table[ids[t] * dim + i];
  }
  return out;
}

TEST(CudaEmbeddingTest, GathersRowsExactly) {
  BEACON_REQUIRE_CUDA_DEVICE();
  struct Shape {
    int64_t vocab;
    int dim;
    int tokens;
  };
  for (const Shape& s : {Shape{1, 7, 3}, Shape{1000, 576, 37}, Shape{4096, 2560, 300}}) {
    const auto table = RandomBf16(s.vocab * s.dim, 5 + s.dim);
    std::mt19937 rng(s.tokens);
    std::vector<int32_t> ids(s.tokens);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % s.vocab);
    ids.back() = static_cast<int32_t>(s.vocab - 1);  // the last row is in range
    Result r;
    ASSERT_NO_FATAL_FAILURE(RunEmbedding(table, s.vocab, s.dim, ids, &r));
    EXPECT_EQ(r.out, NaiveGather(table, s.vocab, s.dim, ids)) << "vocab " << s.vocab;
    EXPECT_EQ(r.flag, 0) << "no id was out of range";
  }
}

TEST(CudaEmbeddingTest, OutOfRangeIdsGiveZerosAndRaiseTheFlag) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const int64_t vocab = 500;
  const int dim = 300;
  const auto table = RandomBf16(vocab * dim, 9);
  const std::vector<int32_t> ids = {
      3, -1, 499, 500, std::numeric_limits<int32_t>::max(), 0, std::numeric_limits<int32_t>::min()};
  Result r;
  ASSERT_NO_FATAL_FAILURE(RunEmbedding(table, vocab, dim, ids, &r));
  EXPECT_EQ(r.out, NaiveGather(table, vocab, dim, ids));
  EXPECT_EQ(r.flag, 1);
  // The rows of bad ids are +0.0 exactly (not NaN poison, not -0).
  for (int i = 0; i < dim; ++i) EXPECT_EQ(r.out[1 * dim + i], 0) << i;
}

TEST(CudaEmbeddingTest, RejectsBadArgumentsWithoutLaunching) {
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  auto* ids = reinterpret_cast<int32_t*>(uintptr_t{512});
  EXPECT_EQ(LaunchEmbedding(nullptr, 10, 8, ids, 1, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchEmbedding(p, 10, 8, nullptr, 1, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchEmbedding(p, 0, 8, ids, 1, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchEmbedding(p, 10, 0, ids, 1, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchEmbedding(p, 10, 8, ids, -1, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchEmbedding(p, 10, 8, ids, 0, p, nullptr, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace beacon
