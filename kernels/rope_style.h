// The two RoPE pairings, shared by the model config (model/), the CPU
// kernels and the CUDA kernels, so that one enum names them everywhere.
//   kInterleaved: pairs (x[2i], x[2i + 1])          GPT-J; llama.cpp ROPE_TYPE_NORM
//   kHalf:        pairs (x[i], x[i + head_dim / 2])  GPT-NeoX; HF rotate_half
#ifndef BEACON_KERNELS_ROPE_STYLE_H_
#define BEACON_KERNELS_ROPE_STYLE_H_

#include <cstdint>

namespace beacon {

enum class RopeStyle : int32_t {
  kInterleaved = 0,
  kHalf = 1,
};

}  // namespace beacon

#endif  // BEACON_KERNELS_ROPE_STYLE_H_
