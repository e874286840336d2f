#include "kernels/cpu/packed_group.h"

#include <cstring>

#include "kernels/cpu/packed_matrix.h"

namespace beacon {

void PackGroupRow(DType t, int64_t r, int64_t cols, const void* data, uint8_t* group) {
  const QuantGroupFormat f = GroupFormatOf(t);
  const PackedGroupLayout L = MakePackedGroupLayout(f);
  const int l = static_cast<int>(r % kPackRows);
  const void* row = static_cast<const uint8_t*>(data) + DTypeRowBytes(t, cols) * r;
  QuantGroup q;
  for (int64_t sb = 0; sb < cols / f.group; ++sb) {
    DecodeGroup(t, row, sb, &q);
    uint8_t* base = group + sb * L.sb_bytes;
    for (int b = 0; b < L.blocks; ++b) {
      uint8_t* blk = base + b * L.block_bytes;
      const uint8_t* u = q.u + 32 * b;
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          blk[j * 64 + 4 * l + i] = static_cast<uint8_t>((u[4 * j + i] & 0xF) | (u[16 + 4 * j + i] & 0xF) << 4);
        }
      }
      for (int p = 0; p < L.hbits; ++p) {
        for (int k = 0; k < 8; ++k) {
          const int e0 = k < 4 ? 4 * k : 16 + 4 * (k - 4);
          uint64_t mask;
          uint8_t* dst = blk + L.mask_off() + 64 * p + 8 * k;
          std::memcpy(&mask, dst, 8);
          for (int i = 0; i < 4; ++i) {
            if ((u[e0 + i] >> (4 + p)) & 1) mask |= uint64_t{1} << (4 * l + i);
          }
          std::memcpy(dst, &mask, 8);
        }
      }
      for (int h = 0; h < L.n_sc; ++h) blk[L.sc_off() + 16 * h + l] = static_cast<uint8_t>(q.sc[2 * b + h]);
      for (int h = 0; h < L.n_mn; ++h) blk[L.mn_off() + 16 * h + l] = static_cast<uint8_t>(q.mn[2 * b + h]);
    }
    std::memcpy(base + L.d_off() + 4 * l, &q.d, 4);
    if (L.dmin) std::memcpy(base + L.dmin_off() + 4 * l, &q.dmin, 4);
  }
}

}  // namespace beacon
