"""beacon-plan end to end: the published-table reproduction (memory within 5%),
the JSON shape, the CSV/PNG outputs of a budget sweep with an SLO, and clear
errors (exit status 2, the problem named on stderr) for bad arguments."""
import json
import os
import subprocess
import tempfile

BIN = os.environ["BEACON_BIN"]
SRC = os.environ["BEACON_SOURCE_DIR"]
PLAN = os.path.join(BIN, "beacon-plan")
QWEN = os.path.join(SRC, "configs", "qwen3-4b.json")


def run(*args, timeout=300):
    p = subprocess.run([PLAN, *args], capture_output=True, text=True, timeout=timeout, cwd=SRC)
    return p.returncode, p.stdout, p.stderr


def expect_error(args, needle):
    rc, out, err = run(*args)
    assert rc == 2, f"{args}: rc {rc}, expected 2\n{out}\n{err}"
    assert needle in err, f"{args}: stderr does not mention {needle!r}: {err!r}"
    assert "Traceback" not in err and "terminate" not in err


def test_reproduction():
    rc, out, err = run("--reproduce", "--json", "-", "--quiet")
    assert rc == 0, err
    j = json.loads(out)
    rep = j["reproduction"]
    full, beacon = rep["modelled"]["full_gib"], rep["modelled"]["beacon_gib"]
    assert abs(full / 77.0 - 1) <= 0.05, full
    assert abs(beacon / 13.3 - 1) <= 0.05, beacon
    assert rep["within_5pct"] is True
    assert rep["published"] == {"full_gb": 77.0, "beacon_gb": 13.3, "full_tok_s": 82.3, "beacon_tok_s": 356.4}
    assert rep["throughput_ratio"] > 1 and rep["memory_ratio"] > 5
    assert len(rep["assumptions"]) >= 4
    configs = j["configurations"]
    assert [c["policy"] for c in configs] == ["full", "beacon"]
    assert configs[1]["budget"] == 2048 and configs[0]["budget"] is None
    for c in configs:
        assert c["admitted_concurrency"] == 16 and c["completed"] == 16
        assert c["output_tokens"] == 16 * 32768
        for key in ("peak_kv_bytes", "peak_total_bytes", "output_tokens_per_s", "footprint_slots"):
            assert c[key] > 0, key
        for key in ("p50", "p90", "p99"):
            assert c["ttft_s"][key] > 0 and c["tpot_s"][key] > 0
    # KV alone: 16 x (256 + 32768) and 16 x (256 + 2048 + 128) slots of 144 KiB.
    assert configs[0]["peak_kv_bytes"] == 16 * 33024 * 147456
    assert configs[1]["peak_kv_bytes"] == 16 * 2432 * 147456
    assert j["gpu"]["measured"] == []
    assert j["model"]["kv_bytes_per_token"] == 147456

    rc, out, err = run("--reproduce")
    assert rc == 0, err
    assert "within 5%" in out and "modelled peak, GiB" in out and "no measured constants" in out
    assert "[1/2] full" in err  # progress


def test_sweep_with_slo_writes_plot_data():
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = run("--model", QWEN, "--gpu", "h100-sxm", "--prompt-len", "uniform:100:300",
                           "--output-len", "lognormal:2000:1000", "--requests", "64", "--max-running", "32",
                           "--kv-policy", "full,beacon,snapkv", "--kv-budget", "256,1024",
                           "--slo", "ttft_ms=3000,tpot_ms=40", "--target-rate", "4",
                           "--out-dir", tmp, "--json", os.path.join(tmp, "plan.json"), "--quiet")
        assert rc == 0, err
        j = json.load(open(os.path.join(tmp, "plan.json")))
        labels = [c["label"] for c in j["configurations"]]
        assert labels == ["full", "beacon b=256", "beacon b=1024", "snapkv b=256", "snapkv b=1024"], labels
        for c in j["configurations"]:
            cap = c["capacity"]
            assert cap["saturation_rate"] > 0
            assert cap["replicas"] is None or cap["replicas"] == -1 or cap["replicas"] >= 1
            assert len(cap["replicas_vs_rate"]) == 20
        assert j["slo"]["ttft_ms"] == 3000 and j["slo"]["attainment"] == 0.9
        files = set(os.listdir(tmp))
        assert {"budget_sweep.csv", "replicas_vs_rate.csv"} <= files, files
        with open(os.path.join(tmp, "budget_sweep.csv")) as f:
            rows = f.read().strip().splitlines()
        assert rows[0].startswith("policy,budget,") and len(rows) == 6
        assert {"budget_sweep.png", "replicas_vs_rate.png"} <= files, files
        with open(os.path.join(tmp, "budget_sweep.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert "replicas@4" in out


def test_every_supported_family():
    for cfg in ("qwen3-4b.json", "deepseek-r1-distill-qwen-7b.json", "llama-3.1-8b.json", "smollm2-135m.json"):
        rc, out, err = run("--model", os.path.join(SRC, "configs", cfg), "--requests", "8", "--output-len",
                           "fixed:512", "--json", "-", "--quiet")
        assert rc == 0, f"{cfg}: {err}"
        assert len(json.loads(out)["configurations"]) == 2


def test_bad_arguments():
    expect_error(["--bogus"], "unknown option --bogus")
    expect_error([], "--model")
    expect_error(["--model", "/nonexistent/config.json"], "/nonexistent/config.json")
    expect_error(["--model", QWEN, "--gpu", "a100-80g"], "GPU profile 'a100-80g' not found")
    expect_error(["--model", QWEN, "--rate", "2", "--concurrency", "4"], "not both")
    expect_error(["--model", QWEN, "--rate", "-1"], "--rate")
    expect_error(["--model", QWEN, "--output-len", "zipf:3"], "--output-len")
    expect_error(["--model", QWEN, "--prompt-len", "uniform:9:3"], "--prompt-len")
    expect_error(["--model", QWEN, "--prompt-len", "fixed:50000"], "context")
    expect_error(["--model", QWEN, "--kv-policy", "lru"], "unknown policy 'lru'")
    expect_error(["--model", QWEN, "--kv-budget", "0"], "--kv-budget")
    expect_error(["--model", QWEN, "--mem-fraction", "0.05"], "weights")
    expect_error(["--model", QWEN, "--kv-pool-gb", "1", "--output-len", "fixed:32768", "--kv-policy", "full"],
                 "compressing kv_policy")
    expect_error(["--model", QWEN, "--slo", "ttft=5"], "--slo")
    expect_error(["--model", QWEN, "--target-rate", "5"], "needs --slo")
    expect_error(["--model", QWEN, "--admission", "greedy"], "admission")
    expect_error(["--reproduce", "--model", QWEN], "--reproduce fixes --model")
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "gpu.json")
        with open(bad, "w") as f:
            json.dump({"name": "x", "constants": {"memory_bytes": {"value": 1e11}}}, f)
        expect_error(["--model", QWEN, "--gpu", bad], bad)
        bad_model = os.path.join(tmp, "config.json")
        with open(bad_model, "w") as f:
            f.write('{"model_type": "gpt_neox", "hidden_size": 64}')
        expect_error(["--model", tmp], "gpt_neox")


def main():
    test_reproduction()
    test_sweep_with_slo_writes_plot_data()
    test_every_supported_family()
    test_bad_arguments()
    print("ok")


if __name__ == "__main__":
    main()
