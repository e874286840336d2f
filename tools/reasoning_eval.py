#!/usr/bin/env python3
"""Task accuracy under KV compression, through beacon-serve (issue 32).

Generates reasoning problems with checkable answers (the `reasoning-gym`
package, offline, from a seed), asks a running beacon-serve to solve each one
under every requested KV policy and budget (greedy, the model's own chat
template, a fixed instruction), extracts the answer deterministically, scores
it with the family's own scorer, and appends one JSON line per (policy,
budget, interval, problem) to a records file. A restart skips the records
already there, so a run of hours can be stopped and resumed at any point.

    # run: one beacon-serve per interval, started here (or --url to attach)
    .venv/bin/python tools/reasoning_eval.py run --model models/qwen2.5-coder-1.5b.gguf \
        --family gsm_symbolic --seed 1 -n 200 --interval 16 \
        --cells full beacon:64 rkv:64 snapkv:64 h2o:64 streaming:64 random:64 \
        --out eval/results/reasoning-1.5b/records.jsonl
    # summary: accuracy, chain length, truncation, evictions, peak KV slots,
    # paired exact McNemar against full and between peers, Holm-corrected
    .venv/bin/python tools/reasoning_eval.py summary eval/results/reasoning-1.5b/records.jsonl

A cell is `policy`, `policy:budget` (a budget the server's range allows) or
`policy:bN`, a budget in bytes (issue 45): the bytes of N slots
(GetModelInfo's kv_bytes_per_slot), sent as `KvOptions.budget_bytes`, so the
policy keeps the slots its own state leaves (recorded as `kv_budget`; the
record's `budget` is N and `match` is "bytes", a cell of its own, paired
with the other policies' byte cells of the same N).
The KV policy and budget go with each request (`kv_policy`/`kv_budget` on the
OpenAI API, `KvOptions` over gRPC); the eviction interval, sinks, window and
keep_prompt are the server's (`--kv-interval` etc.: a request naming another
policy than the server's default keeps them), so one server serves every cell
of one interval (and `--kv-window`, recorded as `window`; null is the
server's default, 32). `full` records carry budget 0, interval 0 and window
null, and pair with every interval.

Per-request KV figures (peak cached tokens, eviction rounds, evicted slots,
reserved slots, preemptions) come in the gRPC API's final message (`--api grpc`,
the default). The OpenAI API's responses carry no KV figures; with `--api
openai` they are read from the server's "finished:" log line of the request
(only when this script started the server; with --url they are left null).

`--task recap --k K` (issue 45) puts K problems in one prompt and scores the
final recap line that lists every answer in order (tools/chain_task.py; its
tables: tools/recap_summary.py); one record per chain. Every record of either
task names how it was made: commit, binary_sha256, server_cmd, server_env and
the request's resolved kv_options (what the server reports it ran with,
KvStats.options; from an older server, the server's flags over the defaults
kv/policy/kv_policy.h had at the binary's commit: tools/eval_provenance.py). A records file
whose earlier rows name another binary is refused unless --allow-mixed-binaries.

Nothing here imports reasoning_gym or grpc at import time: the pure functions
(extraction, McNemar, Holm, the summary) are tested without them
(tests/test_reasoning_eval.py, tests/test_chain_task.py).
"""
import argparse
import collections
import json
import math
import os
import re
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:  # chain_task, recap_summary, eval_provenance, eval_transport sit beside this file
    sys.path.insert(0, TOOLS)
from eval_transport import Grpc, OpenAi, Server, run_pool  # noqa: E402 (the transport: gRPC, the OpenAI API, a server)
INSTRUCTION = ('Solve the problem step by step. End your reply with a final line of the form "Answer: N", '
               "where N is the final answer.")
# In the tables' order: beacon first among the compressing policies, so pairs read "beacon vs peer".
# A policy not named here (a new row of kv/policy/policy_registry.h) sorts after them; whether a name
# exists is the server's to say (it fails the request naming an unknown policy).
POLICIES = ("full", "beacon", "rkv", "snapkv", "h2o", "streaming", "random")
POLICY_NAME = re.compile(r"^[a-z0-9_-]+$")

# ---------------------------------------------------------------------------
# Answer extraction (deterministic)

_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+−]?\.\d+"
NUM_RE = re.compile(_NUM)
ANSWER_RE = re.compile(r"answer\s*(?:is)?\s*[:：]", re.I)


def normalize_number(s):
    """'1,234.50' -> '1234.5', '−3' -> '-3', '+7' -> '7', '12.0' -> '12'; None when s holds no number."""
    if s is None:
        return None
    m = NUM_RE.search(s)
    if not m:
        return None
    t = m.group(0).replace(",", "").replace("−", "-").lstrip("+")
    if t.startswith("-."):
        t = "-0" + t[1:]
    elif t.startswith("."):
        t = "0" + t
    if "." in t:
        t = t.rstrip("0").rstrip(".")
    if t in ("-0", ""):
        t = "0"
    return t


def boxed_contents(text):
    """The contents of every \\boxed{...} in text, braces balanced, in order."""
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end():i - 1])
    return out


def _clean(s):
    s = s.replace("**", "").replace("$", "").strip()
    return s.rstrip(".").strip()


def extract_answer(text, numeric=True):
    """(answer, how): the last 'Answer: X' line, else the last \\boxed{X}, else
    (numeric only) the last number in the text. `how` is 'answer', 'boxed',
    'last_number' or 'none'. With numeric, X is reduced to one number
    (normalize_number): the first after the last '=' if it has one, else its
    first, so '$1,200.' reads 1200, '70 students' 70 and '5 + 3 = 8' 8; a
    \\boxed{} in the answer line is read alone."""
    if text is None:
        return None, "none"
    text = text.replace("**", "")
    hits = list(ANSWER_RE.finditer(text))
    for m in reversed(hits):
        rest = text[m.end():].split("\n", 1)[0]
        if not rest.strip() and "\n" in text[m.end():]:  # "Answer:\n42"
            rest = text[m.end():].lstrip("\n").split("\n", 1)[0]
        box = boxed_contents(rest)
        if box:
            rest = box[-1]
        if numeric:
            if box or "=" in rest:  # "Answer: 5 + 3 = 8", "Answer: \boxed{3 \times 5 = 15}"
                nums = NUM_RE.findall(rest.rsplit("=", 1)[-1]) or NUM_RE.findall(rest)[-1:]
            else:  # "Answer: 70 students"
                nums = NUM_RE.findall(rest)[:1]
            if nums:
                return normalize_number(nums[0]), "answer"
        elif _clean(rest):
            return _clean(rest), "answer"
    box = boxed_contents(text)
    for b in reversed(box):
        if numeric:
            nums = NUM_RE.findall(b)
            if nums:
                return normalize_number(nums[-1]), "boxed"
        elif _clean(b):
            return _clean(b), "boxed"
    if numeric:
        nums = NUM_RE.findall(text)
        if nums:
            return normalize_number(nums[-1]), "last_number"
    return None, "none"


def numbers_equal(a, b):
    try:
        return a is not None and b is not None and float(a) == float(b)
    except ValueError:
        return False


# ---------------------------------------------------------------------------
# Statistics: exact McNemar and Holm


def binom_two_sided_half(k, n):
    """Exact two-sided p of k successes in n trials at p = 1/2 (the sign test):
    min(1, 2 * P(X <= min(k, n - k)))."""
    if n == 0:
        return 1.0
    lo = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(lo + 1))
    # In integers: 2.0 ** n overflows a float from n = 1024 (a grid's answers against full's pass that),
    # while int / int rounds the exact quotient once (and gives 0.0 below the smallest float).
    return min(1.0, 2 * tail / (1 << n))


def mcnemar_exact(b, c):
    """Exact McNemar p from the discordant counts b (first right, second wrong) and c."""
    return binom_two_sided_half(b, b + c)


def holm(pvalues):
    """Holm-Bonferroni adjusted p-values, in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


# ---------------------------------------------------------------------------
# Records


def cell_of(policy, budget, interval, window=None):
    """The (policy, budget, interval, window) a record is filed under: full has none of them."""
    return (policy, 0, 0, None) if policy == "full" else (policy, int(budget), int(interval), window)


def record_key(r):
    """A record's identity: resumption skips what the file has. `task`, `k` and `prompt` (the recap
    prompt's name) are absent (None) on the single-problem task's records, and `match` ("bytes") on
    slot budgets, so records written before those existed key alike."""
    return (r["model"], r["family"], r["seed"], r["index"], r["policy"], r["budget"], r["interval"], r.get("window"),
            r["max_tokens"], r.get("variant"), r.get("task"), r.get("k"), r.get("prompt"), r.get("match"))


def cell_key(r):
    """The cell a record's tables file it under: (policy, budget, interval, window, variant, match)."""
    return (r["policy"], r["budget"], r["interval"], r.get("window"), r.get("variant"), r.get("match"))


FULL_CELL = ("full", 0, 0, None, None, None)


def cell_label(c):
    """The policy, the variant (server flags) it ran with, and "bytes" for a budget matched in bytes."""
    return c[0] + (f" [{c[4]}]" if c[4] else "") + (" (bytes)" if c[5] else "")


def load_records(*paths):
    """Records of JSONL files read in order as one (a torn last line is skipped), the last of each key kept:
    the grid's cells and those run beside it into files of their own (another script's) tabulate together."""
    import eval_provenance as prov  # noqa: PLC0415
    out = {}
    for path in paths:
        for r in prov.read_jsonl(path):
            out[record_key(r)] = r
    return list(out.values())


def parse_cell(spec):
    """(policy, budget, match) of `policy`, `policy:N` (N generated slots) or `policy:bN` (the bytes of N
    slots, the policy's own state included: match "bytes"; the server gives it the slots that remain)."""
    policy, _, budget = spec.partition(":")
    if not POLICY_NAME.match(policy):
        raise argparse.ArgumentTypeError(f"{policy!r} is not a KV policy name (lowercase letters, digits, _ -)")
    if policy == "full":
        if budget:
            raise argparse.ArgumentTypeError("full takes no budget")
        return policy, None, None
    match = "bytes" if budget.startswith("b") else None
    digits = budget[1:] if match else budget
    if budget and not digits.isdigit():
        raise argparse.ArgumentTypeError(f"cell {spec!r}: the budget is N (slots) or bN (the bytes of N slots)")
    return policy, int(digits) if budget else None, match


# ---------------------------------------------------------------------------
# Summary


def _fmt_p(p):
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _f(x, d=1):
    return "" if x is None else f"{x:.{d}f}"


def _by_chain_length(cells, full, ordered, label):
    """Accuracy in thirds of the full cache's chain lengths: each problem falls in the third of its
    full-cache chain, so every cell is read on the same problems per third. A loss to full that grows
    from the short third to the long one says the budget, held against the chain, runs short; a flat
    loss says the policy's choices do. (Length is also difficulty: full's own accuracy falls too.)
    Beside each share, the paired count against full in that third: lost:gained."""
    lengths = sorted(r["completion_tokens"] for r in full.values())
    n = len(lengths)
    if n < 3:
        return []
    cuts = (lengths[n // 3], lengths[2 * n // 3])

    def third(i):
        tokens = full[i]["completion_tokens"]
        return 0 if tokens < cuts[0] else 1 if tokens < cuts[1] else 2

    heads = (f"chain < {cuts[0]}", f"chain {cuts[0]}-{cuts[1] - 1}", f"chain >= {cuts[1]}")
    lines = [f"Accuracy by the full cache's chain length (thirds of its {n} chains, in tokens; a cell counts "
             "only the problems full has; lost:gained against full in that third):\n",
             "| policy | budget | interval | window | " + " | ".join(heads) + " |",
             "|---|---|---|---|---|---|---|"]
    for c in ordered:
        tally = [[0, 0, 0, 0] for _ in heads]  # right, problems, lost, gained
        for i, r in cells[c].items():
            if i in full:
                t = tally[third(i)]
                t[0] += bool(r["correct"])
                t[1] += 1
                t[2] += bool(full[i]["correct"] and not r["correct"])
                t[3] += bool(r["correct"] and not full[i]["correct"])
        window = "-" if c[0] == "full" else (c[3] if c[3] is not None else "default")
        shares = [(f"{100 * k / t:.0f}% ({k}/{t})" + ("" if c[0] == "full" else f", {lost}:{gained}")) if t else ""
                  for k, t, lost, gained in tally]
        lines.append(f"| {label(c)} | {c[1] or '-'} | {c[2] or '-'} | {window} | " + " | ".join(shares) + " |")
    lines.append("")
    return lines


def summarize(records):
    """Markdown tables: per cell, then paired comparisons with full and between the
    policies of one (budget, interval), each family of tests Holm-corrected, then
    every cell's accuracy in thirds of the full cache's chain length."""
    groups = collections.defaultdict(dict)  # (model, family, seed, max_tokens) -> {cell: {index: record}}
    for r in records:
        g = (r["model"], r["family"], r["seed"], r["max_tokens"])
        groups[g].setdefault(cell_key(r), {})[r["index"]] = r
    lines = []
    order = {p: i for i, p in enumerate(POLICIES)}

    def sort_cell(c):
        return (c[1], c[5] or "", c[2], c[3] or 0, order.get(c[0], 99), c[4] or "")

    label = cell_label

    for g in sorted(groups):
        cells = groups[g]
        model, family, seed, max_tokens = g
        lines.append(f"### {family}, seed {seed}, {model}, max_tokens {max_tokens}\n")
        full = cells.get(FULL_CELL)
        # Per cell, with the comparison to full on the problems both have.
        vs_full = []
        for c in sorted(cells, key=sort_cell):
            if c[0] == "full" or full is None:
                continue
            common = sorted(set(cells[c]) & set(full))
            b = sum(1 for i in common if full[i]["correct"] and not cells[c][i]["correct"])
            cc = sum(1 for i in common if not full[i]["correct"] and cells[c][i]["correct"])
            vs_full.append((c, len(common), b, cc, mcnemar_exact(b, cc)))
        adj = dict(zip([v[0] for v in vs_full], holm([v[4] for v in vs_full])))
        raw = {v[0]: v for v in vs_full}
        lines.append("| policy | budget | interval | window | n | accuracy | mean chain | truncated | evictions/seq "
                     "| peak KV slots (mean / max) | peak gen. slots (mean) | vs full: n, lost:gained | p | p (Holm) |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in sorted(cells, key=sort_cell):
            rs = list(cells[c].values())
            n = len(rs)
            acc = sum(r["correct"] for r in rs) / n
            chain = _mean([r["completion_tokens"] for r in rs])
            trunc = sum(r["finish_reason"] == "length" for r in rs) / n
            ev = _mean([r.get("evictions") for r in rs])
            peaks = [r.get("peak_cached_tokens") for r in rs if r.get("peak_cached_tokens") is not None]
            gen_peaks = [r["peak_cached_tokens"] - r["prompt_tokens"] for r in rs
                         if r.get("peak_cached_tokens") is not None and r.get("prompt_tokens") is not None]
            peak = f"{_mean(peaks):.0f} / {max(peaks)}" if peaks else "n/a"
            vf = raw.get(c)
            cmp = f"{vf[1]}, {vf[2]}:{vf[3]}" if vf else ""
            window = "-" if c[0] == "full" else (c[3] if c[3] is not None else "default")
            lines.append(f"| {label(c)} | {c[1] or '-'} | {c[2] or '-'} | {window} | {n} | {100 * acc:.1f}% ({sum(r['correct'] for r in rs)}) "
                         f"| {_f(chain)} | {100 * trunc:.1f}% | {_f(ev, 2) or 'n/a'} | {peak} "
                         f"| {_f(_mean(gen_peaks), 0) or 'n/a'} | {cmp} | {_fmt_p(vf[4]) if vf else ''} "
                         f"| {_fmt_p(adj.get(c)) if vf else ''} |")
        lines.append("")
        # Between peers: every pair of compressing policies at one (budget, match, interval, window).
        by_setting = collections.defaultdict(list)
        for c in cells:
            if c[0] != "full":
                by_setting[(c[1], c[5] or "", c[2], c[3] or 0)].append(c)
        for setting in sorted(by_setting):
            cs = sorted(by_setting[setting], key=sort_cell)
            pairs = []
            for i in range(len(cs)):
                for j in range(i + 1, len(cs)):
                    a, z = cells[cs[i]], cells[cs[j]]
                    common = sorted(set(a) & set(z))
                    b = sum(1 for k in common if a[k]["correct"] and not z[k]["correct"])
                    cc = sum(1 for k in common if not a[k]["correct"] and z[k]["correct"])
                    pairs.append((label(cs[i]), label(cs[j]), len(common), b, cc, mcnemar_exact(b, cc)))
            if not pairs:
                continue
            padj = holm([p[5] for p in pairs])
            wtext = f", window {setting[3]}" if setting[3] else ""
            lines.append(f"Pairs at budget {setting[0]}{' in bytes' if setting[1] else ''}, interval {setting[2]}{wtext} "
                         "(A right/B wrong : A wrong/B right; "
                         f"Holm over these {len(pairs)} tests):\n")
            lines.append("| A | B | n | A:B discordant | p | p (Holm) |")
            lines.append("|---|---|---|---|---|---|")
            for p, pa in zip(pairs, padj):
                lines.append(f"| {p[0]} | {p[1]} | {p[2]} | {p[3]}:{p[4]} | {_fmt_p(p[5])} | {_fmt_p(pa)} |")
            lines.append("")
        if full is not None:
            lines += _by_chain_length(cells, full, sorted(cells, key=sort_cell), label)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Problems (reasoning_gym, imported on use)


def make_problems(family, seed, n):
    import reasoning_gym  # noqa: PLC0415 (optional dependency, only for `run`)
    ds = reasoning_gym.create_dataset(family, size=n, seed=seed)
    return ds, [ds[i] for i in range(n)]


NUMERIC_FAMILIES = {"gsm_symbolic", "basic_arithmetic", "chain_sum", "products", "leg_counting", "decimal_arithmetic",
                    "fraction_simplification", "number_sorting", "count_bits", "time_intervals"}


def score(ds, entry, family, text):
    numeric = family in NUMERIC_FAMILIES or _looks_numeric(entry["answer"])
    extracted, how = extract_answer(text, numeric=numeric)
    if numeric:
        correct = numbers_equal(extracted, normalize_number(str(entry["answer"])))
    else:
        correct = ds.score_answer(extracted, entry) >= 1.0
    return extracted, how, bool(correct)


def _looks_numeric(answer):
    return re.fullmatch(r"\s*-?\d+(?:\.\d+)?\s*", str(answer)) is not None


# ---------------------------------------------------------------------------
# run


def _task_items(args, problems):
    """{index: (prompt, golds)} of the run: one problem per index (task single), or chain `index`
    of k problems (task recap, chain_task.chain_indices)."""
    out = {}
    for i in range(args.start, args.start + args.n):
        if args.task == "recap":
            import chain_task  # noqa: PLC0415 (imports this module)
            entries = [problems[j] for j in chain_task.chain_indices(i, args.k)]
            out[i] = (chain_task.build_prompt([e["question"] for e in entries], args.instruction or
                                              chain_task.PROMPTS[args.prompt]), [e["answer"] for e in entries])
        else:
            out[i] = (problems[i]["question"] + "\n\n" + (args.instruction or INSTRUCTION), None)
    return out


def _provenance(args, server, client):
    """(fields every record carries, {(policy, budget): resolved kv_options}) of this run
    (tools/eval_provenance.py)."""
    import eval_provenance as prov  # noqa: PLC0415
    fields = {"commit": None, "commit_source": None, "binary_sha256": None, "server_cmd": None, "server_env": None}
    if server is not None:
        binary = server.args[0]
        commit, source = prov.binary_commit(os.path.dirname(binary), ROOT)
        fields.update(commit=commit, commit_source=source, binary_sha256=prov.sha256_file(binary),
                      server_cmd=server.args, server_env=prov.server_env(os.environ))
    info = client.model_info() if isinstance(client, Grpc) else {}
    # The defaults of the binary's own commit: a pinned binary may predate a change of them.
    base = prov.defaults_at(fields["commit"], ROOT) if server is not None else None
    options = {}
    for policy, budget, _ in [parse_cell(c) for c in args.cells]:
        if server is not None:
            o = prov.resolve_kv_options(policy, budget, prov.parse_server_flags(server.args, os.environ), base)
            o["checked_by_server"] = prov.check_against_server(o, info.get(policy))
            o["source"] = "server flags over the defaults of kv/policy/kv_policy.h and kv/policy/policy_registry.cc"
        else:  # attached: only what the server reports
            o = {"policy": policy, "budget": budget or 0, **{k: v for k, v in info.get(policy, {}).items()
                                                             if k not in ("allowed", "budget")},
                 "source": "GetModelInfo of the attached server" if info else "unknown (attached, OpenAI API)"}
        options[(policy, budget or 0)] = o
    return fields, options


def _record_options(out, mirrored, policy, budget):
    """A record's kv_options: what the server reports the request ran with (KvStats.options), else (an older
    server, the OpenAI API) the options tools/eval_provenance.py resolves from the server's flags."""
    if out.get("kv_options"):
        return {**out["kv_options"], "source": "server (KvStats.options)"}
    return mirrored.get((policy, budget))


def run(args):
    cells = [parse_cell(c) for c in args.cells]
    for p, b, _ in cells:
        if p != "full" and b is None:
            sys.exit(f"cell {p} needs a budget (policy:budget)")
    recap = args.task == "recap"
    if recap and args.k < 1:
        sys.exit("--task recap needs --k >= 1")
    if recap:
        import chain_task  # noqa: PLC0415 (imports this module)
        if args.prompt not in chain_task.PROMPTS:
            sys.exit(f"--prompt {args.prompt}: not one of {', '.join(chain_task.PROMPTS)}")
    ds, problems = make_problems(args.family, args.seed, (args.start + args.n) * (args.k if recap else 1))
    if recap and not (args.family in NUMERIC_FAMILIES or all(_looks_numeric(e["answer"]) for e in problems)):
        sys.exit(f"--task recap needs numeric answers; {args.family} has others")
    items = _task_items(args, problems)
    model_name = os.path.basename(args.model) if args.model else args.model_name
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    done = {record_key(r) for r in load_records(args.out)}
    interval = args.interval
    # --instruction replaces a named prompt: such records name no prompt ("custom"), so keep them apart.
    task_fields = {"task": "recap", "k": args.k, "prompt": "custom" if args.instruction else args.prompt} if recap else {}
    todo = []
    for policy, budget, match in cells:
        pol, bud, itv, win = cell_of(policy, budget or 0, interval, args.kv_window)
        for i in range(args.start, args.start + args.n):
            key = record_key({"model": model_name, "family": args.family, "seed": args.seed, "index": i, "policy": pol,
                              "budget": bud, "interval": itv, "window": win, "max_tokens": args.max_tokens,
                              "variant": args.variant, "match": match, **task_fields})
            if key not in done:
                todo.append((pol, bud, itv, win, match, i))
    print(f"[reasoning_eval] {len(todo)} requests to run, {len(cells) * args.n - len(todo)} already recorded",
          file=sys.stderr, flush=True)
    if not todo:
        return
    import eval_provenance as prov  # noqa: PLC0415
    binary = os.path.join(args.bin, "beacon-serve")
    refusal = prov.check_binaries(args.out, None if args.url else prov.sha256_file(binary), args.allow_mixed_binaries)
    if refusal:
        sys.exit(refusal)
    server = None
    try:
        if args.url:
            target, log_path = args.url, None
        else:
            log_path = args.server_log or os.path.join(os.path.dirname(os.path.abspath(args.out)), "serve.log")
            flags = ["--threads", str(args.threads), "--kv-interval", str(interval), *args.server_flag]
            if args.kv_window is not None:
                flags += ["--kv-window", str(args.kv_window)]
            server = Server(binary, args.model, log_path, flags)
            target = (f"127.0.0.1:{server.grpc_port}" if args.api == "grpc"
                      else f"http://127.0.0.1:{server.http_port}")
        client = Grpc(target) if args.api == "grpc" else OpenAi(target, log_path)
        provenance, kv_options = _provenance(args, server, client)
        slot_bytes = None
        if any(c[2] for c in cells):
            slot_bytes = client.bytes_per_slot() if isinstance(client, Grpc) else 0
            if not slot_bytes:
                raise RuntimeError("budgets in bytes (policy:bN) need the gRPC API of a server that reports "
                                   "kv_bytes_per_slot")
        lock = threading.Lock()
        counts = collections.Counter()
        t0 = time.time()
        tokens = [0]

        def one(item):
            pol, bud, itv, win, match, i = item
            content, golds = items[i]
            tag = f"recap{args.k}-" if recap else ""
            rid = f"re-{tag}{args.family}-{args.seed}-{i}-{pol}-{'b' if match else ''}{bud}-{itv}-{win or 'w'}-{os.getpid()}"
            t = time.time()
            budget_bytes = bud * slot_bytes if match else None
            out = client.chat(content, pol, bud, args.max_tokens, rid, budget_bytes=budget_bytes)
            if out.get("kv_policy") is not None and (out["kv_policy"] != pol or (not match and out["kv_budget"] != bud)):
                raise RuntimeError(f"request {rid} ran as {out['kv_policy']}:{out['kv_budget']}, not {pol}:{bud}")
            rec = {"model": model_name, "family": args.family, "seed": args.seed, "index": i, **task_fields}
            if match:  # the cell's budget is the bytes of `bud` slots; the policy kept kv_budget slots
                rec.update(match=match, budget_bytes=budget_bytes, kv_budget=out.get("kv_budget"))
            if recap:
                import chain_task  # noqa: PLC0415
                scored = chain_task.score_chain(golds, out["text"], out["finish_reason"])
                rec.update(id=f"recap{args.k}/{args.family}/{args.seed}/{i}", policy=pol, budget=bud, interval=itv,
                           window=win, max_tokens=args.max_tokens, api=args.api, **scored)
                extracted, correct = f"{scored['n_correct']}/{args.k}", scored["correct"]
            else:
                extracted, how, correct = score(ds, problems[i], args.family, out["text"])
                correct = correct and out["finish_reason"] != "length"  # a chain cut at max_tokens scores nothing
                rec.update(id=f"{args.family}/{args.seed}/{i}", policy=pol, budget=bud, interval=itv, window=win,
                           max_tokens=args.max_tokens, api=args.api, gold=str(problems[i]["answer"]),
                           extracted=extracted, extracted_by=how, correct=correct)
            rec.update({"finish_reason": out["finish_reason"], "prompt_tokens": out["prompt_tokens"],
                        "completion_tokens": out["completion_tokens"], "cached_tokens": out.get("cached_tokens"),
                        "peak_cached_tokens": out.get("peak_cached_tokens"), "evictions": out.get("evictions"),
                        "evicted_tokens": out.get("evicted_tokens"), "reserved_tokens": out.get("reserved_tokens"),
                        "preemptions": out.get("preemptions"), "bytes_per_slot": out.get("bytes_per_slot"),
                        "state_bytes": out.get("state_bytes"), "wall_s": round(time.time() - t, 2),
                        **provenance, "kv_options": _record_options(out, kv_options, pol, bud), "text": out["text"]})
            if args.variant:
                rec["variant"] = args.variant
                rec["server_flags"] = args.server_flag
            with lock:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                counts[(pol, bud, itv, win, match)] += 1
                tokens[0] += out["completion_tokens"]
                el = time.time() - t0
                gold = "" if recap else f" gold={rec['gold']}"
                print(f"[reasoning_eval] {pol}:{'b' if match else ''}{bud}@{itv}{'/w' + str(win) if win else ''} #{i}{gold} got={extracted} "
                      f"{'ok' if correct else 'WRONG'} {out['completion_tokens']} tok {out['finish_reason']} "
                      f"evictions={rec['evictions']} peak={rec['peak_cached_tokens']} | "
                      f"{sum(counts.values())}/{len(todo)} done, {tokens[0] / el:.1f} tok/s",
                      file=sys.stderr, flush=True)

        run_pool(todo, one, args.concurrency, server, "reasoning_eval")
    finally:
        if server is not None:
            server.close()


def rescore_single(r):
    """A single-problem record under the truncation rule (issue 45): an answer cut at max_tokens is wrong,
    even when its extracted number equals the gold (a loop that repeats it). The first scoring is kept
    as `correct_untruncated` when this changes it."""
    if r.get("correct") and r.get("finish_reason") == "length":
        return dict(r, correct=False, correct_untruncated=True)
    return r


def rescore_file(path):
    """Rewrites `path` (through a temporary file and a rename) with every recap record rescored
    (chain_task.rescore) and every single-problem record under the truncation rule (rescore_single);
    other lines (a torn last line) are kept byte for byte, and so is every record the rules leave alone."""
    import chain_task  # noqa: PLC0415 (imports this module)
    out, n = [], 0
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                out.append(line)
                continue
            if r.get("task") == "recap":
                line, n = json.dumps(chain_task.rescore(r)) + "\n", n + 1
            elif rescore_single(r) is not r:
                line, n = json.dumps(rescore_single(r)) + "\n", n + 1
            out.append(line)
    with open(path + ".tmp", "w") as f:
        f.writelines(out)
    os.replace(path + ".tmp", path)
    print(f"[reasoning_eval] rescored {n} records of {path}", file=sys.stderr)


def binaries_line(records):
    """Which binaries wrote the records: "Records by binary: sha256 9f5e30e192aa... (commit 0948606): 529;
    ..." in order of first appearance; records from before provenance count as "not recorded"."""
    counts = {}
    for r in records:
        sha, commit = r.get("binary_sha256"), r.get("commit")
        key = f"sha256 {sha[:12]}... (commit {(commit or '?')[:7]})" if sha else "not recorded"
        counts[key] = counts.get(key, 0) + 1
    return "Records by binary: " + "; ".join(f"{k}: {n}" for k, n in counts.items()) + "."


def summary_text(records):
    """The single-problem task's tables (summarize, unchanged), then the recap task's, then which binaries
    wrote the records (binaries_line)."""
    single = [r for r in records if r.get("task") != "recap"]
    recap = [r for r in records if r.get("task") == "recap"]
    parts = [summarize(single)] if single or not recap else []
    if recap:
        import recap_summary  # noqa: PLC0415 (imports this module)
        parts.append(recap_summary.summarize_recap(recap))
    if records:
        parts.append("\n" + binaries_line(records) + "\n")
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run problems through beacon-serve, appending records")
    r.add_argument("--family", default="gsm_symbolic", help="reasoning-gym dataset name")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("-n", type=int, default=200, help="problems (indices start .. start+n-1)")
    r.add_argument("--start", type=int, default=0)
    r.add_argument("--cells", nargs="+", default=["full"], help="policy or policy:budget, e.g. full beacon:64 h2o:64")
    r.add_argument("--interval", type=int, default=16,
                   help="eviction interval: the server's --kv-interval (with --url: what the server runs)")
    r.add_argument("--kv-window", type=int, help="the server's --kv-window (default: its own, 32); recorded as window")
    r.add_argument("--max-tokens", type=int, default=1024)
    r.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    r.add_argument("--api", choices=("grpc", "openai"), default="grpc")
    r.add_argument("--url", help="attach to a running server: host:port (grpc) or http://host:port (openai)")
    r.add_argument("--model", help="GGUF to start beacon-serve with")
    r.add_argument("--model-name", default="attached", help="the model's name in records with --url")
    r.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--server-flag", action="append", default=[], help="extra beacon-serve flag (repeatable; "
                   "--server-flag=--kv-pool-tokens=65536)")
    r.add_argument("--variant", help="a name for --server-flag's settings (ablations): recorded, and part of the "
                   "cell, so one records file holds several settings of one policy")
    r.add_argument("--server-log", help="beacon-serve's log (default: serve.log beside --out)")
    r.add_argument("--instruction", help="what follows the problem(s) (default: the task's own; recap: "
                   "chain_task.INSTRUCTION, with {k} and {example} filled in)")
    r.add_argument("--task", choices=("single", "recap"), default="single",
                   help="single: one problem per request; recap: --k problems per request, scored by the final "
                   "recap line (tools/chain_task.py); -n and --start count chains")
    r.add_argument("--k", type=int, default=0, help="problems per chain (--task recap)")
    r.add_argument("--prompt", default="brief", help="the recap task's instruction, by name (tools/chain_task.py "
                   "PROMPTS; recorded, and part of the cell)")
    r.add_argument("--allow-mixed-binaries", action="store_true",
                   help="append to a records file whose earlier rows name another beacon-serve binary")
    r.add_argument("--out", required=True, help="records JSONL (appended; existing records are skipped)")
    rs = sub.add_parser("rescore", help="recompute the recap records' scoring from their text (chain_task.rescore), "
                        "in place; other records are left as they are")
    rs.add_argument("records")
    s = sub.add_parser("summary", help="tables of records files, read in order as one")
    s.add_argument("records", nargs="+")
    s.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        if not args.url and not args.model:
            ap.error("run needs --model (start a server) or --url (attach)")
        run(args)
    elif args.cmd == "rescore":
        rescore_file(args.records)
    else:
        text = summary_text(load_records(*args.records))
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
