"""Our C++ dequantiser against the `gguf` package's, bit for bit, on real files.

For every tensor of every file below, the CRC-32 of the engine's float32
dequantisation (`beacon-gguf crc`, DequantizeRow) must equal the CRC-32 of
gguf.quants.dequantize's output, and that of the NumPy reference's own
dequantiser (gguf_numpy, written from the layouts): three implementations,
one answer, for Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the legacy types.

Files: tests/fixtures/kquant/*.gguf (committed: llama.cpp quantisations of
the default model cut to one layer, and slices.gguf, which holds rows of
every type from the whole-model variants and from the Gemma 3 270M Q4_K_M
file quantised by others, plus random Q2_K/Q3_K blocks); and, when `make
kquant-fixtures` has cached them, every tensor of models/kquant/*.gguf (the
whole default model requantised by llama.cpp, and the whole Gemma file).

Env: BEACON_BIN (dir with beacon-gguf), BEACON_SOURCE_DIR.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_numpy as gn  # noqa: E402

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

SRC = os.environ.get("BEACON_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.environ.get("BEACON_BIN", os.path.join(SRC, "build", "bin"))


def engine_crcs(path: str) -> dict[str, tuple[str, int]]:
    out = subprocess.run([os.path.join(BIN, "beacon-gguf"), "crc", path], capture_output=True, text=True,
                         timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"beacon-gguf crc {path} failed: {out.stderr.strip()}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["name"]: (r["type"], r["crc32"]) for r in rows}


def crc(a: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(a, dtype="<f4").tobytes())


def check_file(path: str) -> tuple[int, list[str], dict[str, int]]:
    f = gn.GGUFModelFile(path)
    ours = engine_crcs(path)
    failures, counts = [], {}
    for name in f.names():
        tid = f.type_of(name)
        raw = f.raw_bytes(name)
        n = int(np.prod(f.shape(name)))
        ref = quants.dequantize(raw, QT(tid)).reshape(-1)
        mine = gn.dequantize_bytes(raw, tid, n)
        label = gn.TYPE_INFO[tid][0]
        counts[label] = counts.get(label, 0) + 1
        if name not in ours:
            failures.append(f"{name}: the engine did not read it")
            continue
        want = crc(ref)
        if ours[name][1] != want:
            failures.append(f"{name} ({label}): engine crc {ours[name][1]} != gguf {want}")
        if crc(mine) != want:
            failures.append(f"{name} ({label}): gguf_numpy differs from gguf (max |diff| "
                            f"{float(np.nanmax(np.abs(mine - ref))):.3g})")
    return len(f.names()), failures, counts


def main() -> int:
    fixtures = sorted(glob.glob(os.path.join(SRC, "tests/fixtures/kquant/*.gguf")))
    if not any(p.endswith("slices.gguf") for p in fixtures):
        print("FAIL: tests/fixtures/kquant/slices.gguf is missing (make kquant-fixtures)")
        return 1
    cached = sorted(glob.glob(os.path.join(SRC, "models/kquant/*.gguf")))
    if not cached:
        print("note: models/kquant/ is empty: whole-model variants and the Gemma file not checked "
              "(make kquant-fixtures caches them)")
    failures = []
    for path in fixtures + cached:
        n, fails, counts = check_file(path)
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"{os.path.relpath(path, SRC)}: {n} tensors ({summary}): {'ok' if not fails else 'FAIL'}")
        failures += [f"{os.path.basename(path)}: {x}" for x in fails]
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures[:50]))
        return 1
    print("OK: engine, gguf and gguf_numpy agree bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
