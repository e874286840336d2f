"""Runs the C++ engine's `beacon-logits` tool and reads its output.

Contract (apps/beacon_logits_main.cc):
    beacon-logits --model PATH --token-ids 1,2,3 --out FILE [--chunk N] [--companions K]
writes raw little-endian float32 [n_tokens, vocab] logits of every position
and prints one JSON line {"n_tokens":..,"vocab":..} on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import numpy as np


class EngineMissing(RuntimeError):
    pass


def beacon_logits_path() -> str:
    bin_dir = os.environ.get("BEACON_BIN")
    if not bin_dir:
        src = os.environ.get("BEACON_SOURCE_DIR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..")
        bin_dir = os.path.join(src, "build", "bin")
    path = os.path.join(bin_dir, "beacon-logits")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise EngineMissing(
            f"beacon-logits is not built: no executable at {path} "
            "(set BEACON_BIN to the directory holding the C++ binaries)")
    return path


def run_beacon_logits(model: str, tokens, chunk: int = 0, companions: int = 0,
                      timeout_s: float = 600.0, kv_cache_dtype: str | None = None) -> np.ndarray:
    """Logits [n_tokens, vocab] from the engine. chunk 0 = all at once.
    kv_cache_dtype: the engine's --kv-cache-dtype (None: its default, bf16)."""
    exe = beacon_logits_path()
    with tempfile.TemporaryDirectory(prefix="beacon-logits-") as tmp:
        out = os.path.join(tmp, "logits.f32")
        cmd = [exe, "--model", model, "--token-ids", ",".join(str(int(t)) for t in tokens),
               "--out", out]
        if chunk:
            cmd += ["--chunk", str(chunk)]
        if companions:
            cmd += ["--companions", str(companions)]
        if kv_cache_dtype:
            cmd += ["--kv-cache-dtype", kv_cache_dtype]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: "
                               f"{proc.stderr.strip()[-2000:]}")
        lines = [l for l in proc.stdout.splitlines() if l.strip().startswith("{")]
        if not lines:
            raise RuntimeError(f"beacon-logits printed no JSON line; stdout: {proc.stdout[-500:]!r}")
        info = json.loads(lines[-1])
        n, vocab = int(info["n_tokens"]), int(info["vocab"])
        if n != len(tokens):
            raise RuntimeError(f"beacon-logits reports n_tokens={n}, sent {len(tokens)}")
        data = np.fromfile(out, dtype="<f4")
        if data.size != n * vocab:
            raise RuntimeError(f"{out}: {data.size} floats, expected {n}x{vocab}")
        return data.reshape(n, vocab)


def compare_logits(c: np.ndarray, ref: np.ndarray, *, mean_tol: float, p90_tol: float,
                   pos_tol: float, gap: float) -> tuple[str, list[str]]:
    """Engine logits `c` against reference `ref` ([T, vocab] each).

    Returns a one-line summary and a list of violated checks:
      relative RMS error per position, rms(c - r) / rms(r): its mean over
      positions <= mean_tol, its 90th percentile <= p90_tol, every position
      <= pos_tol; the engine's argmax equals the reference's at every position
      where the reference's top-1 minus top-2 exceeds `gap`; all finite.
    """
    from numpy_model import rel_rms_per_row, top2_gap

    if c.shape != ref.shape:
        return f"shape {c.shape} != {ref.shape}", [f"shape {c.shape}, expected {ref.shape}"]
    if not np.all(np.isfinite(c)):
        bad = np.argwhere(~np.isfinite(c))[0]
        return "non-finite logits", [f"non-finite logit at position {bad[0]}, token {bad[1]}"]
    err = rel_rms_per_row(c, ref)
    top, g = top2_gap(ref)
    conf = g > gap
    agree = (np.argmax(c, axis=-1) == top)
    p90 = float(np.quantile(err, 0.9))
    summary = (f"relRMS mean {err.mean():.2e} p90 {p90:.2e} max {err.max():.2e} (pos {int(err.argmax())}) "
               f"max|err| {np.abs(c.astype(np.float64) - ref).max():.3g} "
               f"top1 {int(np.sum(agree & conf))}/{int(conf.sum())} confident, "
               f"{int(agree.sum())}/{agree.size} all")
    fails = []
    if err.mean() > mean_tol:
        fails.append(f"mean relative RMS {err.mean():.3e} > {mean_tol:g}")
    if p90 > p90_tol:
        fails.append(f"p90 relative RMS {p90:.3e} > {p90_tol:g}")
    if err.max() > pos_tol:
        worst = np.argsort(err)[::-1][:5]
        fails.append(f"relative RMS > {pos_tol:g} at positions "
                     + ", ".join(f"{int(p)}:{err[p]:.3f}" for p in worst if err[p] > pos_tol))
    miss = np.nonzero(conf & ~agree)[0]
    if miss.size:
        fails.append(f"top-1 differs at confident positions {miss[:10].tolist()} "
                     f"(ref gap {[round(float(g[p]), 2) for p in miss[:10]]})")
    return summary, fails
