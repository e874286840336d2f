#!/usr/bin/env python3
"""Where a CUDA decode step's time goes: Nsight Compute's per-kernel CSV, grouped into phases.

tools/gpu-check.sh runs `beacon-bench cuda --profile` under

    ncu --profile-from-start off --clock-control none --cache-control none --print-kernel-base function \
        --print-units base --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum

Each profiled range (bench/cuda_profile.h) starts with a `ProfileMarkerKernel` whose grid is (index + 1)
blocks; the bench's JSON lists the ranges' labels in that order ("profile_ranges"). This script splits the
CSV at the markers and, per range, sums each phase's kernel time and DRAM bytes, and sets the achieved
bandwidth against the device-to-device copy bandwidth measured in the same run (the physical limit of a
memory-bound phase):

    tools/python tools/ncu_summary.py ncu.csv bench.json [--json phases.json]

Phases: our kernels by name (kernels/cuda/); every other kernel is cuBLAS, named by its place in the
layer (engine/cuda/cuda_forward.cc: qkv after a norm that opens a layer, o_proj after attention, gate_up
after the norm that follows attention, down after SwiGLU, lm_head after the last norm). ncu serialises
kernels, so the sum of kernel times leaves out the gaps between kernels; the timed run's device ms per
step minus this sum is what launching costs (graph replay gaps, host-side waits).
"""
import argparse
import csv
import io
import json
import re
import sys

MARKER = "ProfileMarkerKernel"
# Our kernels (kernels/cuda/*.cu) and the phase each belongs to.
OWN = {
    "EmbeddingKernel": "embedding",
    "RmsNormKernel": "norm",
    "QkvRopeKvWriteKernel": "qkv_rope_kv_write",
    "BeaconObserveKernel": "beacon_observe",
    "GroupMeanKernel": "beacon_observe",
    "DecodeSplitKernel": "attention",
    "DecodeMmaSplitKernel": "attention",
    "DecodeMergeKernel": "attention",
    "PrefillKernel": "attention",
    "SwiGluKernel": "swiglu",
    "GatherRowsKernel": "lm_head",
    "ArgmaxKernel": "sampling",
    "SampleKernel": "sampling",
}
EVICTION = {"BeaconQueriesKernel", "StatsKernel", "ProbMaxKernel", "MaxPoolKernel", "CombineKernel",
            "SelectKeepKernel", "CompactKernel", "RopeKernel"}
UNIT_SCALE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1e-9, "usecond": 1e-6,
              "msecond": 1e-3, "second": 1}
ORDER = ["embedding", "norm", "qkv", "qkv_rope_kv_write", "beacon_observe", "attention", "o_proj", "gate_up",
         "swiglu", "down", "lm_head", "sampling"]


def base_name(name):
    """`void ns::Foo<1>(args)` or `Foo` -> `Foo` (ncu prints either, depending on --print-kernel-base)."""
    name = name.strip().replace("(anonymous namespace)", "anon")
    name = re.sub(r"\(.*$", "", name)
    name = re.sub(r"<.*$", "", name)
    return name.split("::")[-1].split()[-1] if name else name


def read_csv(text):
    """Rows of ncu's raw CSV as dicts: name, grid (x), seconds, bytes (DRAM read + write)."""
    lines = [l for l in text.splitlines() if l.startswith('"')]  # ncu's own log lines start with ==PROF==
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    if not reader:
        return []
    header = reader[0]
    col = {h: i for i, h in enumerate(header)}
    for need in ("Kernel Name", "Grid Size", "gpu__time_duration.sum", "dram__bytes_read.sum"):
        if need not in col:
            raise ValueError(f"ncu CSV: no column {need!r} (columns: {header[:12]}...)")
    body = reader[1:]
    units = {}
    if body and body[0][col["Kernel Name"]] == "":  # the units row
        units = {h: body[0][i].lower() for i, h in enumerate(header)}
        body = body[1:]

    def value(row, metric):
        if metric not in col:
            return 0.0
        raw = row[col[metric]].replace(",", "")
        return float(raw or 0) * UNIT_SCALE.get(units.get(metric, ""), 1)

    rows = []
    for row in body:
        grid = re.findall(r"\d+", row[col["Grid Size"]])
        rows.append(dict(name=base_name(row[col["Kernel Name"]]), grid=int(grid[0]) if grid else 0,
                         seconds=value(row, "gpu__time_duration.sum"),
                         bytes=value(row, "dram__bytes_read.sum") + value(row, "dram__bytes_write.sum")))
    return rows


def split_ranges(rows, labels):
    """{label: [rows]} from the marker rows; rows before the first marker are dropped."""
    ranges, current = {}, None
    for r in rows:
        if r["name"] == MARKER:
            index = r["grid"] - 1
            if not 0 <= index < len(labels):
                raise ValueError(f"marker grid {r['grid']} names no range ({len(labels)} labels)")
            current = ranges.setdefault(labels[index], [])
        elif current is not None:
            current.append(r)
    return ranges


def assign_phases(rows):
    """Each row's phase; cuBLAS kernels by the last of our kernels before them (module docstring)."""
    phases, norms, prev = [], 0, None
    for r in rows:
        n = r["name"]
        if n in OWN:
            phases.append(OWN[n])
            norms += n == "RmsNormKernel"
            # BeaconKV's observation runs beside the chain (decode steps: after the last layer,
            # before the LM head), so the GEMM after it belongs to what came before it.
            if OWN[n] != "beacon_observe":
                prev = n
        elif n in EVICTION:
            phases.append("evict:" + n)
            prev = n
        elif prev == "RmsNormKernel":
            # norm 1 opens layer 0; then per layer: after attention (even), after the FFN (odd).
            phases.append("gate_up" if norms % 2 == 0 else "qkv")
        elif prev in ("DecodeSplitKernel", "DecodeMmaSplitKernel", "DecodeMergeKernel", "PrefillKernel"):
            phases.append("o_proj")
        elif prev == "SwiGluKernel":
            phases.append("down")
        elif prev == "GatherRowsKernel":
            phases.append("lm_head")
        else:
            phases.append("other:" + n)
    # The GEMM after the last norm is the LM head, not a next layer's QKV: no QkvRope follows it.
    for i in range(len(rows) - 1, -1, -1):
        if rows[i]["name"] in OWN and phases[i] not in ("sampling", "lm_head"):
            break
        if phases[i] == "qkv":
            phases[i] = "lm_head"
    return phases


def summarize(rows, copy_bandwidth):
    """[(phase, kernels, seconds, bytes, achieved B/s, fraction of copy bandwidth)] and the total seconds."""
    agg = {}
    for r, p in zip(rows, assign_phases(rows)):
        a = agg.setdefault(p, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r["seconds"]
        a[2] += r["bytes"]
    order = {p: i for i, p in enumerate(ORDER)}
    out = []
    for p in sorted(agg, key=lambda p: (order.get(p, len(ORDER)), p)):
        k, s, b = agg[p]
        bw = b / s if s > 0 else 0.0
        out.append((p, k, s, b, bw, bw / copy_bandwidth if copy_bandwidth > 0 else 0.0))
    return out, sum(a[1] for a in agg.values())


def device_ms_for(bench, label):
    """The timed run's device ms per step for a decode range label ("decode full b=16 ctx=1024"), if any."""
    m = re.match(r"decode (\S+) b=(\d+) ctx=(\d+)", label)
    if not m:
        return None
    policy, batch, ctx = m.group(1), int(m.group(2)), int(m.group(3))
    for d in bench.get("decode", []):
        if policy == "full" and d["batch"] == batch and d["context"] == ctx:
            return d.get("device_step_ms")
    o = bench.get("beacon_overhead") or {}
    if o.get("batch") == batch:
        return o.get("full_device_step_ms" if policy == "full" else "observe_device_step_ms")
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --csv --page raw output")
    ap.add_argument("bench_json", help="beacon-bench cuda --json of the profiled run (labels, copy bandwidth)")
    ap.add_argument("--timed-json", help="the unprofiled run's JSON, for device ms per step (default: bench_json)")
    ap.add_argument("--json", help="also write the phases here")
    args = ap.parse_args(argv)
    bench = json.load(open(args.bench_json))
    timed = json.load(open(args.timed_json)) if args.timed_json else bench
    copy_bw = bench["copy_bandwidth_tbps"] * 1e12
    ranges = split_ranges(read_csv(open(args.csv, errors="replace").read()), bench.get("profile_ranges", []))
    if not ranges:
        print("ncu_summary: no profiled ranges in the CSV", file=sys.stderr)
        return 1
    result = {}
    for label, rows in ranges.items():
        table, total = summarize(rows, copy_bw)
        dev = device_ms_for(timed, label)
        print(f"\n{label}: {len(rows)} kernels, {total * 1e3:.3f} ms of kernel time"
              + (f"; timed device step {dev:.3f} ms, gaps {dev - total * 1e3:.3f} ms" if dev else ""))
        print(f"  {'phase':<20} {'kernels':>7} {'ms':>8} {'share':>6} {'MB':>9} {'TB/s':>6} {'of copy bw':>10}")
        for p, k, s, b, bw, frac in table:
            print(f"  {p:<20} {k:>7} {s * 1e3:>8.3f} {100 * s / total if total else 0:>5.1f}% {b / 1e6:>9.1f} "
                  f"{bw / 1e12:>6.2f} {100 * frac:>9.1f}%")
        result[label] = dict(kernel_ms=total * 1e3, device_step_ms=dev, phases=[
            dict(phase=p, kernels=k, ms=s * 1e3, bytes=b, tbps=bw / 1e12, of_copy_bandwidth=frac)
            for p, k, s, b, bw, frac in table])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
