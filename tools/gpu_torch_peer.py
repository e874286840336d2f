#!/usr/bin/env python3
# Copied unchanged from the shared tools (../shared/tools/gpu_torch_peer.py) so that the device tool, which
# carries only this repository, brings it to the GPU machine; tools/gpu-check.sh runs it beside beacon-bench.
"""A peer for the CUDA engine on the same GPU: a plain PyTorch decode step.

The step is what a careful user writes in an afternoon: cuBLAS matmuls (F.linear, fused QKV and gate/up),
torch's scaled_dot_product_attention over a contiguous bf16 KV cache (GQA), RMSNorm, RoPE, SwiGLU,
greedy argmax over the LM head, the whole step captured once in a CUDA graph and replayed. Random bf16
weights, like beacon's dummy: loader, so it runs on a bare GPU machine (PyTorch is there; no network).

    python3 gpu_torch_peer.py --config configs/qwen3-4b.json --batches 1,16,64 --context 1024 --json out.json

Prints ms per step and tokens/s per batch. Compare with `beacon-bench cuda` on the same shapes, in the
same device run (the step times move a few percent between machines).
"""
import argparse, json, torch, torch.nn.functional as F


def bench(cfg_path, batches, ctx, steps):
    c = json.load(open(cfg_path))
    H, L, nh, nkv = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, I, V = c.get("head_dim", H // nh), c["intermediate_size"], c["vocab_size"]
    dev, bf = "cuda", torch.bfloat16
    g = lambda *s: torch.randn(*s, device=dev, dtype=bf) * 0.02
    emb = g(V, H)
    lm = emb if c.get("tie_word_embeddings", False) else g(V, H)
    bias = c["model_type"] == "qwen2"
    W = [dict(qkv=g((nh + 2 * nkv) * hd, H), o=g(H, nh * hd), gu=g(2 * I, H), d=g(H, I),
              b=g((nh + 2 * nkv) * hd) if bias else None,
              n1=torch.ones(H, device=dev, dtype=bf), n2=torch.ones(H, device=dev, dtype=bf)) for _ in range(L)]
    wbytes = sum(t.numel() * 2 for w in W for t in (w["qkv"], w["o"], w["gu"], w["d"])) + lm.numel() * 2
    rows = []
    for B in batches:
        kc = [torch.randn(B, nkv, ctx + 1, hd, device=dev, dtype=bf) for _ in range(L)]
        vc = [torch.randn(B, nkv, ctx + 1, hd, device=dev, dtype=bf) for _ in range(L)]
        tok = torch.randint(0, V, (B,), device=dev)
        cos, sin = torch.randn(hd // 2, device=dev, dtype=bf), torch.randn(hd // 2, device=dev, dtype=bf)

        def rope(x):
            x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

        def step():
            x = emb[tok]
            for l, w in enumerate(W):
                qkv = F.linear(F.rms_norm(x, (H,), w["n1"], 1e-6), w["qkv"], w["b"])
                q = qkv[:, : nh * hd].view(B, nh, 1, hd)
                k = qkv[:, nh * hd:(nh + nkv) * hd].view(B, nkv, 1, hd)
                v = qkv[:, (nh + nkv) * hd:].view(B, nkv, 1, hd)
                kc[l][:, :, ctx:ctx + 1] = rope(k)
                vc[l][:, :, ctx:ctx + 1] = v
                a = F.scaled_dot_product_attention(rope(q), kc[l], vc[l], enable_gqa=True)
                x = x + F.linear(a.reshape(B, nh * hd), w["o"])
                gu = F.linear(F.rms_norm(x, (H,), w["n2"], 1e-6), w["gu"])
                x = x + F.linear(F.silu(gu[:, :I]) * gu[:, I:], w["d"])
            return torch.argmax(F.linear(F.rms_norm(x, (H,), None, 1e-6), lm), -1)

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        for _ in range(5):
            graph.replay()
        e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
        torch.cuda.synchronize()
        e0.record()
        for _ in range(steps):
            graph.replay()
        e1.record()
        torch.cuda.synchronize()
        ms = e0.elapsed_time(e1) / steps
        kvb = 2 * L * B * nkv * (ctx + 1) * hd * 2
        rows.append(dict(config=cfg_path, batch=B, context=ctx, step_ms=ms, bytes_per_step=wbytes + kvb))
        print(f"torch peer {cfg_path}: batch {B:3d} context {ctx}: {ms:7.3f} ms/step {B * 1e3 / ms:9.1f} tok/s", flush=True)
        del kc, vc, graph
        torch.cuda.empty_cache()
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="a Hugging Face config.json (configs/*.json)")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    rows = bench(a.config, [int(b) for b in a.batches.split(",")], a.context, a.steps)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
