"""Bad input to the command-line tools: a clear error naming the problem, a
non-zero exit status, never a crash (a signal) or a hang."""
import os
import subprocess
import sys
import tempfile

BIN = os.environ["BEACON_BIN"]
MODEL = os.environ["BEACON_MODEL"]
SRC = os.environ["BEACON_SOURCE_DIR"]


def run(tool, *args, timeout=120):
    p = subprocess.run([os.path.join(BIN, tool), *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def expect_error(tool, args, needle, code=None):
    rc, out, err = run(tool, *args)
    assert rc > 0, f"{tool} {args}: expected failure, got rc={rc}\n{out}\n{err}"
    if code is not None:
        assert rc == code, f"{tool} {args}: rc {rc}, expected {code}: {err}"
    assert needle in err, f"{tool} {args}: stderr does not mention {needle!r}: {err!r}"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        truncated = os.path.join(tmp, "truncated.gguf")
        with open(MODEL, "rb") as f, open(truncated, "wb") as g:
            g.write(f.read(1 << 20))  # header and metadata, tensor data cut off
        not_gguf = os.path.join(tmp, "text.gguf")
        with open(not_gguf, "w") as g:
            g.write("this is not a model\n" * 10)
        bad_cfg = os.path.join(tmp, "bad.json")
        with open(bad_cfg, "w") as g:
            g.write('{"model_type": "gpt_neox", "hidden_size": 64}')

        expect_error("beacon-run", ["--model", os.path.join(tmp, "missing.gguf"), "--prompt", "hi"], "missing.gguf")
        expect_error("beacon-run", ["--model", truncated, "--prompt", "hi"], "truncated.gguf")
        expect_error("beacon-run", ["--model", not_gguf, "--prompt", "hi"], "text.gguf")
        expect_error("beacon-run", ["--model", "dummy:" + bad_cfg, "--prompt", "hi"], "gpt_neox")
        # beacon-serve's start-up checks (issue 35): refused before the model loads, naming the flag.
        comments_only = os.path.join(tmp, "keys")
        with open(comments_only, "w") as g:
            g.write("# no key yet\n\n")
        expect_error("beacon-serve", ["--model", MODEL, "--prefix-cache-salt-per-key"], "needs API keys", code=2)
        expect_error("beacon-serve", ["--model", MODEL, "--api-key-file", comments_only], "holds no key", code=2)
        expect_error("beacon-serve", ["--model", MODEL, "--admin-port", "70000"], "--admin-port", code=2)
        expect_error("beacon-serve", ["--model", MODEL, "--max-failed-steps", "-1"], "--max-failed-steps", code=2)
        # 64-bit values for 32-bit settings are refused, not wrapped (issue 46).
        expect_error("beacon-serve", ["--model", MODEL, "--max-running", "4294967297"], "--max-running must be <=",
                     code=2)
        expect_error("beacon-serve", ["--model", MODEL, "--default-max-tokens", "2147483648"],
                     "--default-max-tokens must be <=", code=2)
        expect_error("beacon-serve", ["--model", MODEL, "--kv-eviction-phase", "random"], "--kv-eviction-phase",
                     code=2)
        expect_error("beacon-run", ["--model", MODEL], "prompt is empty", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--output-format", "xml"], "output-format", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--max-tokens", "0"], "max_tokens", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--max-tokens", "ten"], "--max-tokens", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--top-p", "1.5"], "top_p", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--temperature", "-1"], "temperature", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--bogus"], "unknown option --bogus", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt-token-ids", "1,2,999999"], "999999", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--prompt-token-ids", "1"], "not both", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt-file", os.path.join(tmp, "nope.txt")], "nope.txt")
        long_prompt = os.path.join(tmp, "long.txt")
        with open(long_prompt, "w") as g:
            g.write("word " * 9000)
        expect_error("beacon-run", ["--model", MODEL, "--prompt-file", long_prompt], "context", code=2)
        expect_error("beacon-run", ["--model", "dummy:" + os.path.join(SRC, "tests/data/tiny-llama.json"),
                                    "--prompt", "hi"], "no tokenizer")
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "lru"], "unknown policy 'lru'", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon", "--kv-budget", "0"],
                     "kv_budget", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon", "--kv-pool-kernel", "4"],
                     "kv_pool_kernel", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon",
                                    "--kv-beacon-filter", "some"], "--kv-beacon-filter", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon",
                                    "--kv-beacon-prompt-queries=yes"], "--kv-beacon-prompt-queries", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon",
                                    "--kv-eviction-phase", "late"], "--kv-eviction-phase", code=2)
        expect_error("beacon-run", ["--model", MODEL, "--prompt", "hi", "--kv-policy", "beacon",
                                    "--kv-beacon-group-queries", "--kv-beacon-filter", "global"],
                     "kv_beacon_group_queries", code=2)
        expect_error("beacon-logits", ["--model", MODEL, "--token-ids", "1,x", "--out", os.path.join(tmp, "o")], "bad id")
        expect_error("beacon-bench", ["decode", "--model", MODEL, "--batches", "0"], "--batches")

        # And a good run still works, with the summary the issue asks for.
        rc, out, err = run("beacon-run", "--model", MODEL, "--prompt", "The sky is", "--max-tokens", "4",
                           "--ignore-eos", "--output-format", "jsonl")
        assert rc == 0, err
        lines = [l for l in out.splitlines() if l.strip()]
        import json
        objs = [json.loads(l) for l in lines]
        assert len(objs) == 5, out
        assert all(set(o) == {"id", "text"} for o in objs[:4]), out
        summary = objs[-1]
        for key in ("finish_reason", "prompt_tokens", "completion_tokens", "tokens_per_second", "kv_peak_tokens"):
            assert key in summary, summary
        assert summary["finish_reason"] == "length" and summary["completion_tokens"] == 4, summary
        assert summary["kv_peak_tokens"] == summary["prompt_tokens"] + 3, summary
        assert summary["evictions"] == 0 and summary["kv_policy"] == "full", summary

        # Under compression the summary shows evictions and the bounded peak.
        rc, out, err = run("beacon-run", "--model", MODEL, "--prompt", "Tell me a long story.", "--max-tokens", "150",
                           "--ignore-eos", "--output-format", "jsonl", "--kv-policy", "beacon", "--kv-budget", "40",
                           "--kv-interval", "16", "--kv-window", "8")
        assert rc == 0, err
        summary = json.loads(out.splitlines()[-1])
        assert summary["completion_tokens"] == 150, summary
        assert summary["evictions"] > 0, summary
        assert summary["kv_peak_tokens"] == summary["prompt_tokens"] + 40 + 16, summary
    print("cli error cases: all gave clear errors")


if __name__ == "__main__":
    sys.exit(main())
