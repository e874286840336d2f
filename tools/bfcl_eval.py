#!/usr/bin/env python3
"""Tool-call accuracy on the Berkeley Function Calling Leaderboard (BFCL v4), through beacon-serve.

Sends BFCL's single-turn AST categories (simple = simple_python, multiple, parallel; the data of
PyPI `bfcl-eval==2026.3.23`) to beacon-serve's OpenAI API with the functions as `tools`, and scores
each answer's `message.tool_calls` with BFCL's own AST checker. One JSON line per (id, mode) is
appended to a records file; a rerun skips what is there, so a long run can be stopped and resumed.

    # selfcheck: the ground truth itself, sent through the scoring path, must score 100%
    .venv/bin/python tools/bfcl_eval.py selfcheck
    # run: starts a beacon-serve (or --url http://127.0.0.1:PORT to attach)
    .venv/bin/python tools/bfcl_eval.py run --model models/qwen2.5-coder-1.5b.gguf \\
        --mode auto,auto_grammar --categories simple,multiple,parallel --limit 50 \\
        --out eval/results/bfcl-1.5b/records.jsonl
    .venv/bin/python tools/bfcl_eval.py summary eval/results/bfcl-1.5b/records.jsonl --markdown OUT.md

Modes: `auto` (tool_choice auto; the server parses calls out of free text) and `auto_grammar`
(tool_choice auto and this server's `constrain_tool_calls: true`: once a call begins it is
grammar-constrained to a valid call of one of the tools). Requests: the BFCL question's messages,
temperature 0, `--max-tokens` (256), no system prompt (as BFCL's OpenAI FC handler),
`kv_policy` `--kv-policy` (full: the KV cache uncompressed), and `parallel_tool_calls: true` in the
parallel category.

Tools are built as BFCL's OpenAI FC handler builds them (model_handler/utils.py `convert_to_tool`
with `GORILLA_TO_OPENAPI`, style OPENAI_COMPLETIONS), reimplemented here because that module
imports tree_sitter, tenacity and more: each description gets BFCL's Python hint (" Note that the
provided function is in Python 3 syntax."), "." in names becomes "_" (mapped back per request
before scoring), "dict" -> "object", "float" -> "number" with `format: float` and " This is a float
type value." appended to the description, "tuple" -> "array", "any"/unknown -> "string", nested
properties and items converted the same way. The mapping table itself is imported from bfcl_eval.

Scoring is BFCL's `ast_checker` (eval_checker/ast_eval/ast_checker.py), imported as is; only its
import of bfcl_eval.constants.model_config (which pulls every API client) is replaced by a stub whose
models have underscore_to_dot False, correct since names are mapped back here. As BFCL's
eval_runner does: arguments are json.loads'ed (a failure is invalid, "decoder_failed"), the output
must be [{name: {param: value}}], then the checker runs with language PYTHON on the raw function
docs. Its rules: right function name; every required parameter present; no parameter outside the
doc or the answer; each value among the acceptable ones (strings compared case-insensitively
without spaces and ,./-_*^; int accepted for float; "" marks a parameter that may be omitted);
multiple: exactly one call; parallel: one call per ground-truth call, matched in any order.
An answer with no tool call is wrong ("no_call"). An HTTP error is recorded (valid false) but
retried by the next run. `selfcheck` scores the ground truth as calls (names as sent, arguments as
JSON text): each parameter's first acceptable value other than "" (BFCL lists "" first for some
required ones, e.g. simple_python_200), dict values one level deep as the checker reads them; it
also checks the converted tools are valid JSON Schema and the ground truth valid against them.

Records carry id, category, mode, model, max_tokens, kv_policy, content, tool_calls [{name, arguments}],
finish_reason, tokens, latency_s, http_status, valid, error_type, error (first 300 chars), raw
(the response body), and the provenance of tools/reasoning_eval.py (tools/eval_provenance.py):
commit, binary_sha256, server_cmd, server_env, plus tool_cmd. A file whose earlier rows name another
binary is refused unless --allow-mixed-binaries; rows of another model, max_tokens or kv_policy are
refused.

Summary (recounted from the records alone, the last record of an (id, mode) kept): per category x
mode, correct/total and %, answers with no call, answers with a call whose arguments are not a
JSON object ("unparsed"), answers with no call but call-like text (<tool_call> or a JSON "name"
key: a call the server may have left as text), HTTP errors; and where both modes ran on the same
ids, the paired discordant counts and an exact McNemar p (reasoning_eval.mcnemar_exact).
"""
import argparse
import collections
import copy
import json
import os
import re
import shlex
import sys
import threading
import time
import types
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
# This file is named like the bfcl_eval package: tools/ goes last on the path (eval_provenance and
# eval_transport still import from it), so `import bfcl_eval` finds the package, not this script.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != TOOLS] + [TOOLS]
CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel"}  # ours -> BFCL's
MODES = {"auto": {}, "auto_grammar": {"constrain_tool_calls": True}}
PY_HINT = " Note that the provided function is in Python 3 syntax."
CALL_LIKE = re.compile(r'<tool_call>|"name"\s*:')

# ---------------------------------------------------------------------------
# BFCL data and tools


def load_category(cat):
    """[(entry, ground_truth)] of a category in file order (BFCL_v4_<name>.json and possible_answer/)."""
    import bfcl_eval  # noqa: PLC0415
    data = os.path.join(os.path.dirname(bfcl_eval.__file__), "data")
    name = f"BFCL_v4_{CATEGORIES[cat]}.json"
    with open(os.path.join(data, name)) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(data, "possible_answer", name)) as f:
        truth = {r["id"]: r["ground_truth"] for r in map(json.loads, filter(str.strip, f))}
    return [(e, truth[e["id"]]) for e in entries]


def _cast_to_openai_type(properties, mapping):
    """BFCL's model_handler/utils.py _cast_to_openai_type (a missing description is taken as "")."""
    for key, value in properties.items():
        if "type" not in value:
            value["type"] = "string"
        else:
            var_type = value["type"]
            if var_type == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = mapping.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_to_openai_type(value["properties"], mapping)
            elif "items" in value:
                items = value["items"]
                items["type"] = mapping[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"], mapping)
    return properties


def convert_tools(functions):
    """(OpenAI tools, {sent name: BFCL name}) as BFCL's OpenAI FC handler sends them."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # noqa: PLC0415
    tools, names = [], {}
    for item in copy.deepcopy(functions):
        item["description"] = item["description"] + PY_HINT
        sent = item["name"].replace(".", "_")
        names[sent] = item["name"]
        item["name"] = sent
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_to_openai_type(item["parameters"]["properties"], GORILLA_TO_OPENAPI)
        tools.append({"type": "function", "function": item})
    return tools, names


# ---------------------------------------------------------------------------
# Scoring


def _bfcl_checker():
    """BFCL's ast_checker and Language, its model_config import stubbed (it imports every API client)."""
    stub = "bfcl_eval.constants.model_config"
    if stub not in sys.modules:
        m = types.ModuleType(stub)
        m.MODEL_CONFIG_MAPPING = collections.defaultdict(lambda: types.SimpleNamespace(underscore_to_dot=False))
        sys.modules[stub] = m
    from bfcl_eval.constants.enums import Language  # noqa: PLC0415
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: PLC0415
    return ast_checker, Language


def score(entry, truth, cat, tool_calls, names):
    """(valid, error_type, error) of an answer's tool calls [{name, arguments (JSON text)}]."""
    if not tool_calls:
        return False, "no_call", "no tool call in the answer"
    decoded = []
    for c in tool_calls:
        try:
            args = json.loads(c["arguments"])
        except (TypeError, ValueError) as e:
            return False, "ast_decoder:decoder_failed", f"arguments of {c['name']} are not JSON: {e}"
        if not isinstance(args, dict):
            return False, "ast_decoder:decoder_wrong_output_format", f"arguments of {c['name']} are not an object"
        decoded.append({names.get(c["name"], c["name"]): args})
    ast_checker, Language = _bfcl_checker()
    r = ast_checker(entry["function"], decoded, truth, Language.PYTHON, CATEGORIES[cat], "beacon")
    return bool(r["valid"]), r.get("error_type"), None if r["valid"] else json.dumps(r["error"], default=str)


def _first(values):
    """The first acceptable value other than "" (which marks an omissible parameter; None: omit it)."""
    return next((v for v in values if v != ""), None)


def _concrete(v):
    """A ground-truth value as an answer writes it: a dict (or list of dicts) holds, one level deep,
    acceptable values per key (BFCL's dict_checker, list_dict_checker)."""
    def one(d):
        return {k: _first(vals) for k, vals in d.items() if _first(vals) is not None}
    if isinstance(v, dict):
        return one(v)
    if isinstance(v, list) and v and all(isinstance(d, dict) for d in v):
        return [one(d) for d in v]
    return v


def truth_calls(truth):
    """The ground truth as an answer's tool calls: each parameter's first acceptable value other than ""
    (omitted when "" is its only one), arguments as JSON text, names as sent."""
    return [{"name": name.replace(".", "_"),
             "arguments": json.dumps({p: _concrete(_first(v)) for p, v in params.items() if _first(v) is not None})}
            for call in truth for name, params in call.items()]


def selfcheck(cats):
    import jsonschema  # noqa: PLC0415
    bad = 0
    for cat in cats:
        ok = schema_ok = fits = 0
        items = load_category(cat)
        for entry, truth in items:
            tools, names = convert_tools(entry["function"])
            valid, etype, err = score(entry, truth, cat, truth_calls(truth), names)
            ok += valid
            if not valid:
                print(f"  {entry['id']}: {etype} {err[:300]}")
            by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
            try:
                for s in by_name.values():
                    jsonschema.Draft202012Validator.check_schema(s)
                schema_ok += 1
            except jsonschema.SchemaError:
                pass
            fits += all(jsonschema.Draft202012Validator(by_name[c["name"]]).is_valid(json.loads(c["arguments"]))
                        for c in truth_calls(truth))
        n = len(items)
        bad += n - ok
        print(f"{cat:9s} scorer on ground truth: {ok}/{n} ({100 * ok / n:.1f}%); converted tool schemas valid "
              f"JSON Schema: {schema_ok}/{n}; ground truth valid against them: {fits}/{n}")
    return bad == 0


# ---------------------------------------------------------------------------
# Running


def post(base, body, timeout):
    """(http status, response body text) of a chat completion."""
    req = urllib.request.Request(base.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def load_records(path):
    """Records of a JSONL file, the last of each (id, mode) kept."""
    import eval_provenance as prov  # noqa: PLC0415
    return list({(r["id"], r["mode"]): r for r in prov.read_jsonl(path)}.values())


def run(args):
    import eval_provenance as prov  # noqa: PLC0415
    cats, modes = args.categories.split(","), args.mode.split(",")
    for x, known in ((cats, CATEGORIES), (modes, MODES)):
        if set(x) - set(known):
            sys.exit(f"unknown: {', '.join(sorted(set(x) - set(known)))} (known: {', '.join(known)})")
    model = os.path.basename(args.model) if args.model else args.model_name
    earlier = load_records(args.out)
    other = {(r.get("model"), r.get("max_tokens"), r.get("kv_policy")) for r in earlier} - {
        (model, args.max_tokens, args.kv_policy)}
    if other:
        sys.exit(f"{args.out} holds records of (model, max_tokens, kv_policy) {sorted(other, key=str)}; "
                 "write to another file")
    done = {(r["id"], r["mode"]) for r in earlier if r.get("http_status") == 200}
    todo = [(cat, mode, e, t) for cat in cats for e, t in load_category(cat)[:args.limit] for mode in modes
            if (e["id"], mode) not in done]
    print(f"[bfcl_eval] {len(todo)} requests to run ({len(done)} recorded)", file=sys.stderr, flush=True)
    if not todo:
        return
    binary = os.path.join(args.bin, "beacon-serve") if os.path.isdir(args.bin) else args.bin
    sha = None if args.url else prov.sha256_file(binary)
    refusal = prov.check_binaries(args.out, sha, args.allow_mixed_binaries)
    if refusal:
        sys.exit(refusal)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    server = None
    try:
        if args.url:
            base = args.url
        else:
            from eval_transport import Server  # noqa: PLC0415
            log = args.server_log or os.path.join(os.path.dirname(os.path.abspath(args.out)), "bfcl-serve.log")
            server = Server(binary, args.model, log, ["--threads", str(args.threads), *args.server_arg], tag="bfcl_eval")
            base = f"http://127.0.0.1:{server.http_port}"
        commit, commit_source = prov.binary_commit(os.path.dirname(binary), ROOT)
        provenance = {"commit": commit, "commit_source": commit_source, "binary_sha256": sha,
                      "server_cmd": shlex.join(server.args) if server else None,
                      "server_env": prov.server_env(os.environ) if server else None,
                      "tool_cmd": shlex.join([sys.executable, *sys.argv])}
        lock, t0, counts = threading.Lock(), time.time(), collections.Counter()

        def one(item):
            cat, mode, entry, truth = item
            tools, names = convert_tools(entry["function"])
            body = {"messages": entry["question"][0], "tools": tools, "tool_choice": "auto",
                    "temperature": 0, "max_tokens": args.max_tokens,
                    "request_id": f"bfcl-{entry['id']}-{mode}-{os.getpid()}", **MODES[mode]}
            if args.kv_policy != "server":
                body["kv_policy"] = args.kv_policy
            if cat == "parallel":
                body["parallel_tool_calls"] = True
            t = time.time()
            status, raw = post(base, body, args.request_timeout)
            rec = {"id": entry["id"], "category": cat, "mode": mode, "model": model, "max_tokens": args.max_tokens,
                   "kv_policy": args.kv_policy,
                   "http_status": status, "latency_s": round(time.time() - t, 3), "content": None, "tool_calls": [],
                   "finish_reason": None}
            if status == 200:
                out = json.loads(raw)
                ch = out["choices"][0]
                msg = ch["message"]
                rec.update(content=msg.get("content"), finish_reason=ch.get("finish_reason"),
                           tool_calls=[{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                                       for c in msg.get("tool_calls") or []],
                           prompt_tokens=out["usage"]["prompt_tokens"],
                           completion_tokens=out["usage"]["completion_tokens"])
                valid, etype, err = score(entry, truth, cat, rec["tool_calls"], names)
            else:
                valid, etype, err = False, f"http_{status}", raw
            rec.update(valid=valid, error_type=etype, error=err[:300] if err else None, raw=raw, **provenance)
            with lock:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                counts[valid] += 1
                print(f"[bfcl_eval] {mode} {entry['id']} {'ok' if valid else 'WRONG ' + str(etype)} "
                      f"{rec['finish_reason']} {rec['latency_s']:.1f}s | {sum(counts.values())}/{len(todo)} "
                      f"in {time.time() - t0:.0f}s", file=sys.stderr, flush=True)

        from eval_transport import run_pool  # noqa: PLC0415
        run_pool(todo, one, args.concurrency, server, "bfcl_eval")
    finally:
        if server is not None:
            server.close()


# ---------------------------------------------------------------------------
# Summary


def _args_object(c):
    try:
        return isinstance(json.loads(c["arguments"]), dict)
    except (TypeError, ValueError):
        return False


def summary_text(records):
    cells = collections.defaultdict(dict)  # (model, category, mode) -> {id: record}
    for r in records:
        for cat in (r["category"], "all"):
            cells[(r["model"], cat, r["mode"])][r["id"]] = r
    order = {c: i for i, c in enumerate([*CATEGORIES, "all"])}
    morder = {m: i for i, m in enumerate(MODES)}
    keys = sorted(cells, key=lambda k: (k[0], order.get(k[1], 9), morder.get(k[2], 9), k[2]))
    lines = ["| model | category | mode | correct | % | no call | unparsed args | call-like text | HTTP errors | "
             "mean latency s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for k in keys:
        rs = list(cells[k].values())
        n, ok = len(rs), sum(bool(r["valid"]) for r in rs)
        ok200 = [r for r in rs if r.get("http_status") == 200]
        no_call = sum(1 for r in ok200 if not r["tool_calls"])
        unparsed = sum(1 for r in ok200 if any(not _args_object(c) for c in r["tool_calls"]))
        texty = sum(1 for r in ok200 if not r["tool_calls"] and CALL_LIKE.search(r.get("content") or ""))
        lat = sum(r["latency_s"] for r in rs) / n
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {ok}/{n} | {100 * ok / n:.1f} | {no_call} | {unparsed} | "
                     f"{texty} | {n - len(ok200)} | {lat:.1f} |")
    from reasoning_eval import mcnemar_exact  # noqa: PLC0415 (one exact McNemar for every eval)
    pairs = []
    for model, cat in sorted({(k[0], k[1]) for k in keys}, key=lambda mc: (mc[0], order.get(mc[1], 9))):
        a, g = cells.get((model, cat, "auto")), cells.get((model, cat, "auto_grammar"))
        common = sorted(set(a or {}) & set(g or {}))
        if common:
            b = sum(1 for i in common if a[i]["valid"] and not g[i]["valid"])
            c = sum(1 for i in common if g[i]["valid"] and not a[i]["valid"])
            both = sum(1 for i in common if a[i]["valid"] and g[i]["valid"])
            pairs.append(f"| {model} | {cat} | {len(common)} | {both} | {b} | {c} | {mcnemar_exact(b, c):.3g} |")
    if pairs:
        lines += ["", "Paired on the ids both modes answered (exact McNemar, two-sided):", "",
                  "| model | category | ids | both right | auto right, grammar wrong | grammar right, auto wrong | p |",
                  "|---|---|---|---|---|---|---|", *pairs]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("selfcheck", help="score the ground truth itself (must be 100%%)")
    c.add_argument("--categories", default=",".join(CATEGORIES))
    r = sub.add_parser("run", help="ask beacon-serve, appending records")
    r.add_argument("--out", required=True, help="records JSONL (appended; recorded (id, mode) pairs are skipped)")
    r.add_argument("--mode", default="auto,auto_grammar", help="comma list of " + ", ".join(MODES))
    r.add_argument("--categories", default=",".join(CATEGORIES), help="comma list of " + ", ".join(CATEGORIES))
    r.add_argument("--limit", type=int, help="the first N entries of each category (file order)")
    r.add_argument("--max-tokens", type=int, default=256)
    r.add_argument("--kv-policy", default="full", help="kv_policy of every request (default full: no KV "
                   "compression); `server` sends none (the server's default, beacon at budget 512)")
    r.add_argument("--model", help="GGUF to start beacon-serve with")
    r.add_argument("--url", help="attach to a running server: http://HOST:PORT")
    r.add_argument("--model-name", default="attached", help="the model's name in records with --url")
    r.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="beacon-serve, or its directory")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--server-arg", action="append", default=[], help="extra beacon-serve flag (repeatable; "
                   "--server-arg=--max-tools=64)")
    r.add_argument("--server-log", help="beacon-serve's log (default: bfcl-serve.log beside --out)")
    r.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    r.add_argument("--request-timeout", type=float, default=3600)
    from eval_transport import add_records_args  # noqa: PLC0415
    add_records_args(r, sub)
    args = ap.parse_args(argv)
    if args.cmd == "selfcheck":
        sys.exit(0 if selfcheck(args.categories.split(",")) else 1)
    elif args.cmd == "run":
        if not args.url and not args.model:
            ap.error("run needs --model (start a server) or --url (attach)")
        run(args)
    else:
        from eval_transport import print_summary  # noqa: PLC0415
        print_summary(summary_text(load_records(args.records)), args.markdown)


if __name__ == "__main__":
    main()
