"""Independent GGUF tensor access for the NumPy reference forward pass.

The PyPI `gguf` package is used only to parse the container (metadata and the
tensor directory: name, type, shape, absolute data offset). Every tensor's raw
bytes are read from the file here and dequantised by the code in this module,
so that a bug shared between `gguf.quants` and the C++ engine cannot hide.
test_numpy_dequant.py cross-checks this code against gguf.quants.dequantize.

Shapes follow NumPy order: a GGUF tensor with ggml dims ne = [ne0, ne1]
(ne0 contiguous) becomes an array of shape (ne1, ne0). For a projection matrix
that is (out_features, in_features), so y = x @ W.T.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # other builds share this machine's 2 cores

import numpy as np
from gguf import GGUFReader

# ggml type ids (ggml.h enum ggml_type); fixed by the file format.
F32, F16, Q4_0, Q4_1, Q8_0, BF16 = 0, 1, 2, 3, 8, 30
Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K = 6, 7, 10, 11, 12, 13, 14

QK = 32  # elements per block for Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0
QK_K = 256  # elements per K-quant super-block

# type id -> (name, elements per block, bytes per block)
TYPE_INFO = {
    F32: ("F32", 1, 4),
    F16: ("F16", 1, 2),
    BF16: ("BF16", 1, 2),
    Q8_0: ("Q8_0", QK, 2 + QK),
    Q4_0: ("Q4_0", QK, 2 + QK // 2),
    Q4_1: ("Q4_1", QK, 4 + QK // 2),
    Q5_0: ("Q5_0", QK, 2 + 4 + QK // 2),
    Q5_1: ("Q5_1", QK, 4 + 4 + QK // 2),
    Q2_K: ("Q2_K", QK_K, 16 + 64 + 4),
    Q3_K: ("Q3_K", QK_K, 32 + 64 + 12 + 2),
    Q4_K: ("Q4_K", QK_K, 4 + 12 + 128),
    Q5_K: ("Q5_K", QK_K, 4 + 12 + 32 + 128),
    Q6_K: ("Q6_K", QK_K, 128 + 64 + 16 + 2),
}

# Element e of a K-quant super-block, as (byte index, shift) into its packed
# arrays: written out from ggml's dequantize_row_q*_K loops (element order
# e = 128 h + 32 j + i for 2-bit fields, 64 c + 32 k + i for 4-bit ones).
_E = np.arange(QK_K)
_2BIT_BYTE, _2BIT_SHIFT = 32 * (_E // 128) + _E % 32, 2 * ((_E % 128) // 32)
_4BIT_BYTE, _4BIT_SHIFT = 32 * (_E // 64) + _E % 32, 4 * ((_E % 64) // 32)
_Q6_LOW_BYTE, _Q6_LOW_SHIFT = 64 * (_E // 128) + _E % 64, 4 * ((_E % 128) // 64)
_HBIT_BYTE, _HBIT_SHIFT = _E % 32, _E // 32  # Q3_K hmask, Q5_K qh


def _k4_scales_mins(sc12: np.ndarray):
    """uint8 [n, 12] -> (scale, min) int [n, 8]: 6-bit values, the first four
    in the low bits of bytes 0-3 / 4-7, the last four split between a nibble
    of bytes 8-11 and the top two bits of bytes 0-3 (scales) / 4-7 (mins)."""
    q = sc12.astype(np.int32)
    sc = np.empty((q.shape[0], 8), np.int32)
    mn = np.empty((q.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = q[:, j] & 63
            mn[:, j] = q[:, j + 4] & 63
        else:
            sc[:, j] = (q[:, j + 4] & 15) | ((q[:, j - 4] >> 6) << 4)
            mn[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, mn


def _q3k_scales(sc12: np.ndarray) -> np.ndarray:
    """uint8 [n, 12] -> int [n, 16] signed scales (6 bits, bias 32)."""
    q = sc12.astype(np.int32)
    s = np.arange(16)
    low = np.where(s < 8, q[:, s % 8] & 15, q[:, s % 8] >> 4)
    high = (q[:, 8 + s % 4] >> (2 * (s // 4))) & 3
    return (low | (high << 4)) - 32


def _dequantize_k(b: np.ndarray, type_id: int) -> np.ndarray:
    """K-quant super-blocks uint8 [n, bytes] -> float32 [n, 256], with the
    float products formed as ggml forms them: (d * scale) * q - (dmin * min)."""
    f = np.float32
    if type_id == Q2_K:
        scales, qs = b[:, 0:16].astype(np.int32), b[:, 16:80].astype(np.int32)
        d, dmin = _fp16(b[:, 80:82]), _fp16(b[:, 82:84])
        q = (qs[:, _2BIT_BYTE] >> _2BIT_SHIFT) & 3
        dl = d[:, None] * (scales & 15).astype(f)
        ml = dmin[:, None] * (scales >> 4).astype(f)
        return dl[:, _E // 16] * q.astype(f) - ml[:, _E // 16]
    if type_id == Q3_K:
        hmask, qs = b[:, 0:32].astype(np.int32), b[:, 32:96].astype(np.int32)
        sc = _q3k_scales(b[:, 96:108])
        d = _fp16(b[:, 108:110])
        low = (qs[:, _2BIT_BYTE] >> _2BIT_SHIFT) & 3
        hbit = (hmask[:, _HBIT_BYTE] >> _HBIT_SHIFT) & 1
        q = low - 4 * (1 - hbit)
        dl = d[:, None] * sc.astype(f)
        return dl[:, _E // 16] * q.astype(f)
    if type_id in (Q4_K, Q5_K):
        d, dmin = _fp16(b[:, 0:2]), _fp16(b[:, 2:4])
        sc, mn = _k4_scales_mins(b[:, 4:16])
        qs = b[:, -128:].astype(np.int32)
        q = (qs[:, _4BIT_BYTE] >> _4BIT_SHIFT) & 15
        if type_id == Q5_K:
            qh = b[:, 16:48].astype(np.int32)
            q = q | (((qh[:, _HBIT_BYTE] >> _HBIT_SHIFT) & 1) << 4)
        ds = d[:, None] * sc.astype(f)
        dm = dmin[:, None] * mn.astype(f)
        return ds[:, _E // 32] * q.astype(f) - dm[:, _E // 32]
    # Q6_K
    ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
    scales = b[:, 192:208].view(np.int8).astype(f)
    d = _fp16(b[:, 208:210])
    low = (ql[:, _Q6_LOW_BYTE] >> _Q6_LOW_SHIFT) & 15
    high = (qh[:, _2BIT_BYTE] >> _2BIT_SHIFT) & 3
    q = (low | (high << 4)) - 32
    ds = d[:, None] * scales
    return ds[:, _E // 16] * q.astype(f)


def _fifth_bits(qh4: np.ndarray) -> np.ndarray:
    """uint8 [n, 4] (a little-endian uint32) -> int [n, 32]: bit j."""
    j = np.arange(32)
    return (qh4.astype(np.int32)[:, j // 8] >> (j % 8)) & 1


def _fp16(raw: np.ndarray) -> np.ndarray:
    """uint8 [..., 2] little-endian IEEE half -> float32 [...]."""
    return np.ascontiguousarray(raw).view("<f2")[..., 0].astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """uint8 [n, 16] packed -> int [n, 32]: element j<16 is the low nibble of
    byte j, element j+16 the high nibble of byte j."""
    lo = qs & 0x0F
    hi = qs >> 4
    return np.concatenate([lo, hi], axis=1).astype(np.float32)


def dequantize_bytes(raw: np.ndarray, type_id: int, n_elements: int) -> np.ndarray:
    """Dequantise a flat uint8 buffer holding `n_elements` of ggml type
    `type_id` into a flat float32 array. REQUIRES len(raw) == exact byte size."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    if type_id not in TYPE_INFO:
        raise ValueError(f"unsupported ggml type {type_id}")
    name, blk, bsz = TYPE_INFO[type_id]
    if n_elements % blk:
        raise ValueError(f"{name}: {n_elements} elements is not a multiple of {blk}")
    n_blocks = n_elements // blk
    if raw.size != n_blocks * bsz:
        raise ValueError(f"{name}: expected {n_blocks * bsz} bytes, got {raw.size}")

    if type_id == F32:
        return raw.view("<f4").astype(np.float32)
    if type_id == F16:
        return raw.view("<f2").astype(np.float32)
    if type_id == BF16:
        # bf16 is the top half of an IEEE float32.
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)

    b = raw.reshape(n_blocks, bsz)
    if type_id == Q8_0:
        d = _fp16(b[:, 0:2])
        q = b[:, 2:].view(np.int8).astype(np.float32)
        out = d[:, None] * q
    elif type_id == Q4_0:
        d = _fp16(b[:, 0:2])
        out = d[:, None] * (_nibbles(b[:, 2:]) - 8.0)
    elif type_id == Q4_1:
        d = _fp16(b[:, 0:2])
        m = _fp16(b[:, 2:4])
        out = d[:, None] * _nibbles(b[:, 4:]) + m[:, None]
    elif type_id == Q5_0:
        d = _fp16(b[:, 0:2])
        q = _nibbles(b[:, 6:]) + 16 * _fifth_bits(b[:, 2:6])
        out = d[:, None] * (q - 16.0)
    elif type_id == Q5_1:
        d, m = _fp16(b[:, 0:2]), _fp16(b[:, 2:4])
        q = _nibbles(b[:, 8:]) + 16 * _fifth_bits(b[:, 4:8])
        out = d[:, None] * q.astype(np.float32) + m[:, None]
    else:
        out = _dequantize_k(b, type_id)
    return out.astype(np.float32).reshape(-1)


class GGUFModelFile:
    """A GGUF file: metadata plus dequantised tensors (cached after first use)."""

    def __init__(self, path: str):
        self.path = path
        self.reader = GGUFReader(path)
        self._tensors = {t.name: t for t in self.reader.tensors}
        self._cache: dict[str, np.ndarray] = {}
        self._file = np.memmap(path, dtype=np.uint8, mode="r")

    # ---- metadata -------------------------------------------------------
    def has_meta(self, key: str) -> bool:
        return key in self.reader.fields

    def meta(self, key: str, default=None):
        f = self.reader.fields.get(key)
        if f is None:
            if default is None:
                raise KeyError(f"GGUF metadata key {key!r} missing")
            return default
        return f.contents()

    def tokens(self) -> list[str]:
        return self.meta("tokenizer.ggml.tokens")

    # ---- tensors --------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._tensors

    def names(self) -> list[str]:
        return list(self._tensors)

    def type_of(self, name: str) -> int:
        return int(self._tensors[name].tensor_type)

    def shape(self, name: str) -> tuple[int, ...]:
        """NumPy-order shape (reverse of the ggml ne dims)."""
        return tuple(int(x) for x in reversed(list(self._tensors[name].shape)))

    def raw_bytes(self, name: str) -> np.ndarray:
        t = self._tensors[name]
        type_id = int(t.tensor_type)
        _, blk, bsz = TYPE_INFO.get(type_id, (None, None, None))
        if blk is None:
            raise ValueError(f"{name}: unsupported ggml type {t.tensor_type!r}")
        n_bytes = int(t.n_elements) // blk * bsz
        off = int(t.data_offset)
        if off + n_bytes > self._file.size:
            raise ValueError(f"{name}: data runs past end of file")
        return np.asarray(self._file[off:off + n_bytes])

    def tensor(self, name: str, cache: bool = True) -> np.ndarray:
        """Dequantised float32 tensor in NumPy-order shape."""
        if name in self._cache:
            return self._cache[name]
        t = self._tensors[name]
        flat = dequantize_bytes(self.raw_bytes(name), int(t.tensor_type), int(t.n_elements))
        arr = flat.reshape(self.shape(name))
        if cache:
            self._cache[name] = arr
        return arr


def write_dequantized_copy(src: GGUFModelFile, dst_path: str) -> None:
    """Write `src` as an all-F32 GGUF at dst_path: same metadata (file_type set
    to ALL_F32), every tensor dequantised by this module. An engine run on the
    copy uses plain float matmuls (no activation quantisation), so it must match
    the NumPy reference to float32 rounding: the tight end-to-end check."""
    import gguf  # the writer only; values come from our own dequantisation

    arch = src.meta("general.architecture")
    w = gguf.GGUFWriter(dst_path, arch=arch)
    for key, field in src.reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # written by GGUFWriter itself
        vtype = field.types[0]
        sub = field.types[1] if len(field.types) > 1 else None
        value = 0 if key == "general.file_type" else field.contents()  # 0 = ALL_F32
        w.add_key_value(key, value, vtype, sub)
    for name in src.names():
        w.add_tensor(name, src.tensor(name, cache=False))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
