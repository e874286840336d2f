// How the CPU matrix kernels walk a batch of tokens (internal to
// kernels/cpu): tiles of a fixed width, then the tokens left over as one
// tile of their own count. A weight block is unpacked once per tile, so the
// rest costs one more unpacking, not one per token (batch 3 took 1.6-1.7x
// the time of batch 4 when the rest went one token at a time; docs/
// performance.md, "Any batch, not only multiples of four"). Each tile width
// is a compile-time constant, so the kernels keep their accumulators in
// registers.
#ifndef BEACON_KERNELS_CPU_TOKEN_TILES_H_
#define BEACON_KERNELS_CPU_TOKEN_TILES_H_

#include <cstdint>

namespace beacon::token_tiles {

// tile.template operator()<N>(t) for the rest tile [t, t + rest), rest in [0, N].
template <int N, typename Tile>
inline void Rest(int rest, int64_t t, Tile& tile) {
  if constexpr (N > 0) {
    if (rest == N) {
      tile.template operator()<N>(t);
    } else {
      Rest<N - 1>(rest, t, tile);
    }
  }
}

// Covers tokens [t, n_tokens): tile.template operator()<Wide>(t) for each
// full tile, then one tile of the remaining 1..Wide-1 tokens, in order.
template <int Wide, typename Tile>
inline void ForEach(int64_t t, int64_t n_tokens, Tile&& tile) {
  for (; t + Wide <= n_tokens; t += Wide) tile.template operator()<Wide>(t);
  Rest<Wide - 1>(static_cast<int>(n_tokens - t), t, tile);
}

}  // namespace beacon::token_tiles

#endif  // BEACON_KERNELS_CPU_TOKEN_TILES_H_
