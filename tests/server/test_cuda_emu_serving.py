"""beacon-serve --device cuda end to end, on the CPU (issue 44: the server had never answered a request
from the CUDA engine). beacon-serve-emu is beacon-serve linked with the emulated build of the CUDA
backend (tests/cuda_emu: the real engine/cuda and kernels/cuda sources, their kernels run as CPU fibers;
an emulation, not a GPU), so the real gRPC and HTTP front ends, scheduler and KV layer drive the CUDA
engine as they do on a GPU. A tiny random-weight Qwen2 (tests/data/tiny-r1-qwen2.json) behind the
R1-Distill-Qwen-7B vocabulary. Checks:

- Greedy continuations against the CPU backend's on the same weights, under full and under BeaconKV
  evicting on the device: equal up to the first token where the CPU's own top two are within NEAR_TIE
  nats. The device keeps activations in bf16 and the CPU in f32 (tests/cuda/cuda_backend_test.cc:
  relative logits error ~1e-2 here), which flips near-ties and nothing else; a wrong kernel or a
  wrong slot mapping diverges at once with a clear gap. Under BeaconKV the rule holds until the
  first eviction could have run (`budget` generated tokens). After that a near-tied score may keep
  different slots on the two engines, so one prompt may part there without a near-tie at the token;
  a broken scoring, selection or compaction on the device parts them all (a planted compaction bug,
  V rows copied from K, parted 4 of 6).
- A stream cancelled mid-way, after its evictions began, frees its device KV blocks; the next
  request is served.
- --gpu-memory-utilization: the pool takes the share's bytes left after weights, buffers and state
  (a larger share adds exactly its extra bytes' worth of slots), and the flag's errors.
- tools/gpu-serve-check.sh, the GPU run's serve stage, against it: beacon-loadtest full then beacon
  on one pool, no failed request, every block free after each run, BeaconKV evictions on the device,
  a clean exit on SIGTERM."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.request

from serve_util import BIN, SRC, Server, pb

SERVER = "beacon-serve-emu"
MODEL = "dummy:" + os.path.join(SRC, "tests/data/tiny-r1-qwen2.json")
VOCAB = os.path.join(SRC, "tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf")
PROMPTS = ["Hello there, how are you", "The plan written at the start", "1 2 3 4 5 6 7 8", "Once upon a time",
           "Recap every answer in order.", "def f(x): return x + 1"]
MAX_TOKENS = 64
BUDGET, INTERVAL = 32, 8  # the server's smallest budget (sinks + window)
# A near-tie: the CPU's top logprob minus the device's token's, on the CPU. The device's logprob error
# on these models is below 0.01 nats (first H200 run, issue 44: worst 0.0072).
NEAR_TIE = 0.05


def greedy(srv, prompt, **kv):
    """(tokens, the top-3 logprobs of each position, prompt tokens) of a greedy completion."""
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, "logprobs": 3, **kv}
    status, out = srv.http_post("/v1/completions", json.dumps(body))
    assert status == 200, (status, out)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "length", choice
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == MAX_TOKENS, lp["tokens"]
    return lp["tokens"], lp["top_logprobs"], out["usage"]["prompt_tokens"]


def compare(emu, cpu, strict_until, label, **kv):
    """Checks the device's continuation of every prompt against the CPU's (module docstring). Returns
    (tokens that agreed, summed over the prompts; prompts whose first difference, at or after
    strict_until, is no near-tie: a different choice of slots, or a broken eviction path)."""
    agreed, unexplained = 0, 0
    for prompt in PROMPTS:
        got, _, n_prompt = greedy(emu, prompt, **kv)
        want, tops, _ = greedy(cpu, prompt, **kv)
        i = next((k for k in range(MAX_TOKENS) if got[k] != want[k]), MAX_TOKENS)
        agreed += i
        where = f"{label}: prompt {prompt!r} ({n_prompt} tokens), first difference at generated token {i}"
        if i < MAX_TOKENS:
            gap = max(tops[i].values()) - tops[i].get(got[i], float("-inf"))
            where += f", CPU gap {gap:.4f} nats"
            assert i >= strict_until or gap <= NEAR_TIE, \
                f"{where}: device {got[i]!r}, CPU {want[i]!r}: more than {NEAR_TIE}"
            unexplained += gap > NEAR_TIE
        print(where if i < MAX_TOKENS else f"{label}: prompt {prompt!r}: all {MAX_TOKENS} tokens agree")
    return agreed, unexplained


def metric(srv, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on /metrics")


def test_greedy_against_cpu_and_cancel():
    flags = ["--tokenizer", VOCAB, "--kv-interval", str(INTERVAL)]
    with Server("--device", "cuda", *flags, model=MODEL, binary=SERVER, threads=1) as emu, \
            Server("--device", "cpu", *flags, model=MODEL, threads=1) as cpu:
        full, _ = compare(emu, cpu, MAX_TOKENS, "full", kv_policy="full")
        assert metric(emu, "beacon_kv_evictions_total") == 0
        beacon, unexplained = compare(emu, cpu, BUDGET, "beacon", kv_policy="beacon", kv_budget=BUDGET)
        evictions = metric(emu, "beacon_kv_evictions_total")
        assert evictions >= len(PROMPTS), evictions  # every request evicted on the device
        # After evictions: one prompt may part on a near-tied score (the engines keep different slots);
        # a broken scoring, selection or compaction on the device parts them all.
        assert unexplained <= 1, f"{unexplained} of {len(PROMPTS)} prompts parted after an eviction"
        # Most positions agree: a near-tie now and then, not a divergence at every prompt's start.
        assert full >= len(PROMPTS) * MAX_TOKENS // 2, full
        assert beacon >= len(PROMPTS) * BUDGET // 2, beacon
        emu.wait_idle()
        assert metric(emu, "beacon_kv_blocks_used") == 0

        # A stream cancelled while it decodes, past its first evictions, gives its device blocks back.
        stream = emu.stub.Generate(pb.GenerateRequest(
            text="Count to a thousand.",
            stopping=pb.StoppingCriteria(max_tokens=400, ignore_eos=True),
            kv=pb.KvOptions(policy="beacon", budget=BUDGET)), timeout=120)
        streamed = 0
        while streamed < BUDGET + 3 * INTERVAL:
            streamed += len(next(stream).token_ids)
        evicted_before = metric(emu, "beacon_kv_evictions_total")
        stream.cancel()
        emu.wait_idle()
        assert metric(emu, "beacon_kv_blocks_used") == 0
        assert evicted_before > evictions, "the stream had not evicted when it was cancelled"
        after, _, _ = greedy(emu, PROMPTS[0], kv_policy="full")
        before, _, _ = greedy(cpu, PROMPTS[0], kv_policy="full")
        assert after[:4] == before[:4], (after, before)
        # The emulator counts what it checks (bounds, races, launch rules) and prints the count at exit.
        emu.terminate()
        assert emu.proc.wait(timeout=60) == 0, emu.read_log()[-3000:]
        assert "EMU summary: 0 error(s)" in emu.read_log(), emu.read_log()[-3000:]
    print(f"greedy against the CPU: {full} tokens agreed under full, {beacon} under beacon; cancel: OK")


# The tiny model's device KV slot: K and V in bf16 and an int32 position, per layer and KV head
# (engine/cuda/device_kv.h DeviceKvStorage::BytesFor): (2 x 16 x 2 + 4) x 2 layers x 2 KV heads.
SLOT_BYTES = (2 * 16 * 2 + 4) * 2 * 2
EMU_DEVICE_BYTES = 16 << 30  # the emulator's one device (tests/cuda_emu/device.cc)


def pool_slots(share):
    """The pool beacon-serve-emu makes with --gpu-memory-utilization `share`: (slots, its log line), after
    checking that it serves a request and frees the blocks."""
    with Server("--device", "cuda", "--tokenizer", VOCAB, "--gpu-memory-utilization", str(share), model=MODEL,
                binary=SERVER, threads=1) as srv:
        info = srv.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
        line = next(ln for ln in srv.read_log().splitlines() if "KV pool from --gpu-memory-utilization" in ln)
        assert f"{info.kv_pool_tokens} slots" in line, (info.kv_pool_tokens, line)
        greedy(srv, PROMPTS[0], kv_policy="beacon", kv_budget=BUDGET)
        srv.wait_idle()
        return info.kv_pool_tokens, line


def test_pool_from_device_memory():
    # The pool takes what the share leaves after the weights, workspaces, the largest step's buffers and
    # the BeaconKV state: a larger share adds exactly its extra bytes' worth of slots (within a block
    # and the arrays' alignment), and every slot is whole blocks.
    small, line = pool_slots(0.03)
    large, _ = pool_slots(0.05)
    print(line.split(" info ")[-1])
    assert small > 0 and small % 16 == 0 and large % 16 == 0, (small, large)
    extra = 0.02 * EMU_DEVICE_BYTES / SLOT_BYTES
    assert abs((large - small) - extra) <= 2 * 16, (large - small, extra)
    # Errors name the flag and stop start-up: a share the weights and buffers already exceed, a CPU
    # device (its KV lives in host memory), and both ways of sizing the pool at once.
    for flags, needle in [(["--device", "cuda", "--gpu-memory-utilization", "0.01"], "leaves no room for a KV pool"),
                          (["--device", "cpu", "--gpu-memory-utilization", "0.5"], "--device cpu keeps it in host"),
                          (["--device", "cuda", "--gpu-memory-utilization", "0.5", "--kv-pool-tokens", "4096"],
                           "both size the KV pool")]:
        p = subprocess.run([os.path.join(BIN, SERVER), "--model", MODEL, "--tokenizer", VOCAB, "--host", "127.0.0.1",
                            "--grpc-port", "0", "--http-port", "0", *flags], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode != 0 and needle in p.stdout + p.stderr, (flags, p.returncode, p.stderr[-2000:])
    print(f"pool from device memory: {small} slots at 0.03, {large} at 0.05; the errors: OK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gpu_serve_stage_rehearsed():
    work = tempfile.mkdtemp(prefix="serve-emu-")
    env = dict(os.environ, SERVE_SERVER=SERVER, SERVE_MODEL=MODEL, SERVE_REQUESTS="12", SERVE_OUTPUT="64",
               SERVE_BUDGET="32", SERVE_INTERVAL="16", SERVE_CONCURRENCY="6", SERVE_GRPC_PORT=str(free_port()),
               SERVE_HTTP_PORT=str(free_port()))
    p = subprocess.run([os.path.join(SRC, "tools/gpu-serve-check.sh"), BIN, work], env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    with open(os.path.join(work, "serve.json")) as f:
        out = json.load(f)
    assert out["ok"] is True and out["device"] == "cuda" and out["server_exit"] == 0, out
    assert out["blocks_used_after_full"] == "0" and out["blocks_used_after_beacon"] == "0", out
    for policy in ("full", "beacon"):
        with open(os.path.join(work, f"serve-{policy}.json")) as f:
            run = json.load(f)
        summary = run["summary"]
        assert summary["succeeded"] == 12 and summary["failed"] == 0, summary
    with open(os.path.join(work, "serve-metrics-beacon.txt")) as f:
        evictions = [float(line.rsplit(" ", 1)[1]) for line in f if line.startswith("beacon_kv_evictions_total")]
    assert evictions and evictions[0] > 0, evictions
    with open(os.path.join(work, "serve.log")) as f:
        log = f.read()
    assert "EMU summary: 0 error(s)" in log, log[-3000:]
    print(f"gpu-serve-check.sh on the emulated CUDA backend: OK ({evictions[0]:.0f} evictions)")


if __name__ == "__main__":
    if os.environ.get("BEACON_CUDA_EMU") == "OFF":  # CMake builds beacon-serve-emu where the emulator runs
        print("cuda emu serving: skipped (BEACON_CUDA_EMU is OFF: the emulator needs x86-64 Linux)")
        sys.exit(0)
    test_greedy_against_cpu_and_cancel()
    test_pool_from_device_memory()
    test_gpu_serve_stage_rehearsed()
    print("cuda emu serving: OK")
