"""How a record of tools/reasoning_eval.py was made (issue 45): the binary, its
commit, the server's command line and the KV options a request resolved to.

Every record carries:
  commit, commit_source  the commit the beacon-serve binary was built from: the
                         COMMIT file beside a pinned binary (eval/results/*/run.sh
                         writes it when it copies build/bin), else `git rev-parse HEAD`
                         of this checkout, marked "+dirty" when tracked files differ
                         from it (a binary of build/bin is built from the working tree)
  binary_sha256          of the beacon-serve file the server was started from
  server_cmd, server_env the full argv, and the BEACON_* environment it inherited
                         (every flag is also settable from the environment)
  kv_options             the request's resolved policy options (resolve_kv_options)

A records file holds the results of one binary: check_binaries refuses to append to a
file whose earlier rows name another binary, or none (rows written before provenance
existed), unless the caller allows it (--allow-mixed-binaries).

Pure functions and the standard library only: tests/test_chain_task.py tests them.
"""
import hashlib
import json
import os
import subprocess

# ---------------------------------------------------------------------------
# The server's KV option defaults, mirrored from the C++ (resolve_kv_options)

# KvPolicyOptions' member defaults (kv/policy/kv_policy.h). beacon_bf16_state has no beacon-serve
# flag: the server always runs the bf16 ring and FPS buffers (the CUDA state's format).
BASE_OPTIONS = {"budget": 512, "interval": 128, "sinks": 4, "window": 32, "keep_prompt": True,
                "recent_queries": 16, "beacons": 16, "fps_bound": 64, "beacon_filter": "all",
                "beacon_prompt_queries": False, "beacon_bf16_state": True, "beacon_group_queries": False,
                "global_threshold": 0.5,
                "pool_kernel": 1, "lambda": 0.1, "seed": 0}
# The `published` rows of kv/policy/policy_registry.cc (KvPolicyOptions::DefaultsFor).
PUBLISHED = {"snapkv": {"recent_queries": 32, "pool_kernel": 7},
             "rkv": {"recent_queries": 8, "pool_kernel": 7, "lambda": 0.1}}
# beacon-serve's --kv-policy default (apps/serve_config.cc: DeclareKvFlags(a, "beacon")).
SERVER_DEFAULT_POLICY = "beacon"
# The --kv-* flags of cli/kv_flags.h: flag -> (field, parser). Switches take "true"/"false".
_BOOL = {"true": True, "1": True, "on": True, "yes": True, "false": False, "0": False, "off": False, "no": False}
KV_FLAGS = {"kv-budget": ("budget", int), "kv-interval": ("interval", int), "kv-sinks": ("sinks", int),
            "kv-window": ("window", int), "kv-keep-prompt": ("keep_prompt", _BOOL.__getitem__),
            "kv-recent-queries": ("recent_queries", int), "kv-beacons": ("beacons", int),
            "kv-fps-bound": ("fps_bound", int), "kv-beacon-filter": ("beacon_filter", str),
            "kv-beacon-prompt-queries": ("beacon_prompt_queries", _BOOL.__getitem__),
            "kv-beacon-group-queries": ("beacon_group_queries", _BOOL.__getitem__),
            "kv-pool-kernel": ("pool_kernel", int), "kv-lambda": ("lambda", float), "kv-seed": ("seed", int)}
SWITCHES = {"kv-keep-prompt", "kv-beacon-prompt-queries", "kv-beacon-group-queries"}
# What a request naming another policy than the server's default keeps of the server's options
# (ResolveRequestKvOptions, kv/serving/kv_policy_limits.cc); the rest are that policy's published defaults.
OPERATOR_FIELDS = ("budget", "interval", "sinks", "window", "keep_prompt")


def parse_server_flags(argv, env=None):
    """{flag: value string} of beacon-serve's --kv-* flags in argv (the last of a repeated flag
    wins), then of BEACON_KV_* variables in env for flags argv lacks (util/cli_args.h: the
    command line wins). Switches read "true"/"false" (--x, --no-x, --x=false)."""
    out = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if not a.startswith("--"):
            continue
        name, eq, value = a[2:].partition("=")
        if name.startswith("no-") and name[3:] in SWITCHES and not eq:
            out[name[3:]] = "false"
        elif name in SWITCHES:
            out[name] = value if eq else "true"
        elif name in KV_FLAGS or name in ("kv-policy", "kv-eviction-phase"):
            if not eq and i < len(argv):
                value = argv[i]
                i += 1
            out[name] = value
    for name in list(KV_FLAGS) + ["kv-policy", "kv-eviction-phase"]:
        var = "BEACON_" + name.upper().replace("-", "_")
        if name not in out and env and env.get(var):
            out[name] = env[var]
    return out


def _defaults_for(policy):
    o = {"policy": policy, **BASE_OPTIONS}
    o.update(PUBLISHED.get(policy, {}))
    return o


def resolve_kv_options(policy, budget, flags):
    """The options a request naming `policy` and `budget` (None: the server's) runs with on a
    beacon-serve started with `flags` (parse_server_flags), as ResolveRequestKvOptions resolves
    them: the server's own policy gets every --kv-* flag over its published defaults; another
    policy gets its published defaults with the server's budget, interval, sinks, window and
    keep_prompt. `full` evicts nothing: {"policy": "full", "budget": 0}."""
    if policy == "full":
        return {"policy": "full", "budget": 0}
    server_policy = flags.get("kv-policy", SERVER_DEFAULT_POLICY)
    operator = _defaults_for(server_policy)
    for flag, (field, parse) in KV_FLAGS.items():
        if flag in flags:
            operator[field] = parse(flags[flag].lower() if flag in SWITCHES else flags[flag])
    if policy == server_policy:
        o = operator
    else:
        o = _defaults_for(policy)
        o.update({f: operator[f] for f in OPERATOR_FIELDS})
    if budget:
        o["budget"] = int(budget)
    # --kv-eviction-phase (cli/kv_flags.h, default spread): the per-request phase itself is a
    # hash of the prompt, not reported; the mode is.
    o["eviction_phase"] = flags.get("kv-eviction-phase", "spread")
    return o


# What GetModelInfo's KvPolicyInfo reports (server/grpc/model_info.cc), field -> KvPolicyInfo name.
MODEL_INFO_FIELDS = {"interval": "interval", "sinks": "sinks", "window": "window", "keep_prompt": "keep_prompt",
                     "recent_queries": "recent_queries", "beacons": "beacons"}


def check_against_server(options, info):
    """Compares resolved options with what the server reports for a request naming that policy
    (`info`: its KvPolicyInfo as a dict; beacons is 0 for every policy but beacon). Returns the
    fields it confirmed; raises ValueError naming every mismatch (this mirror of the C++
    defaults is stale, and the records would lie)."""
    if options["policy"] == "full" or not info:
        return []
    bad, ok = [], []
    for field, key in MODEL_INFO_FIELDS.items():
        if key not in info or (field == "beacons" and options["policy"] != "beacon"):
            continue
        (ok if info[key] == options[field] else bad).append(field)
    if bad:
        raise ValueError(f"tools/eval_provenance.py resolves {options['policy']} differently from the server "
                         f"(GetModelInfo): " + ", ".join(f"{f} {options[f]} vs {info[MODEL_INFO_FIELDS[f]]}"
                                                         for f in bad))
    return ok


# ---------------------------------------------------------------------------
# The binary and its commit


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def binary_commit(bin_dir, repo_root):
    """(commit, source): the COMMIT file beside a pinned binary, else this checkout's HEAD
    ("+dirty" when tracked files differ from it), else (None, "unknown")."""
    commit_file = os.path.join(bin_dir, "COMMIT")
    if os.path.exists(commit_file):
        with open(commit_file) as f:
            return f.read().strip(), "COMMIT file"
    try:
        head = subprocess.run(["git", "-C", repo_root, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo_root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None, "unknown"
    return head + ("+dirty" if dirty else ""), "git HEAD of the checkout (unpinned binary)"


def server_env(env):
    """The BEACON_* variables a started server inherits (they set its flags)."""
    return {k: v for k, v in sorted(env.items()) if k.startswith("BEACON_")}


# ---------------------------------------------------------------------------
# One binary per records file


def read_jsonl(path):
    """The records of a JSONL file in order, blank and torn lines (an interrupted append) skipped;
    none when the file does not exist."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def binaries_in(path):
    """{binary_sha256 or None: rows} of a records file (None: rows that name no binary)."""
    seen = {}
    for r in read_jsonl(path):
        sha = r.get("binary_sha256")
        seen[sha] = seen.get(sha, 0) + 1
    return seen


def check_binaries(path, sha, allow_mixed=False):
    """None when `path` may take records of the binary `sha` (None: unknown, e.g. an attached
    server): the file is new or empty, every earlier row names the same binary, or allow_mixed.
    Otherwise the message to refuse with, naming both hashes."""
    others = {k: v for k, v in binaries_in(path).items() if k != sha}
    if not others or allow_mixed:
        return None
    named = ", ".join(f"{k or 'none (written before records named their binary)'}: {v} rows"
                      for k, v in sorted(others.items(), key=lambda kv: kv[0] or ""))
    return (f"{path} holds records of another beacon-serve binary ({named}); this run's binary is "
            f"{sha or 'unknown (attached with --url)'}. Write to another file, or pass --allow-mixed-binaries "
            "to mix them on purpose (each record names its binary_sha256).")
