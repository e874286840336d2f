"""tools/gpu_check_summary.py: the last table of tools/gpu-check.sh (issue 44), which only ever runs on a GPU
machine whose minutes are scarce, so a mistake in it is found here. A synthetic run folder with the first H200
run's Qwen3-4B rows (2026-12-04, docs/performance.md) and made-up kernel, eviction and sanitizer results."""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("gpu_check_summary", os.path.join(SRC, "tools",
                                                                                   "gpu_check_summary.py"))
summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summary)


def write(folder, name, obj):
    with open(os.path.join(folder, name), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def run(folder):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert summary.main([folder]) == 0
    return out.getvalue()


def line_with(text, *needles):
    hits = [line for line in text.splitlines() if all(n in line for n in needles)]
    assert len(hits) == 1, (needles, text)
    return hits[0]


def first_run(folder):
    write(folder, "bench-qwen3-4b.json", {
        "decode": [{"batch": 1, "context": 1024, "step_ms": 4.69, "roofline_fraction": 0.41},
                   {"batch": 64, "context": 1024, "step_ms": 11.77, "roofline_fraction": 0.354}],
        "beacon_overhead": {"batch": 16, "evict_ms": 0.4, "overhead": 0.02},
        "throughput_ratio": 1.70, "throughput_bound_ratio": 2.45, "throughput_output_len": 8192,
        "throughput": [{"policy": "full", "tokens_per_second": 2000, "bound_tokens_per_second": 3840},
                       {"policy": "beacon@2048", "tokens_per_second": 3400, "bound_tokens_per_second": 9393}]})
    write(folder, "peer-qwen3-4b.json", [{"batch": 1, "step_ms": 4.60}, {"batch": 64, "step_ms": 7.18}])


def test_bounds_beside_the_targets():
    with tempfile.TemporaryDirectory() as d:
        first_run(d)
        text = run(d)
        # Batch 64: 7.18 ms of the peer over 0.354 x 11.77 ms of bytes = 1.72x at most.
        row = line_with(text, "qwen3-4b @1024", "   64 ")
        assert "0.61x" in row and "1.72x" in row and ">= 1.5x peer: NOT met" in row
        assert "2.39x" in line_with(text, "qwen3-4b @1024", "    1 ")
        # Bytes grow 2.17x from batch 1 to 64; with batch 1 at 80% of its roofline, 1.73.
        ratio = line_with(text, "batch-64 step / batch-1 step")
        assert "2.51" in ratio and "both at the roofline 2.17" in ratio and "80% of it 1.73" in ratio
        tput = line_with(text, "throughput beacon/full at a fixed pool")
        assert "1.70x" in tput and "at the bandwidth bound 2.45x" in tput
        assert "full at 52% of its bound" in tput and "beacon@2048 at 36% of its bound" in tput


def test_eviction_scoring_and_sanitizer_lines():
    with tempfile.TemporaryDirectory() as d:
        first_run(d)
        write(d, "score-qwen3-4b.json", {"beacon_overhead": {"batch": 16, "evict_ms": 3.2, "overhead": 0.07}})
        write(d, "sanitize-memcheck.log", "========= ERROR SUMMARY: 0 errors\n[  PASSED  ] 20 tests.\n")
        write(d, "sanitize-racecheck.log", "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n"
              "[  FAILED  ] 1 test, listed below:\n")
        text = run(d)
        score = line_with(text, "one eviction scored on CUDA cores")
        assert "3.200 ms" in score and "tensor cores 0.400 ms (8.00x faster)" in score
        assert "0 errors/hazards" in line_with(text, "compute-sanitizer memcheck")
        race = line_with(text, "compute-sanitizer racecheck")
        assert "2 errors/hazards" in race and "FAILED" in race


def test_programmatic_launch_lines():
    """PDL at batch 1 is compared with the GEMV stage's batch 1 (PDL runs with the GEMV), above with the bench
    stage's cuBLAS rows; each with the peer and, at batch 1, the roofline target."""
    with tempfile.TemporaryDirectory() as d:
        first_run(d)
        write(d, "gemv-qwen3-4b.json", {"decode": [{"batch": 1, "context": 1024, "step_ms": 3.0,
                                                    "roofline_fraction": 0.64}]})
        write(d, "pdl-qwen3-4b.json", {"decode": [
            {"batch": 1, "context": 1024, "step_ms": 2.4, "roofline_fraction": 0.81},
            {"batch": 64, "context": 1024, "step_ms": 11.0, "roofline_fraction": 0.379}]})
        text = run(d)
        b1 = line_with(text, "qwen3-4b batch 1: programmatic launch")
        assert "2.400 ms" in b1 and "81.0% roofline (target >= 80%: met)" in b1, b1
        assert "1.25x GEMV without PDL (3.000 ms)" in b1 and "1.92x peer" in b1, b1
        b64 = line_with(text, "qwen3-4b batch 64: programmatic launch")
        assert "1.07x without PDL (11.770 ms)" in b64 and "0.65x peer" in b64 and "target" not in b64, b64


def test_alternative_decode_kernels_beside_the_cuda_core_one_and_the_peer():
    """Tensor-core and FlashInfer decode, each against the bench stage's CUDA-core rows and the peer, with
    their own throughput ratio against the target."""
    with tempfile.TemporaryDirectory() as d:
        first_run(d)
        write(d, "mma-qwen3-4b.json", {"decode": [{"batch": 64, "context": 1024, "step_ms": 9.0,
                                                   "roofline_fraction": 0.46}], "throughput_ratio": 2.1})
        write(d, "flashinfer-qwen3-4b.json", {"decode": [{"batch": 64, "context": 1024, "step_ms": 7.0,
                                                          "roofline_fraction": 0.60}], "throughput_ratio": 3.2})
        write(d, "fitc-qwen3-4b.json", {"decode": [{"batch": 64, "context": 1024, "step_ms": 5.885,
                                                    "roofline_fraction": 0.71}]})
        text = run(d)
        mma = line_with(text, "qwen3-4b batch 64: tensor-core decode")
        assert "9.000 ms" in mma and "1.31x cuda-core (11.770 ms)" in mma and "0.80x peer" in mma, mma
        fi = line_with(text, "qwen3-4b batch 64: FlashInfer decode")
        fitc = line_with(text, "qwen3-4b batch 64: FlashInfer tensor-core decode")
        assert "5.885 ms" in fitc and "2.00x cuda-core" in fitc and "1.22x peer" in fitc, fitc
        assert "7.000 ms" in fi and "60.0% roofline" in fi and "1.68x cuda-core" in fi and "1.03x peer" in fi, fi
        assert "2.10x (target >= 3.0x: NOT met)" in line_with(text, "with tensor-core decode: 2.10x")
        assert "3.20x (target >= 3.0x: met)" in line_with(text, "with FlashInfer decode: 3.20x")


def test_flashinfer_tests_apart_and_a_crashed_process():
    """The two test processes are counted apart; one that left a log but no results (a crash, a kill) says
    so."""
    def results(*cases):
        return {"tests": len(cases), "testsuites": [{"name": "S", "testsuite": [
            {"name": n, "result": r, "status": "RUN", **({"failures": [{"failure": "x"}]} if f else {})}
            for n, r, f in cases]}]}
    with tempfile.TemporaryDirectory() as d:
        write(d, "cuda_tests.json", results(("A", "COMPLETED", False), ("B", "SKIPPED", False)))
        write(d, "cuda_tests_flashinfer.json", results(("F", "COMPLETED", True), ("G", "COMPLETED", False)))
        text = run(d)
        assert "2 tests, 0 failed, 1 skipped" in line_with(text, "cuda_tests: ")
        assert "2 tests, 1 failed, 0 skipped" in line_with(text, "FlashInfer's (own process)")
        assert line_with(text, "FAILED S.F")
    with tempfile.TemporaryDirectory() as d:
        write(d, "cuda_tests.json", results(("A", "COMPLETED", False)))
        write(d, "cuda_tests_flashinfer.log", "Segmentation fault\n")
        assert "crashed?" in line_with(run(d), "FlashInfer's (own process): no results")


def test_a_killed_sanitizer_and_an_empty_folder():
    with tempfile.TemporaryDirectory() as d:
        write(d, "sanitize-racecheck.log", "========= COMPUTE-SANITIZER\n")  # killed by its timeout
        text = run(d)
        assert "no summary (killed?)" in line_with(text, "compute-sanitizer racecheck")
        assert "memcheck" not in text
        assert line_with(text, "cuda_tests: no results")


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
    print("gpu_check_summary: ok")
