"""tools/ncu_summary.py: ncu's raw CSV split at the profile markers and grouped into the phases of a
decode step (issue 44). A synthetic CSV in ncu's shape: two layers, a units row in Kbyte / usecond."""
import importlib.util
import json
import os
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("ncu_summary", os.path.join(SRC, "tools", "ncu_summary.py"))
ncu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu)

HEADER = ['"ID"', '"Kernel Name"', '"Grid Size"', '"dram__bytes_read.sum"', '"dram__bytes_write.sum"',
          '"gpu__time_duration.sum"']
UNITS = ['""', '""', '""', '"Kbyte"', '"Kbyte"', '"usecond"']


def row(i, name, grid, read_kb, us):
    return [f'"{i}"', f'"{name}"', f'"({grid}, 1, 1)"', f'"{read_kb}"', '"0"', f'"{us}"']


def layer(gemm):
    return [(gemm, 100, 10), ("QkvRopeKvWriteKernel", 1, 1), ("void beacon::DecodeSplitKernel<128, 8, true>(x)", 4, 5),
            ("DecodeMergeKernel", 1, 1), (gemm, 50, 5), ("RmsNormKernel", 1, 1), (gemm, 200, 20),
            ("SwiGluKernel", 1, 1), (gemm, 100, 10), ("RmsNormKernel", 1, 1)]


def step(gemm="nvjet_tst_64x8"):
    return [("EmbeddingKernel", 1, 1), ("RmsNormKernel", 1, 1)] + layer(gemm) + layer(gemm) + [
        (gemm, 300, 30), ("ArgmaxKernel", 1, 1)]


def csv_text(ranges):
    lines = ["==PROF== Connected to process", ",".join(HEADER), ",".join(UNITS)]
    i = 0
    lines.append(",".join(row(i, "SomethingBeforeTheFirstRange", 9, 1, 1)))
    for index, kernels in enumerate(ranges):
        i += 1
        lines.append(",".join(row(i, "ProfileMarkerKernel", index + 1, 0, 1)))
        for name, kb, us in kernels:
            i += 1
            lines.append(",".join(row(i, name, 1, kb, us)))
    return "\n".join(lines) + "\n"


def test_base_name():
    assert ncu.base_name("void beacon::(anonymous namespace)::DecodeSplitKernel<128, 8, true>(P, int)") == \
        "DecodeSplitKernel"
    assert ncu.base_name("RmsNormKernel") == "RmsNormKernel"


def test_phases_of_a_step():
    rows = ncu.read_csv(csv_text([step()]))
    ranges = ncu.split_ranges(rows, ["decode full b=1 ctx=8"])
    assert list(ranges) == ["decode full b=1 ctx=8"]
    kernels = ranges["decode full b=1 ctx=8"]
    phases = ncu.assign_phases(kernels)
    gemms = [p for r, p in zip(kernels, phases) if r["name"].startswith("nvjet")]
    assert gemms == ["qkv", "o_proj", "gate_up", "down"] * 2 + ["lm_head"], gemms
    table, total = ncu.summarize(kernels, copy_bandwidth=1e12)
    by = {p: (k, s, b) for p, k, s, b, _, _ in table}
    assert by["attention"][0] == 4                       # split + merge, two layers
    assert abs(by["qkv"][2] - 2 * 100e3) < 1e-6          # Kbyte scaled to bytes
    assert abs(by["lm_head"][1] - 30e-6) < 1e-12         # usecond scaled to seconds
    assert abs(total - sum(us for _, _, us in step()) * 1e-6) < 1e-12
    # Achieved bandwidth of the down projections: 200 KB in 20 us = 10 GB/s = 1% of a 1 TB/s copy.
    down = [t for t in table if t[0] == "down"][0]
    assert abs(down[4] - 1e10) < 1 and abs(down[5] - 0.01) < 1e-9


def test_opt_in_kernels_and_deferred_observation():
    # Tensor-core decode attention, the small-batch GEMV in place of cuBLAS, and BeaconKV's
    # observation of every layer after the last one, just before the LM head.
    kernels = [(n.replace("DecodeSplitKernel", "DecodeMmaSplitKernel"), kb, us) for n, kb, us in step("GemvKernel<1>")]
    kernels = kernels[:-2] + [("GroupMeanKernel", 1, 1), ("BeaconObserveKernel", 2, 3)] + kernels[-2:]
    rows = ncu.read_csv(csv_text([kernels]))
    phases = ncu.assign_phases(ncu.split_ranges(rows, ["decode beacon b=1 ctx=8"])["decode beacon b=1 ctx=8"])
    gemms = [p for (n, _, _), p in zip(kernels, phases) if n.startswith("GemvKernel")]
    assert gemms == ["qkv", "o_proj", "gate_up", "down"] * 2 + ["lm_head"], gemms
    assert phases.count("attention") == 4 and phases.count("beacon_observe") == 2, phases


def test_ranges_and_eviction():
    evict = [("BeaconQueriesKernel", 1, 2), ("StatsKernel", 5, 3), ("SelectKeepKernel", 1, 1), ("CompactKernel", 9, 4)]
    rows = ncu.read_csv(csv_text([step(), evict]))
    ranges = ncu.split_ranges(rows, ["decode full b=16 ctx=2048", "evict"])
    assert len(ranges["decode full b=16 ctx=2048"]) == len(step())
    assert ncu.assign_phases(ranges["evict"]) == ["evict:" + n for n, _, _ in evict]
    try:
        ncu.split_ranges(rows, ["only one label"])
        assert False, "a marker past the labels must be refused"
    except ValueError as e:
        assert "names no range" in str(e)


def test_main_writes_json():
    with tempfile.TemporaryDirectory() as d:
        csv_path, bench_path, out = (os.path.join(d, n) for n in ("ncu.csv", "bench.json", "phases.json"))
        open(csv_path, "w").write(csv_text([step()]))
        json.dump({"copy_bandwidth_tbps": 4.0, "profile_ranges": ["decode full b=1 ctx=8"],
                   "decode": [{"batch": 1, "context": 8, "device_step_ms": 0.5}]}, open(bench_path, "w"))
        assert ncu.main([csv_path, bench_path, "--json", out]) == 0
        phases = json.load(open(out))["decode full b=1 ctx=8"]
        assert phases["device_step_ms"] == 0.5
        assert {p["phase"] for p in phases["phases"]} >= {"qkv", "attention", "lm_head", "sampling"}


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
    print("ncu_summary: ok")
