"""Every program in build/bin answers --help (and -h) on stdout with exit 0,
naming its options; a program with subcommands answers --help without one
(listing them) and COMMAND --help. An unknown option and a refused old
spelling (docs/development.md, "Command-line conventions") are errors:
non-zero exit, the option named on stderr, for a renamed one with the new
spelling. Nothing here loads a model or opens a port."""
import os
import subprocess
import sys

BIN = os.environ["BEACON_BIN"]

# Program -> options its --help must name. Subcommand programs map each
# command (None: the program without one) to options, or to the commands
# that bare --help must list.
PROGRAMS = {
    "beacon-serve": ["--model", "--kv-policy", "--kv-budget", "--prefix-cache, --no-prefix-cache",
                     "--grpc-reflection, --no-grpc-reflection", "--cuda-graphs", "--drain-timeout-s", "BEACON_"],
    "beacon-run": ["--model", "--prompt-token-ids", "--max-tokens", "--output-format", "--kv-policy",
                   "--kv-keep-prompt, --no-kv-keep-prompt", "--ignore-eos"],
    "beacon-logits": ["--model", "--token-ids", "--out", "--chunk", "--companions"],
    "beacon-plan": ["--model", "--gpu", "--kv-policy", "--kv-budget", "--prefix-cache", "--json", "BEACON_PLAN_"],
    "beacon-serve-bench": ["--model", "--requests", "--prompt-len", "--output-len", "--kv-policy", "--kv-budget",
                           "--json"],
    "beacon-kernels-bench": ["--benchmark_filter"],
}
# beacon-serve on the emulated CUDA engine (tests/cuda_emu): the same program, the same options.
PROGRAMS["beacon-serve-emu"] = PROGRAMS["beacon-serve"]
SUBCOMMANDS = {
    "beacon-eval": {
        None: ["model", "synthetic", "needle"],
        "model": ["--kv-policy", "--kv-budget", "--kv-interval", "--tokens", "--plot, --no-plot", "--resume",
                  "--kv-beacon-prompt-queries"],
        "synthetic": ["--kv-policy", "--kv-budget", "--traces", "--middle", "--plot, --no-plot"],
        "needle": ["--kv-policy", "--kv-budget", "--distances", "--cases", "--resamples"],
    },
    "beacon-bench": {
        None: ["decode", "policy", "prefill", "growth", "cuda"],
        "decode": ["--model", "--batches", "--prompt-len", "--steps", "--contexts", "--json"],
        "policy": ["--kv-policy", "--kv-budget", "--kv-interval", "--decode-steps", "--policy-pool"],
        "prefill": ["--prompt-len", "--chunk", "--repeats"],
        "growth": ["--kv-policy", "--growth-tokens", "--growth-window", "--csv", "--png"],
        "cuda": ["--context", "--pool-seqs", "--prompt-len", "--output-len", "--throughput-steps",
                 "--kv-beacon-group-queries"],
    },
    "beacon-gguf": {None: ["types", "crc"], "types": ["--help"], "crc": ["--help"]},
    "beacon-client": {
        None: ["generate", "tokenize", "info", "--server", "--output-format", "--raw, --no-raw"],
        "generate": ["--server", "--prompt", "--max-tokens", "--output-format"],
        "tokenize": ["--server"],
        "info": ["--server"],
    },
    "beacon-loadtest": {
        None: ["sweep", "plot", "--rate", "--concurrency", "--json"],
        "sweep": ["--slo", "--concurrency"],
        "plot": ["--from", "--plot"],
    },
}

# Old spellings that docs, tools or tests scripted: refused, naming the new one.
REFUSED = [
    ("beacon-eval", ["model", "--budgets", "64"], "--budgets was renamed --kv-budget"),
    ("beacon-eval", ["needle", "--policies", "beacon"], "--policies was renamed --kv-policy"),
    ("beacon-eval", ["synthetic", "--interval", "16"], "--interval was renamed --kv-interval"),
    ("beacon-run", ["--prompt-tokens", "1,2,3"], "--prompt-tokens was renamed --prompt-token-ids"),
    ("beacon-logits", ["--tokens", "1,2,3", "--out", "/dev/null"], "--tokens was renamed --token-ids"),
    ("beacon-serve-bench", ["--prompt-tokens", "64"], "--prompt-tokens was renamed --prompt-len"),
    ("beacon-serve-bench", ["--output-tokens", "64"], "--output-tokens was renamed --output-len"),
    ("beacon-serve-bench", ["--policies", "full,beacon"], "--policies was renamed --kv-policy"),
    ("beacon-bench", ["cuda", "--prompt-tokens", "256"], "--prompt-tokens was renamed --prompt-len"),
    ("beacon-bench", ["policy", "--policies", "beacon"], "--policies was renamed --kv-policy"),
    ("beacon-client", ["--json", "hi"], "--output-format jsonl"),
    ("beacon-serve", ["--disable-grpc-reflection"], "--disable-grpc-reflection was renamed --no-grpc-reflection"),
    # A switch takes its value after '=': the old `--name off` is refused.
    ("beacon-serve", ["--prefix-cache", "off"], "--prefix-cache=off"),
    ("beacon-run", ["--kv-keep-prompt", "false", "--prompt", "hi"], "--kv-keep-prompt=false"),
]


def run(tool, *args, env=None, timeout=60):
    p = subprocess.run([os.path.join(BIN, tool), *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def expect_help(tool, args, names):
    rc, out, err = run(tool, *args)
    what = " ".join([tool, *args])
    assert rc == 0, f"{what}: exit {rc}\n{out}\n{err}"
    assert out.strip(), f"{what}: nothing on stdout (stderr: {err!r})"
    missing = [n for n in names if n not in out]
    assert not missing, f"{what}: help does not name {missing}:\n{out}"


def expect_error(tool, args, needle, env=None):
    rc, out, err = run(tool, *args, env=env)
    what = " ".join([tool, *args])
    assert rc > 0, f"{what}: expected failure, got exit {rc}\n{out}\n{err}"
    assert needle in err, f"{what}: stderr does not mention {needle!r}: {err!r}"


def main():
    present = sorted(f for f in os.listdir(BIN) if f.startswith("beacon-") and os.access(os.path.join(BIN, f), os.X_OK))
    required = set(PROGRAMS) | set(SUBCOMMANDS)
    required.discard("beacon-kernels-bench")  # built only where Google Benchmark is installed
    required.discard("beacon-serve-emu")  # built only where the CUDA emulator runs (BEACON_CUDA_EMU)
    assert required <= set(present), f"not built: {sorted(required - set(present))}"
    unknown = [p for p in present if p not in PROGRAMS and p not in SUBCOMMANDS]
    assert not unknown, f"{unknown}: add the new program's options to this test"

    for tool in present:
        if tool in PROGRAMS:
            for h in ("--help", "-h"):
                expect_help(tool, [h], PROGRAMS[tool])
            bogus = "--benchmark_bogus" if tool == "beacon-kernels-bench" else "--bogus-option"
            expect_error(tool, [bogus], bogus)
            continue
        for command, names in SUBCOMMANDS[tool].items():
            prefix = [] if command is None else [command]
            for h in ("--help", "-h"):
                expect_help(tool, [*prefix, h], names)
            if command is not None:
                expect_error(tool, [*prefix, "--bogus-option"], "--bogus-option")
        print(f"  {tool}: --help, -h and COMMAND --help for {[c for c in SUBCOMMANDS[tool] if c]}")

    for tool, args, hint in REFUSED:
        if tool in present:
            expect_error(tool, args, hint)
    # The environment form of a renamed beacon-serve option, and a malformed switch.
    expect_error("beacon-serve", [], "BEACON_DISABLE_GRPC_REFLECTION: --disable-grpc-reflection was renamed",
                 env={"BEACON_DISABLE_GRPC_REFLECTION": "1"})
    expect_error("beacon-serve", [], "BEACON_PREFIX_CACHE", env={"BEACON_PREFIX_CACHE": "maybe"})
    print(f"help: {len(present)} programs answer --help; {len(REFUSED) + 1} old spellings refused with a hint")


if __name__ == "__main__":
    sys.exit(main())
