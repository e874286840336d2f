#include "bench/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReps = 5;
constexpr int64_t kChunks = 256;

}  // namespace

double MeasureCopyBandwidth(ThreadPool* pool, size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    const auto t0 = Clock::now();
    pool->ParallelFor(kChunks, 1, [&](int64_t begin, int64_t end, int) {
      const size_t c = bytes / kChunks;
      std::memcpy(b.data() + begin * c, a.data() + begin * c, (end - begin) * c);
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * bytes / s);
  }
  return best + (b[bytes / 2] == 42 ? 1 : 0);  // keep the copy observable
}

double MeasureReadBandwidth(ThreadPool* pool, size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<uint64_t*>(std::aligned_alloc(kHuge, size));
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, size, MADV_HUGEPAGE);  // advice: 4 KiB pages where THP is off
#endif
  const size_t words = size / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) p[i] = i;
  const size_t per_chunk = words / kChunks;
  std::vector<uint64_t> sums(kChunks);
  double best = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    const auto t0 = Clock::now();
    pool->ParallelFor(kChunks, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t c = begin; c < end; ++c) {
        // Eight independent sums: the loop is bound by loads, not by an add chain.
        uint64_t s[8] = {};
        const uint64_t* q = p + c * per_chunk;
        for (size_t i = 0; i + 8 <= per_chunk; i += 8) {
          for (int k = 0; k < 8; ++k) s[k] += q[i + k];
        }
        sums[c] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
      }
    });
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(per_chunk * kChunks * sizeof(uint64_t)) / sec);
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  std::free(p);
  return best + (total == 42 ? 1 : 0);  // keep the sums observable
}

}  // namespace beacon
