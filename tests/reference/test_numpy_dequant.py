"""Our own GGUF dequantisation (gguf_numpy) against gguf.quants.dequantize.

Three layers of evidence, so that neither implementation is trusted blindly:
  1. hand-built blocks with known values (nibble order, sign, offsets);
  2. a few tensors of every type present in the default model;
  3. synthetic tensors of every type gguf_numpy supports (F32, F16, BF16,
     Q8_0, Q4_0, Q4_1), quantised by gguf.quants.quantize or made of random
     block bytes, so types the default model lacks are covered too.
Both sides compute the same float32 products, so we require exact equality.
Run: .venv/bin/python tests/reference/test_numpy_dequant.py
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_numpy as gn  # noqa: E402  (sets BLAS threads first)
from numpy_model import default_model_path  # noqa: E402

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

TYPE_TO_QT = {gn.F32: QT.F32, gn.F16: QT.F16, gn.BF16: QT.BF16,
              gn.Q8_0: QT.Q8_0, gn.Q4_0: QT.Q4_0, gn.Q4_1: QT.Q4_1}


def fp16_bytes(x: float) -> np.ndarray:
    return np.array([x], dtype="<f2").view(np.uint8)


class KnownBlocks(unittest.TestCase):
    """Expected values written out by hand from the block layouts."""

    def test_q8_0(self):
        q = np.arange(-16, 16, dtype=np.int8)
        raw = np.concatenate([fp16_bytes(0.25), q.view(np.uint8)])
        np.testing.assert_array_equal(gn.dequantize_bytes(raw, gn.Q8_0, 32), 0.25 * q.astype(np.float32))

    def test_q4_0(self):
        j = np.arange(16, dtype=np.uint8)
        qs = j | ((15 - j) << 4)  # low nibble j, high nibble 15-j
        raw = np.concatenate([fp16_bytes(0.5), qs])
        want = 0.5 * (np.concatenate([j, 15 - j]).astype(np.float32) - 8)
        np.testing.assert_array_equal(gn.dequantize_bytes(raw, gn.Q4_0, 32), want)

    def test_q4_1(self):
        j = np.arange(16, dtype=np.uint8)
        qs = ((j * 3) % 16) | (j << 4)
        raw = np.concatenate([fp16_bytes(2.0), fp16_bytes(-1.5), qs])
        want = 2.0 * np.concatenate([(j * 3) % 16, j]).astype(np.float32) - 1.5
        np.testing.assert_array_equal(gn.dequantize_bytes(raw, gn.Q4_1, 32), want)

    def test_bf16_f16(self):
        vals = np.array([1.0, -2.5, 3.140625, 0.0], dtype=np.float32)
        bf = (vals.view(np.uint32) >> 16).astype("<u2").view(np.uint8)
        np.testing.assert_array_equal(gn.dequantize_bytes(bf, gn.BF16, 4), vals)
        np.testing.assert_array_equal(gn.dequantize_bytes(vals.astype("<f2").view(np.uint8), gn.F16, 4), vals)

    def test_size_mismatch_is_an_error(self):
        with self.assertRaises(ValueError):
            gn.dequantize_bytes(np.zeros(33, np.uint8), gn.Q8_0, 32)


class AgainstGgufQuants(unittest.TestCase):
    """Bitwise equality with gguf.quants.dequantize."""

    summary: list[str] = []

    def check(self, raw: np.ndarray, type_id: int, n: int, label: str):
        ours = gn.dequantize_bytes(raw, type_id, n)
        theirs = quants.dequantize(np.ascontiguousarray(raw).reshape(1, -1), TYPE_TO_QT[type_id]).reshape(-1)
        self.assertEqual(ours.shape, theirs.shape, label)
        diff = float(np.max(np.abs(ours - theirs.astype(np.float32)))) if n else 0.0
        AgainstGgufQuants.summary.append(f"  {label:40s} n={n:>9d} max|diff|={diff:.3g}")
        np.testing.assert_array_equal(ours, theirs.astype(np.float32), err_msg=label)

    def test_default_model_tensors(self):
        f = gn.GGUFModelFile(default_model_path())
        by_type: dict[int, list[str]] = {}
        for name in f.names():
            by_type.setdefault(f.type_of(name), []).append(name)
        self.assertTrue(by_type, "no tensors in model")
        for type_id, names in sorted(by_type.items()):
            self.assertIn(type_id, gn.TYPE_INFO, f"model has unsupported type {type_id}")
            picks = sorted({names[0], names[len(names) // 2], names[-1]})
            for name in picks:
                t = f._tensors[name]
                self.check(f.raw_bytes(name), type_id, int(t.n_elements),
                           f"{gn.TYPE_INFO[type_id][0]} {name}")
                # Shape: NumPy order is the reverse of the ggml dims.
                self.assertEqual(f.tensor(name, cache=False).shape,
                                 tuple(int(x) for x in reversed(list(t.shape))))

    def test_synthetic_all_types(self):
        rng = np.random.default_rng(1234)
        x = (rng.standard_normal(32 * 64) * 3).astype(np.float32)
        x[:32] = 0.0  # an all-zero block (d = 0)
        for type_id in (gn.Q8_0, gn.Q4_0, gn.Q4_1, gn.BF16):
            raw = quants.quantize(x.reshape(1, -1), TYPE_TO_QT[type_id]).reshape(-1).view(np.uint8)
            self.check(raw, type_id, x.size, f"{gn.TYPE_INFO[type_id][0]} quantised randn")
        self.check(x.astype("<f2").view(np.uint8), gn.F16, x.size, "F16 randn")
        self.check(x.view(np.uint8), gn.F32, x.size, "F32 randn")
        # Random block bytes hit every nibble/int8 pattern; scales kept finite.
        for type_id in (gn.Q8_0, gn.Q4_0, gn.Q4_1):
            _, blk, bsz = gn.TYPE_INFO[type_id]
            b = rng.integers(0, 256, size=(256, bsz), dtype=np.uint8)
            n_scales = 2 if type_id == gn.Q4_1 else 1
            for s in range(n_scales):
                b[:, 2 * s:2 * s + 2] = rng.uniform(-2, 2, 256).astype("<f2").view(np.uint8).reshape(256, 2)
            self.check(b.reshape(-1), type_id, 256 * blk, f"{gn.TYPE_INFO[type_id][0]} random bytes")


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=1)
    print("dequant comparisons (ours vs gguf.quants.dequantize):")
    print("\n".join(AgainstGgufQuants.summary))
    sys.exit(0 if prog.result.wasSuccessful() else 1)
