#!/usr/bin/env python3
"""The table tools/gpu-check.sh prints last: issue 44's targets against what its run measured.

    tools/python tools/gpu_check_summary.py WORK_DIR     (the folder gpu-check.sh wrote, or its unpacked tarball)

Reads cuda_tests.json and cuda_tests_flashinfer.json, bench-<config>.json (beacon-bench cuda --json), peer-<config>.json
(tools/gpu_torch_peer.py --json), mma-<config>.json (the same decode and throughput with
--cuda-tensor-core-decode), flashinfer-<config>.json and fitc-<config>.json (the same with
--cuda-flashinfer-decode, and with it --cuda-tensor-core-decode),
gemv-<config>.json (batch 1 with --cuda-small-batch-gemv), pdl-<config>.json
(decode with --cuda-programmatic-launch --cuda-small-batch-gemv), score-<config>.json
(BeaconKV's overhead with --no-cuda-tensor-core-score), long-32k.json, serve*.json and sanitize-*.log
(compute-sanitizer) where present; a missing file is a missing row, never an error. Every ratio comes
from files of the same run.
"""
import glob
import json
import os
import re
import sys

# Issue 44's targets.
ROOF_B1 = 0.80       # batch 1: of the HBM roofline
PEER_RATIO = 1.5     # batch 16 and 64: tokens/s over the PyTorch peer's
B64_OVER_B1 = 1.6    # step time at batch 64 over batch 1 (Qwen3-4B, 1K)
OVERHEAD = 0.03      # BeaconKV at batch 16: of the decode step
TPUT_8K, TPUT_32K = 3.0, 4.3


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def mark(ok):
    return "met" if ok else "NOT met"


def bound_note(bench):
    """The throughput ratio at the bandwidth bound, and each policy's share of its own bound."""
    if "throughput_bound_ratio" not in bench:
        return ""
    shares = ", ".join(f"{t['policy']} at {100 * t['tokens_per_second'] / t['bound_tokens_per_second']:.0f}% "
                       "of its bound" for t in bench.get("throughput", []) if t.get("bound_tokens_per_second"))
    return f"; at the bandwidth bound {bench['throughput_bound_ratio']:.2f}x ({shares})"


def tests_line(work):
    lines = []
    for name, label in (("cuda_tests.json", "cuda_tests"),
                        ("cuda_tests_flashinfer.json", "cuda_tests, FlashInfer's (own process)")):
        t = load(os.path.join(work, name))
        if t is None:
            lines.append(f"{label}: no results" + (" (killed or crashed? see its .log)"
                                                   if os.path.exists(os.path.join(work, name[:-5] + ".log")) else ""))
            continue
        failed = [f"{s['name']}.{c['name']}" for s in t.get("testsuites", []) for c in s.get("testsuite", [])
                  if c.get("failures")]
        skipped = sum(1 for s in t.get("testsuites", []) for c in s.get("testsuite", [])
                      if c.get("result") == "SKIPPED" or c.get("status") == "NOTRUN")
        lines.append(f"{label}: {t.get('tests', 0)} tests, {len(failed)} failed, {skipped} skipped")
        lines += [f"  FAILED {f}" for f in failed]
    return "\n".join(lines)


def shape_rows(work):
    rows = []
    for path in sorted(glob.glob(os.path.join(work, "bench-*.json"))):
        cfg = os.path.basename(path)[len("bench-"):-len(".json")]
        bench = load(path) or {}
        peer = {r["batch"]: r for r in load(os.path.join(work, f"peer-{cfg}.json")) or []}
        decode = {d["batch"]: d for d in bench.get("decode", [])}
        for b, d in sorted(decode.items()):
            p = peer.get(b)
            rows.append(dict(config=cfg, batch=b, context=d["context"], step_ms=d["step_ms"],
                             device_ms=d.get("device_step_ms"), roofline=d["roofline_fraction"],
                             peer_ms=p["step_ms"] if p else None))
        rows.append(dict(config=cfg, bench=bench))
    return rows


def kernel_lines(work):
    """The kernel choices (tensor-core or FlashInfer decode, small-batch GEMV, eviction scoring) against the defaults and the
    peer, same run."""
    lines = []
    for path in sorted(glob.glob(os.path.join(work, "gemv-*.json"))):
        cfg = os.path.basename(path)[len("gemv-"):-len(".json")]
        base = {d["batch"]: d for d in (load(os.path.join(work, f"bench-{cfg}.json")) or {}).get("decode", [])}
        for d in (load(path) or {}).get("decode", []):
            s = base.get(d["batch"])
            vs = f"{s['step_ms'] / d['step_ms']:.2f}x cuBLAS ({s['step_ms']:.3f} ms)" if s else "no cuBLAS row"
            lines.append(f"{cfg} batch {d['batch']}: small-batch GEMV {d['step_ms']:.3f} ms, "
                         f"{100 * d['roofline_fraction']:.1f}% roofline (target >= {100 * ROOF_B1:.0f}%: "
                         f"{mark(d['roofline_fraction'] >= ROOF_B1)}), {vs}")
    for prefix, label in (("mma", "tensor-core decode"), ("flashinfer", "FlashInfer decode"),
                          ("fitc", "FlashInfer tensor-core decode")):
        for path in sorted(glob.glob(os.path.join(work, f"{prefix}-*.json"))):
            cfg = os.path.basename(path)[len(prefix) + 1:-len(".json")]
            alt = load(path) or {}
            simt = {d["batch"]: d for d in (load(os.path.join(work, f"bench-{cfg}.json")) or {}).get("decode", [])}
            peer = {r["batch"]: r for r in load(os.path.join(work, f"peer-{cfg}.json")) or []}
            for d in alt.get("decode", []):
                b = d["batch"]
                s, p = simt.get(b), peer.get(b)
                vs_simt = (f"{s['step_ms'] / d['step_ms']:.2f}x cuda-core ({s['step_ms']:.3f} ms)" if s
                           else "no cuda-core row")
                vs_peer = f"{p['step_ms'] / d['step_ms']:.2f}x peer" if p else "no peer row"
                lines.append(f"{cfg} batch {b}: {label} {d['step_ms']:.3f} ms, "
                             f"{100 * d['roofline_fraction']:.1f}% roofline, {vs_simt}, {vs_peer}")
            if "throughput_ratio" in alt:
                lines.append(f"{cfg}: throughput beacon/full with {label}: {alt['throughput_ratio']:.2f}x "
                             f"(target >= {TPUT_8K}x: {mark(alt['throughput_ratio'] >= TPUT_8K)})")
    for path in sorted(glob.glob(os.path.join(work, "score-*.json"))):
        cfg = os.path.basename(path)[len("score-"):-len(".json")]
        simt = (load(path) or {}).get("beacon_overhead")
        mma = (load(os.path.join(work, f"bench-{cfg}.json")) or {}).get("beacon_overhead")
        if not simt:
            continue
        vs = (f"tensor cores {mma['evict_ms']:.3f} ms ({simt['evict_ms'] / mma['evict_ms']:.2f}x faster), overhead "
              f"{100 * mma['overhead']:.2f}%" if mma else "no tensor-core row")
        lines.append(f"{cfg}: one eviction scored on CUDA cores {simt['evict_ms']:.3f} ms, overhead "
                     f"{100 * simt['overhead']:.2f}%; {vs}")
    return lines


def pdl_lines(work):
    """Programmatic dependent launch (with the matrix-vector projections at batch <= 8) against the same
    decode without it: the gemv stage at batch 1, the bench stage (cuBLAS) above; and the peer."""
    lines = []
    for path in sorted(glob.glob(os.path.join(work, "pdl-*.json"))):
        cfg = os.path.basename(path)[len("pdl-"):-len(".json")]
        bench = {d["batch"]: d for d in (load(os.path.join(work, f"bench-{cfg}.json")) or {}).get("decode", [])}
        gemv = {d["batch"]: d for d in (load(os.path.join(work, f"gemv-{cfg}.json")) or {}).get("decode", [])}
        peer = {r["batch"]: r for r in load(os.path.join(work, f"peer-{cfg}.json")) or []}
        for d in (load(path) or {}).get("decode", []):
            b = d["batch"]
            base, what = (gemv[b], "GEMV without PDL") if b in gemv else (bench.get(b), "without PDL")
            vs = f"{base['step_ms'] / d['step_ms']:.2f}x {what} ({base['step_ms']:.3f} ms)" if base else "no base row"
            p = peer.get(b)
            vs_peer = f"{p['step_ms'] / d['step_ms']:.2f}x peer" if p else "no peer row"
            target = f" (target >= {100 * ROOF_B1:.0f}%: {mark(d['roofline_fraction'] >= ROOF_B1)})" if b == 1 else ""
            lines.append(f"{cfg} batch {b}: programmatic launch {d['step_ms']:.3f} ms, "
                         f"{100 * d['roofline_fraction']:.1f}% roofline{target}, {vs}, {vs_peer}")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    work = argv[0]
    print(tests_line(work))
    # "bound/peer": the peer's step over this step's bytes at the measured copy bandwidth, i.e. the most
    # speed over the peer any kernel could reach on that row (a target above it is out of physical reach).
    print(f"\n{'shape':<28} {'batch':>5} {'step ms':>8} {'device':>8} {'roofline':>8} {'peer ms':>8} "
          f"{'speed/peer':>10} {'bound/peer':>10}  target")
    for r in shape_rows(work):
        if "bench" in r:
            b = r["bench"]
            o = b.get("beacon_overhead")
            if o:
                print(f"{r['config']}: BeaconKV overhead at batch {o['batch']}: {100 * o['overhead']:.2f}% "
                      f"(target <= {100 * OVERHEAD:.0f}%: {mark(o['overhead'] <= OVERHEAD)})")
            if "throughput_ratio" in b:
                print(f"{r['config']}: throughput beacon/full at a fixed pool, "
                      f"{b.get('throughput_output_len', 8192)} outputs: {b['throughput_ratio']:.2f}x "
                      f"(target >= {TPUT_8K}x: {mark(b['throughput_ratio'] >= TPUT_8K)}){bound_note(b)}")
            dec = {d["batch"]: d["step_ms"] for d in b.get("decode", [])}
            if r["config"] == "qwen3-4b" and 1 in dec and 64 in dec:
                ratio = dec[64] / dec[1]
                roof = {d["batch"]: d["roofline_fraction"] * d["step_ms"] for d in b.get("decode", [])}
                print(f"{r['config']}: batch-64 step / batch-1 step {ratio:.2f} (target <= {B64_OVER_B1}: "
                      f"{mark(ratio <= B64_OVER_B1)}; both at the roofline {roof[64] / roof[1]:.2f}, batch 1 at "
                      f"{100 * ROOF_B1:.0f}% of it {roof[64] / (roof[1] / ROOF_B1):.2f})")
            continue
        speed = r["peer_ms"] / r["step_ms"] if r["peer_ms"] else None
        bound = r["peer_ms"] / (r["roofline"] * r["step_ms"]) if r["peer_ms"] else None
        if r["batch"] == 1:
            target = f">= {100 * ROOF_B1:.0f}% roofline: {mark(r['roofline'] >= ROOF_B1)}"
        else:
            target = f">= {PEER_RATIO}x peer: {mark(speed is not None and speed >= PEER_RATIO)}"
        dev = f"{r['device_ms']:.3f}" if r["device_ms"] else "-"
        print(f"{r['config'] + ' @' + str(r['context']):<28} {r['batch']:>5} {r['step_ms']:>8.3f} {dev:>8} "
              f"{100 * r['roofline']:>7.1f}% {r['peer_ms'] if r['peer_ms'] is None else round(r['peer_ms'], 3)!s:>8} "
              f"{'-' if speed is None else f'{speed:.2f}x':>10} "
              f"{'-' if bound is None else f'{bound:.2f}x':>10}  {target}")
    for line in kernel_lines(work) + pdl_lines(work):
        print(line)
    long = load(os.path.join(work, "long-32k.json"))
    if long and "throughput_ratio" in long:
        print(f"32K outputs (R1-Distill-Qwen-7B shape): beacon/full {long['throughput_ratio']:.2f}x "
              f"(target >= {TPUT_32K}x: {mark(long['throughput_ratio'] >= TPUT_32K)}){bound_note(long)}")
    for tool in ("memcheck", "racecheck"):
        try:
            with open(os.path.join(work, f"sanitize-{tool}.log")) as f:
                log = f.read()
        except OSError:
            continue
        found = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:errors?|hazards?)", log)
        tests = re.findall(r"^\[ *(PASSED|FAILED) *\].*", log, re.M)
        errors = sum(int(n) for n in found)
        print(f"compute-sanitizer {tool}: " + (f"{errors} errors/hazards" if found else "no summary (killed?)") +
              (f"; tests {', '.join(tests)}" if tests else ""))
    serve = load(os.path.join(work, "serve.json"))
    if serve:
        print(f"beacon-serve --device {serve.get('device', 'cuda')}: {'ok' if serve.get('ok') else 'FAILED'} "
              f"(blocks used after full/beacon: {serve.get('blocks_used_after_full')}/"
              f"{serve.get('blocks_used_after_beacon')}, server exit {serve.get('server_exit')})")
        tput = {}
        for policy in ("full", "beacon"):
            s = (load(os.path.join(work, f"serve-{policy}.json")) or {}).get("summary")
            if not s:
                continue
            tput[policy] = s["output_throughput"]
            print(f"  {policy:<6}: {s['succeeded']}/{s['requests']} ok, {s['failed']} failed; "
                  f"{s['output_throughput']:.0f} output tok/s; TTFT p50/p99 {s['ttft_ms']['median']:.0f}/"
                  f"{s['ttft_ms']['p99']:.0f} ms; ITL p50/p99 {s['itl_ms']['median']:.1f}/{s['itl_ms']['p99']:.1f} ms")
        if len(tput) == 2 and tput["full"] > 0:
            print(f"  beacon/full output throughput on the same pool: {tput['beacon'] / tput['full']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
