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
import re
import subprocess

# ---------------------------------------------------------------------------
# The server's KV option defaults, read from the C++ (resolve_kv_options)

# KvPolicyOptions' member defaults are read from kv/policy/kv_policy.h as it was at the commit the
# binary was built from (member_defaults, defaults_at), not mirrored here: a pinned binary keeps the
# defaults of its commit when the tree's change (issue 45 moved BeaconKV's R, K, U from 16, 16, 64 to
# 4, 8, 16), and its records must say what it ran. beacon_bf16_state has no beacon-serve flag: the
# server always runs the bf16 ring and FPS buffers (the CUDA state's format).
OPTION_FIELDS = ("budget", "interval", "sinks", "window", "keep_prompt", "recent_queries", "beacons", "fps_bound",
                 "beacon_filter", "beacon_prompt_queries", "beacon_bf16_state", "beacon_group_queries",
                 "global_threshold", "pool_kernel", "lambda", "seed")
POLICY_HEADER = "kv/policy/kv_policy.h"
OLDER_POLICY_HEADERS = ("kv/kv_policy.h",)  # where earlier commits kept it (before kv/policy/)
_MEMBER = re.compile(r"^\s*(?:int32_t|uint64_t|bool|float|BeaconFilter)\s+(\w+)\s*=\s*([^;]+);", re.M)


def _cpp_value(text):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("BeaconFilter::k"):
        return text[len("BeaconFilter::k"):].lower()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text.rstrip("f"))


# Options a header may predate, and what a binary without them ran: the option off.
ADDED_LATER = {"beacon_group_queries": False}


def member_defaults(header_text):
    """{field: default} of OPTION_FIELDS from the text of kv/policy/kv_policy.h (the members of
    struct KvPolicyOptions; ADDED_LATER where an older header lacks them). Raises ValueError naming
    any other field it cannot find (the header changed shape: fix this parser, never guess)."""
    start = header_text.find("struct KvPolicyOptions {")
    end = header_text.find("\n};", start)
    if start < 0 or end < 0:
        raise ValueError(f"{POLICY_HEADER}: no struct KvPolicyOptions")
    found = {name: _cpp_value(value) for name, value in _MEMBER.findall(header_text[start:end])}
    found = {**ADDED_LATER, **found}
    missing = [f for f in OPTION_FIELDS if f not in found]
    if missing:
        raise ValueError(f"{POLICY_HEADER}: no default for {', '.join(missing)}")
    return {f: found[f] for f in OPTION_FIELDS}


def defaults_at(commit, repo_root):
    """member_defaults of the header at `commit` (a binary's, binary_commit), read with `git show`;
    of the working tree when the commit is None or "+dirty" (a binary of build/bin is built from
    the tree). Raises ValueError when git cannot show that commit (a shallow clone)."""
    if not commit or commit.endswith("+dirty"):
        with open(os.path.join(repo_root, POLICY_HEADER)) as f:
            return member_defaults(f.read())
    errors = []
    for path in (POLICY_HEADER,) + OLDER_POLICY_HEADERS:
        try:
            text = subprocess.run(["git", "-C", repo_root, "show", f"{commit}:{path}"], capture_output=True,
                                  text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            errors.append(f"{path}: {getattr(e, 'stderr', '') or e}".strip())
            continue
        return member_defaults(text)
    raise ValueError(f"cannot read KvPolicyOptions at commit {commit}, the binary's: " + "; ".join(errors))


_TREE_DEFAULTS = {}


def tree_defaults():
    """member_defaults of this checkout's header (cached)."""
    if not _TREE_DEFAULTS:
        _TREE_DEFAULTS.update(defaults_at(None, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return dict(_TREE_DEFAULTS)


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


def _defaults_for(policy, base):
    o = {"policy": policy, **base}
    o.update(PUBLISHED.get(policy, {}))
    return o


def resolve_kv_options(policy, budget, flags, base=None):
    """The options a request naming `policy` and `budget` (None: the server's) runs with on a
    beacon-serve started with `flags` (parse_server_flags), as ResolveRequestKvOptions resolves
    them: the server's own policy gets every --kv-* flag over its published defaults; another
    policy gets its published defaults with the server's budget, interval, sinks, window and
    keep_prompt. `full` evicts nothing: {"policy": "full", "budget": 0}. `base`: the member
    defaults of the binary's commit (defaults_at); None: this checkout's."""
    if policy == "full":
        return {"policy": "full", "budget": 0}
    base = tree_defaults() if base is None else base
    server_policy = flags.get("kv-policy", SERVER_DEFAULT_POLICY)
    operator = _defaults_for(server_policy, base)
    for flag, (field, parse) in KV_FLAGS.items():
        if flag in flags:
            operator[field] = parse(flags[flag].lower() if flag in SWITCHES else flags[flag])
    if policy == server_policy:
        o = operator
    else:
        o = _defaults_for(policy, base)
        o.update({f: operator[f] for f in OPERATOR_FIELDS})
    if budget:
        o["budget"] = int(budget)
    # --kv-eviction-phase (cli/kv_flags.h, default spread): the per-request phase itself is a
    # hash of the prompt, not reported; the mode is.
    o["eviction_phase"] = flags.get("kv-eviction-phase", "spread")
    return o


# What GetModelInfo's KvPolicyInfo reports (server/grpc/model_info.cc), field -> KvPolicyInfo name.
MODEL_INFO_FIELDS = {"interval": "interval", "sinks": "sinks", "window": "window", "keep_prompt": "keep_prompt",
                     "recent_queries": "recent_queries", "beacons": "beacons", "fps_bound": "fps_bound"}


def check_against_server(options, info):
    """Compares resolved options with what the server reports for a request naming that policy
    (`info`: its KvPolicyInfo as a dict; beacons and fps_bound are 0 for every policy but beacon,
    and fps_bound 0 from a server older than that field). Returns the fields it confirmed; raises
    ValueError naming every mismatch (the resolution here is wrong, and the records would lie)."""
    if options["policy"] == "full" or not info:
        return []
    bad, ok = [], []
    for field, key in MODEL_INFO_FIELDS.items():
        if key not in info or (field in ("beacons", "fps_bound") and options["policy"] != "beacon"):
            continue
        if field == "fps_bound" and not info[key]:
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
