"""beacon-eval revisit: its help names its options, and every bad option is a
clear error naming the flag or field, exit status 2, before any model loads
(so a wrong run of the long evaluation fails at once, not after an hour)."""
import os
import subprocess
import sys

BIN = os.environ["BEACON_BIN"]


def run(*args, timeout=60):
    p = subprocess.run([os.path.join(BIN, "beacon-eval"), "revisit", *args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def main():
    rc, out, err = run("--help")
    assert rc == 0, f"--help: exit {rc}: {err}"
    for flag in ("--model", "--kv-policy", "--kv-budget", "--kv-interval", "--cases", "--seed", "--facts",
                 "--revisited", "--revisits-per-fact", "--steps", "--out-dir"):
        assert flag in out, f"help does not name {flag}:\n{out}"

    # A model that does not exist: the options must fail first.
    missing = ["--model", "/nonexistent/model.gguf"]
    cases = [
        (["--cases", "0"], "cases"),
        (["--cases", "-3"], "--cases"),
        (["--cases", "ten"], "--cases"),
        (["--chunk", "16"], "--chunk"),  # gone: every token is a decode step (issue 47)
        (["--facts", "11"], "facts"),
        (["--revisited", "6"], "revisited"),
        (["--revisits-per-fact", "0"], "revisits_per_fact"),
        (["--steps", "0"], "steps"),
        (["--kv-interval", "0"], "--kv-interval"),
        (["--kv-budget", "0"], "--kv-budget"),
        (["--kv-policy", "lru"], "unknown policy 'lru'"),
        (["--kv-policy", "full"], "no compressing policy"),
        (["--bogus", "1"], "--bogus"),
    ]
    for args, needle in cases:
        rc, out, err = run(*missing, *args)
        assert rc == 2, f"{args}: exit {rc}, expected 2: {err!r}"
        assert needle in err, f"{args}: stderr does not mention {needle!r}: {err!r}"
    print(f"beacon-eval revisit: help and {len(cases)} bad options checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
