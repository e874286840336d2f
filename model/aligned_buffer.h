// Heap buffers for weights that loaders own (converted vectors, generated
// dummy tensors, realigned copies), handed to ModelWeights::keep_alive.
#ifndef BEACON_MODEL_ALIGNED_BUFFER_H_
#define BEACON_MODEL_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace beacon {

// 64-byte aligned (a cache line; enough for any SIMD load the kernels do),
// uninitialised. Null when the allocation fails: callers turn that into
// RESOURCE_EXHAUSTED naming what they were allocating.
inline std::shared_ptr<uint8_t> AllocateAligned(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

}  // namespace beacon

#endif  // BEACON_MODEL_ALIGNED_BUFFER_H_
