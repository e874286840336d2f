#!/usr/bin/env python3
"""llama.cpp decode throughput on the same workload as `beacon-bench decode`.

    tools/llamacpp_bench.py --model models/default.gguf --batches 1,4,16,64 \
        --threads 2 --prompt-len 32 --steps 32 --json out.json
    tools/llamacpp_bench.py --model models/default.gguf --prefill 1024,2048,4096 \
        --threads 2 --json out.json

--prefill measures prompt processing instead (the workload of `beacon-bench
prefill`): for each length N, one sequence's prompt token[i] = (i*31 + 7) %
n_vocab (sequence 0's prompt below, the ids beacon-bench uses), in a context
of N + 16 cells with n_batch = n_ubatch = N, so llama.cpp takes the whole
prompt in one llama_decode and one compute graph (its fastest way; logits for
the last token only). Only that llama_decode is timed, after an untimed
64-token warm-up in a fresh context; tokens/s = N / elapsed, the best of
--prefill-repeats runs (the KV cache is cleared between them).

Uses llama-cpp-python's low-level C API bindings (no high-level `Llama` class),
so the timed loop is llama_decode plus one numpy argmax per step. The workload
mirrors apps/beacon_bench_main.cc:

  * B sequences (seq ids 0..B-1), sequence b gets the prompt
    token[i] = (b*131 + i*31 + 7) % n_vocab for i < prompt_len,
    prefilled one sequence per llama_decode call (not timed);
  * the first decode token of each sequence is the argmax of its last prompt
    logits; one warm-up decode step (not timed);
  * `steps` timed decode steps, each a single llama_decode of B tokens (one per
    sequence, all requesting logits) followed by a greedy argmax per sequence.

tokens/s = B * steps / elapsed; step_ms = elapsed / steps.

By default every sequence gets its own KV stream (kv_unified = false), which
is what llama.cpp does for independent parallel sequences and what keeps the
attention cost per sequence (a unified cache makes every token of the batch
attend over the cells of all B sequences, masked). --kv-unified measures the
other layout.

llama.cpp's CPU backend (this build uses OpenMP) splits every op statically
over the threads and meets at a barrier after it; by default the threads spin
there. When the machine is busy (other builds on a 2-core box) a descheduled
thread stalls every barrier and steps become 10-40x slower and erratic;
--omp-wait passive makes them sleep instead. The table shows the median and
minimum step next to the mean so such noise is visible.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np

L = None  # llama_cpp, imported in main() once OMP_WAIT_POLICY is settled


def prompt_tokens(b, prompt_len, n_vocab):
    return [(b * 131 + i * 31 + 7) % n_vocab for i in range(prompt_len)]


class Batch:
    """A llama_batch sized for `capacity` tokens, each in one sequence."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.b = L.llama_batch_init(capacity, 0, 1)

    def fill(self, tokens, positions, seq_ids, want_logits):
        n = len(tokens)
        assert n <= self.capacity
        b = self.b
        for i in range(n):
            b.token[i] = tokens[i]
            b.pos[i] = positions[i]
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq_ids[i]
            b.logits[i] = 1 if want_logits[i] else 0
        b.n_tokens = n

    def free(self):
        L.llama_batch_free(self.b)


def check_decode(rc, what):
    if rc != 0:
        raise RuntimeError(f"llama_decode failed ({what}): rc={rc}")


def bench_batch(model, n_vocab, batch, prompt_len, steps, threads, kv_unified, flash_attn):
    cp = L.llama_context_default_params()
    per_seq = prompt_len + steps + 8
    n_ctx = batch * per_seq
    cp.n_ctx = n_ctx
    cp.n_batch = max(512, batch, prompt_len)
    cp.n_ubatch = cp.n_batch
    cp.n_seq_max = batch
    cp.n_threads = threads
    cp.n_threads_batch = threads
    cp.kv_unified = kv_unified
    cp.flash_attn_type = flash_attn
    cp.no_perf = True
    cp.embeddings = False
    # Allow one output per sequence in every call (a decode step wants B).
    if hasattr(cp, "n_outputs_max"):
        cp.n_outputs_max = 0
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError(f"llama_init_from_model failed for batch {batch}")
    bat = None
    try:
        got_ctx = L.llama_n_ctx(ctx)
        got_seq = L.llama_n_seq_max(ctx)
        if got_seq < batch:
            raise RuntimeError(f"context allows {got_seq} sequences, need {batch}")
        if got_ctx < batch * (prompt_len + steps + 1):
            raise RuntimeError(f"context has {got_ctx} cells, need {batch * (prompt_len + steps + 1)}")
        L.llama_memory_clear(L.llama_get_memory(ctx), True)

        bat = Batch(max(batch, prompt_len))
        last = np.zeros(batch, dtype=np.int64)

        # Prefill, one sequence per call, logits only for the last prompt token.
        for b in range(batch):
            toks = prompt_tokens(b, prompt_len, n_vocab)
            bat.fill(toks, list(range(prompt_len)), [b] * prompt_len,
                     [i == prompt_len - 1 for i in range(prompt_len)])
            check_decode(L.llama_decode(ctx, bat.b), f"prefill seq {b}")
            row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
            last[b] = int(row.argmax())

        seq_ids = list(range(batch))
        all_logits = [True] * batch
        b_struct = bat.b
        tok_arr = np.ctypeslib.as_array(b_struct.token, shape=(bat.capacity,))
        pos_arr = np.ctypeslib.as_array(b_struct.pos, shape=(bat.capacity,))

        # Fixed per-step fields set once; only tokens and positions change.
        bat.fill(last.tolist(), [prompt_len] * batch, seq_ids, all_logits)

        def step(pos):
            tok_arr[:batch] = last
            pos_arr[:batch] = pos
            b_struct.n_tokens = batch
            check_decode(L.llama_decode(ctx, b_struct), f"decode at pos {pos}")
            # Outputs are stored in batch order, n_vocab floats each; read them
            # all as one (batch, n_vocab) view and argmax per row.
            base = L.llama_get_logits_ith(ctx, 0)
            logits = np.ctypeslib.as_array(base, shape=(batch, n_vocab))
            np.argmax(logits, axis=1, out=last)
            return logits

        # Warm-up step, also used to check the logits layout and values.
        logits = step(prompt_len)
        if batch > 1:
            p_last = ctypes.cast(L.llama_get_logits_ith(ctx, batch - 1), ctypes.c_void_p).value
            p_first = ctypes.cast(L.llama_get_logits_ith(ctx, 0), ctypes.c_void_p).value
            if p_last - p_first != (batch - 1) * n_vocab * 4:
                raise RuntimeError("logits of the batch are not contiguous in batch order")
        if not np.isfinite(logits).all():
            raise RuntimeError("non-finite logits in the warm-up step")

        seq0 = []
        marks = [0.0] * (steps + 1)
        clock = time.perf_counter
        t0 = marks[0] = clock()
        for i in range(1, steps + 1):
            step(prompt_len + i)
            seq0.append(int(last[0]))
            marks[i] = clock()
        sec = marks[steps] - t0
        per_step = np.diff(np.array(marks)) * 1e3
        return {
            "batch": batch,
            "step_ms": sec / steps * 1e3,
            "tokens_per_second": batch * steps / sec,
            # Spread of the individual steps: on a loaded machine the mean
            # (what tokens/s uses, as beacon-bench does) can be far above these.
            "step_ms_median": float(np.median(per_step)),
            "step_ms_min": float(per_step.min()),
            "n_ctx": got_ctx,
            "seq0_tokens": seq0[:8],
        }
    finally:
        if bat is not None:
            bat.free()
        L.llama_free(ctx)


def bench_prefill(model, n_vocab, n_tokens, threads, flash_attn, repeats):
    cp = L.llama_context_default_params()
    cp.n_ctx = n_tokens + 16
    cp.n_batch = n_tokens
    cp.n_ubatch = n_tokens
    cp.n_seq_max = 1
    cp.n_threads = threads
    cp.n_threads_batch = threads
    cp.flash_attn_type = flash_attn
    cp.no_perf = True
    cp.embeddings = False
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError(f"llama_init_from_model failed for a {n_tokens}-token prefill")
    bat = None
    try:
        if L.llama_n_ctx(ctx) < n_tokens or L.llama_n_ubatch(ctx) < n_tokens:
            raise RuntimeError(f"context {L.llama_n_ctx(ctx)} / ubatch {L.llama_n_ubatch(ctx)} "
                               f"cannot take {n_tokens} tokens in one step")
        toks = prompt_tokens(0, n_tokens, n_vocab)
        bat = Batch(n_tokens)
        mem = L.llama_get_memory(ctx)
        warm = min(64, n_tokens)
        bat.fill(toks[:warm], list(range(warm)), [0] * warm, [i == warm - 1 for i in range(warm)])
        check_decode(L.llama_decode(ctx, bat.b), "prefill warm-up")
        best = float("inf")
        for _ in range(repeats):
            L.llama_memory_clear(mem, True)
            bat.fill(toks, list(range(n_tokens)), [0] * n_tokens, [i == n_tokens - 1 for i in range(n_tokens)])
            t0 = time.perf_counter()
            check_decode(L.llama_decode(ctx, bat.b), f"prefill of {n_tokens}")
            L.llama_synchronize(ctx)
            best = min(best, time.perf_counter() - t0)
            row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
            if not np.isfinite(row).all():
                raise RuntimeError("non-finite logits after the prefill")
        return {"prompt_len": n_tokens, "seconds": best, "tokens_per_second": n_tokens / best,
                "next_token": int(row.argmax())}
    finally:
        if bat is not None:
            bat.free()
        L.llama_free(ctx)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/default.gguf")
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--kv-unified", action="store_true",
                    help="one KV cache shared by all sequences (default: one stream per sequence)")
    ap.add_argument("--flash-attn", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--omp-wait", choices=["default", "active", "passive"], default="default",
                    help="OMP_WAIT_POLICY for llama.cpp's OpenMP threads (default: leave the "
                         "environment alone). On a loaded machine 'passive' avoids spin-wait "
                         "collapse at the per-op barriers")
    ap.add_argument("--prefill", default="",
                    help="comma-separated prompt lengths: measure prefill instead of decode")
    ap.add_argument("--prefill-repeats", type=int, default=1, help="prefill runs per length; the best is reported")
    ap.add_argument("--json", default="")
    ap.add_argument("--verbose", action="store_true", help="keep llama.cpp's own log")
    args = ap.parse_args()
    try:
        batches = [int(x) for x in args.batches.split(",") if x]
    except ValueError:
        sys.exit("llamacpp_bench: --batches must be a comma-separated list of integers")
    if not batches or min(batches) < 1 or args.threads < 1 or args.prompt_len < 1 or args.steps < 1:
        sys.exit("llamacpp_bench: batches, threads, prompt-len and steps must be >= 1")
    try:
        prefill = [int(x) for x in args.prefill.split(",") if x]
    except ValueError:
        sys.exit("llamacpp_bench: --prefill must be a comma-separated list of integers")
    if prefill and (min(prefill) < 1 or args.prefill_repeats < 1):
        sys.exit("llamacpp_bench: prefill lengths and --prefill-repeats must be >= 1")
    if not os.path.isfile(args.model):
        sys.exit(f"llamacpp_bench: no model at {args.model}")
    # libgomp reads its settings when the library loads, so before the import.
    if args.omp_wait != "default":
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait.upper()
    omp_wait = os.environ.get("OMP_WAIT_POLICY", "") or "unset"
    global L
    try:
        import llama_cpp as L
    except ImportError:
        sys.exit("llamacpp_bench: llama_cpp is not importable; run "
                 "`BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh`")
    flash = {"auto": L.LLAMA_FLASH_ATTN_TYPE_AUTO, "on": L.LLAMA_FLASH_ATTN_TYPE_ENABLED,
             "off": L.LLAMA_FLASH_ATTN_TYPE_DISABLED}[args.flash_attn]

    if not args.verbose:
        @L.llama_log_callback
        def _quiet(level, text, user_data):  # noqa: ARG001
            pass
        main._quiet = _quiet  # keep the callback alive
        L.llama_log_set(_quiet, ctypes.c_void_p())
    L.llama_backend_init()

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(args.model.encode(), mp)
    if not model:
        sys.exit(f"llamacpp_bench: llama.cpp could not load {args.model}")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    desc = ctypes.create_string_buffer(256)
    L.llama_model_desc(model, desc, len(desc))
    model_desc = desc.value.decode(errors="replace")

    print(f"llama.cpp (llama-cpp-python {L.__version__}): {model_desc}, vocab {n_vocab}")
    if prefill:
        print(f"prefill: threads {args.threads}, one llama_decode of the whole prompt, "
              f"flash-attn {args.flash_attn}, best of {args.prefill_repeats}, OMP_WAIT_POLICY {omp_wait}")
        print(f"{'prompt':>10} {'seconds':>10} {'tokens/s':>12}")
        results = []
        for n in prefill:
            r = bench_prefill(model, n_vocab, n, args.threads, flash, args.prefill_repeats)
            print(f"{n:>10} {r['seconds']:>10.3f} {r['tokens_per_second']:>12.1f}", flush=True)
            results.append(r)
        L.llama_model_free(model)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"engine": "llama.cpp", "llama_cpp_version": L.__version__,
                           "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
                           "model": args.model, "model_desc": model_desc, "threads": args.threads,
                           "flash_attn": args.flash_attn, "omp_wait_policy": omp_wait,
                           "prefill": results}, f, indent=2)
                f.write("\n")
        return
    print(f"threads {args.threads}, prompt {args.prompt_len}, {args.steps} timed steps, "
          f"kv {'unified' if args.kv_unified else 'per-sequence streams'}, flash-attn {args.flash_attn}, "
          f"OMP_WAIT_POLICY {omp_wait}")
    print(f"{'batch':>6} {'step ms':>10} {'tokens/s':>12} {'median ms':>10} {'min ms':>8}")
    results = []
    for b in batches:
        r = bench_batch(model, n_vocab, b, args.prompt_len, args.steps, args.threads,
                        args.kv_unified, flash)
        print(f"{r['batch']:>6} {r['step_ms']:>10.2f} {r['tokens_per_second']:>12.1f} "
              f"{r['step_ms_median']:>10.2f} {r['step_ms_min']:>8.2f}", flush=True)
        results.append(r)
    L.llama_model_free(model)

    # Sequence 0 has the same prompt at every batch size, so its greedy
    # continuation should agree (batched kernels may round differently).
    ref = results[0]["seq0_tokens"]
    for r in results[1:]:
        if r["seq0_tokens"] != ref:
            print(f"note: sequence 0 continues {r['seq0_tokens']} at batch {r['batch']} vs {ref} at "
                  f"batch {results[0]['batch']}", file=sys.stderr)
    noisy = [r["batch"] for r in results if r["step_ms"] > 1.5 * r["step_ms_median"]]
    if noisy:
        print(f"warning: mean step time is over 1.5x the median at batch {noisy}: the machine is "
              "busy or threads are being descheduled; the tokens/s above are not reliable"
              + ("" if omp_wait.lower() == "passive" else " (try --omp-wait passive)"), file=sys.stderr)
    # A batch-1 step reads about the whole file once: the implied read rate says whether the
    # figure is plausible for any model (a few GB/s per core up to a server's DRAM bandwidth).
    one = [r for r in results if r["batch"] == 1]
    file_bytes = os.path.getsize(args.model)
    if one and not (1e9 <= one[0]["tokens_per_second"] * file_bytes <= 2e11):
        print(f"warning: batch-1 decode at {one[0]['tokens_per_second']:.1f} tok/s reads the "
              f"{file_bytes / 1e6:.0f} MB file at {one[0]['tokens_per_second'] * file_bytes / 1e9:.1f} GB/s, "
              "outside 1-200 GB/s: the build or the machine is not what the comparison assumes",
              file=sys.stderr)

    out = {
        "engine": "llama.cpp",
        "llama_cpp_version": L.__version__,
        "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
        "model": args.model,
        "model_desc": model_desc,
        "threads": args.threads,
        "prompt_len": args.prompt_len,
        "steps": args.steps,
        "kv_unified": args.kv_unified,
        "flash_attn": args.flash_attn,
        "omp_wait_policy": omp_wait,
        "decode": results,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
