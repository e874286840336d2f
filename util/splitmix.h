// SplitMix64 (Steele, Lea, Flood 2014): a bijective 64-bit mix whose outputs
// pass BigCrush for consecutive inputs. One definition for the places that
// derive reproducible values from integers: the random KV policy's scores,
// the prefix cache's hash chain, the needle evaluation's draws.
#ifndef BEACON_UTIL_SPLITMIX_H_
#define BEACON_UTIL_SPLITMIX_H_

#include <cstdint>

namespace beacon {

inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

// The generator's step for state `x`: adds the gamma, then the finaliser.
inline uint64_t SplitMix64(uint64_t x) {
  x += kSplitMixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace beacon

#endif  // BEACON_UTIL_SPLITMIX_H_
