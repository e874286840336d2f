"""The layering of the tree (tests/layering.txt): every #include of ours in
every C++/CUDA source ("kv/x.h" or <kv/x.h>: the first path component is a
top-level folder of the repo) names a part its own part may include. Fails
naming file:line, the include and the rule. Every main() is in apps/ (or a
test's in tests/). Also checks that the checker itself catches forbidden
includes and stray mains, on a small tree it writes.

Parts and sub-parts. A part is a top-level folder, or a sub-folder that the
table names (as a rule key, or on a rule's right-hand side) so that it can
have arrows of its own. The part of a file, and of an include's target, is
the longest part of the table that is a prefix of its path on a '/'
boundary; failing that, its top-level folder. A part's name on the right of
a rule covers the part and every sub-part under it, and so does a file's
own part: an include inside one's own part (sub-parts included) is free.
Example: with the line `model/tokenizer:`, model/tokenizer/ is a part of
its own. Its files may include each other, but not model/'s other files:
model/tokenizer/bpe_model.cc including model/weights.h is judged by the
model/tokenizer line (which would need `model`), not by model's.
model/gguf_tokenizer.cc including model/tokenizer/tokenizer.h stays free, and
every part that may include model/ may include model/tokenizer/ too. A sub-part named
in the table needs its own line and an existing folder, like a top-level one.

Header rules. A line `!util/cli_args.h: apps tests` says only those parts
(and the header's own part) may include that one header, on top of the part
rules; a violation fails. `?util/cli_args.h: ...` states the same rule but
only reports its violations (a rule the tree does not follow yet)."""
import os
import re
import subprocess
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')
EXTS = (".h", ".cc", ".cu", ".cuh")
NEVER_INCLUDED = {"tools", "apps"}  # scripts and program entry points
NOT_SOURCE = {"models", "docs", "deploy", "configs"}
TABLE = "tests/layering.txt"


def read_table(path):
    """({part: set of parts it may include}, {header: (set of parts that may
    include it, enforced)}); "*" in a part's set means any part."""
    rules, headers = {}, {}
    for n, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, colon, allowed = line.partition(":")
        key = key.strip()
        assert colon and key.lstrip("!?"), f"{path}:{n}: expected 'part: parts it may include'"
        if key[0] in "!?":
            headers[key[1:]] = (set(allowed.split()), key[0] == "!")
        else:
            rules[key.rstrip("/")] = {a.rstrip("/") for a in allowed.split()}
    return rules, headers


def read_rules(path):
    """{part: set of parts it may include}; "*" in the set means any part."""
    return read_table(path)[0]


def table_parts(rules):
    """Every part the table names: rule keys and the parts on their right."""
    return (set(rules) | {a for allowed in rules.values() for a in allowed}) - {"*"}


def part_of(rel, named):
    """The longest part in `named` that prefixes rel on a '/' boundary, else
    rel's top-level folder."""
    bits = rel.split("/")
    for k in range(len(bits) - 1, 1, -1):
        if "/".join(bits[:k]) in named:
            return "/".join(bits[:k])
    return bits[0]


def covers(name, part):
    """Whether a part's name covers part: the part itself or a sub-part under it."""
    return part == name or part.startswith(name + "/")


def source_files(root):
    """Paths (relative to root) of the C++/CUDA sources: git's tracked and
    untracked-but-not-ignored files when root is a work tree (so build folders
    and virtual environments are skipped), otherwise a walk of the tree."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
        if top.returncode == 0 and os.path.realpath(top.stdout.strip()) == os.path.realpath(root):
            out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                                 capture_output=True, text=True, check=True).stdout
            return sorted(p for p in out.split("\0") if p.endswith(EXTS) and os.path.isfile(os.path.join(root, p)))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not (dirpath == root and d.startswith("build"))]
        found += [os.path.relpath(os.path.join(dirpath, f), root) for f in files if f.endswith(EXTS)]
    return sorted(found)


def includes_of_ours(root, tops):
    """(file, line number, file's top-level folder, include) for every include
    whose first path component is a top-level folder in tops, in the sources
    that are ours (not docs, models, build folders or top-level files)."""
    for rel in source_files(root):
        top = rel.split("/")[0]
        if top == rel or top in NOT_SOURCE or top.startswith("build"):
            continue
        for n, line in enumerate(open(os.path.join(root, rel), errors="replace"), 1):
            m = INCLUDE.match(line)
            if m:
                inc = m.group(1) or m.group(2)
                if "/" in inc and inc.split("/")[0] in tops:
                    yield rel, n, inc  # not a sibling header ("foo.h"), a system or third-party one


def missing_folders(root, rules, headers=None):
    """("tests/layering.txt", what, why) for every part or header the table
    names that is not in the tree."""
    tops = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}

    def why(p):
        if "/" not in p:
            return None if p in tops else "no such top-level folder"
        return None if os.path.isdir(os.path.join(root, p)) else "no such folder"

    out = [(TABLE, p, why(p)) for p in sorted(rules) if why(p)]
    out += [(TABLE, f"{p}: {a}", why(a)) for p in sorted(rules) for a in sorted(rules[p]) if a != "*" and why(a)]
    for h, (allowed, enforced) in sorted((headers or {}).items()):
        key = ("!" if enforced else "?") + h
        if not os.path.isfile(os.path.join(root, h)):
            out.append((TABLE, key, "no such header"))
        out += [(TABLE, f"{key}: {a}", why(a)) for a in sorted(allowed) if why(a)]
    return out


def violations(root, rules, headers=None):
    """(file:line, include, why) for every include that breaks a part rule or
    an enforced header rule, and ("tests/layering.txt", part, why) for a table
    line naming no folder."""
    tops = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}
    named = table_parts(rules)
    out = missing_folders(root, rules, headers)
    for rel, n, inc in includes_of_ours(root, tops):
        part, target = part_of(rel, named), part_of(inc, named)
        if covers(part, target):
            continue  # our own part, or a sub-part under it
        top = inc.split("/")[0]
        if top in NEVER_INCLUDED:
            out.append((f"{rel}:{n}", inc, f"nothing includes {top}/"))
        elif part not in rules:
            out.append((f"{rel}:{n}", inc, f"{part}/ has no line in {TABLE}"))
        elif "*" not in rules[part] and not any(covers(a, target) for a in rules[part]):
            allowed = " ".join(sorted(rules[part])) or "nothing of ours"
            out.append((f"{rel}:{n}", inc, f"{part}/ may include {allowed}"))
    out += [(w, i, why) for w, i, why, enforced in header_breaks(root, rules, headers or {}) if enforced]
    return out


def header_breaks(root, rules, headers):
    """(file:line, include, why, enforced) for every include of a header with
    a header rule, from a part the rule does not list."""
    tops = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}
    named = table_parts(rules) | {a for allowed, _ in headers.values() for a in allowed}
    out = []
    for rel, n, inc in includes_of_ours(root, tops):
        if inc not in headers:
            continue
        allowed, enforced = headers[inc]
        part = part_of(rel, named)
        if covers(part_of(inc, named), part) or any(covers(a, part) for a in allowed):
            continue  # the header's own part, or a part the rule lists
        out.append((f"{rel}:{n}", inc, f"only {' '.join(sorted(allowed))} may include {inc}", enforced))
    return out


def unused(root, rules):
    """(part, allowed part) pairs of the table that no include uses: a rule
    that could be tighter (reported, not a failure)."""
    tops = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}
    named = table_parts(rules)
    used = {(part_of(rel, named), part_of(inc, named)) for rel, _, inc in includes_of_ours(root, tops)}
    return [(p, a) for p in sorted(rules) for a in sorted(rules[p])
            if a != "*" and not any(q == p and covers(a, t) for q, t in used)]


def test_tree_follows_the_table():
    rules, headers = read_table(os.path.join(SRC, TABLE))
    bad = violations(SRC, rules, headers)
    assert not bad, "layering violations:\n" + "\n".join(f"  {w}: #include \"{i}\" ({why})" for w, i, why in bad)
    for p, a in unused(SRC, rules):
        print(f"layering: note: {p}/ may include {a}/ but does not ({TABLE} could be tighter)")
    for w, i, why, _ in header_breaks(SRC, rules, headers):
        print(f"layering: note: {w}: #include \"{i}\" ({why}; a report-only rule in {TABLE})")


README_ARROWS = re.compile(r"^May include:\s*(.*)$", re.M)


def readme_arrows(root, part):
    """The parts a part's README says it may include (its "May include:"
    line: backticked folder names; "anything" for "*", "nothing of ours"
    for none), or None when it has no README or no such line."""
    path = os.path.join(root, part, "README.md")
    if not os.path.exists(path):
        return None
    m = README_ARROWS.search(open(path, encoding="utf-8").read())
    if m is None:
        return None
    line = m.group(1)
    if line.startswith("anything"):
        return {"*"}
    return {name.rstrip("/") for name in re.findall(r"`([a-z0-9_/]+)`", line)}


def test_readmes_state_the_arrows():
    """Every part of the table has a README whose "May include:" line names
    exactly the parts the table gives it, so a folder says what it may use
    where a newcomer looks first (issue 33)."""
    rules = read_rules(os.path.join(SRC, TABLE))
    bad = []
    for part, allowed in sorted(rules.items()):
        said = readme_arrows(SRC, part)
        if said is None:
            bad.append(f"{part}/README.md: no 'May include:' line (the table says {sorted(allowed) or 'nothing'})")
        elif said != allowed:
            bad.append(f"{part}/README.md says {sorted(said)}, {TABLE} says {sorted(allowed)}")
    assert not bad, "READMEs out of step with the layering table:\n  " + "\n  ".join(bad)


MAIN = re.compile(r"^\s*(?:int\s+main\s*\(|BENCHMARK_MAIN\s*\()")
MAIN_HOMES = ("apps", "tests")  # program entry points; test-only drivers


def stray_mains(root):
    """file:line of every main() outside apps/ and tests/."""
    out = []
    for rel in source_files(root):
        if rel.split("/")[0] in MAIN_HOMES:
            continue
        for n, line in enumerate(open(os.path.join(root, rel), errors="replace"), 1):
            if MAIN.match(line):
                out.append(f"{rel}:{n}")
    return out


def test_mains_live_in_apps():
    bad = stray_mains(SRC)
    assert not bad, "a program's main belongs in apps/ (apps/README.md):\n" + "\n".join(f"  {w}" for w in bad)


def write_tree(root, bodies, folders=()):
    """Writes each {path: text} under root, and makes the folders."""
    for d in folders:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for rel, body in bodies.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write(body)


def test_checker_catches_a_forbidden_include():
    rules = read_rules(os.path.join(SRC, TABLE))
    bodies = {"kv": '#include "engine/serving/engine_loop.h"\n#include "kernels/cpu/ops.h"\n',
              "engine": '#include <scheduler/scheduler.h>\n#include <vector>\n#include "kv/x.h"\n',
              "kernels": '#include "util/csv.h"\n#include "kernels/cpu/ops.h"\n#include "ops.h"\n',
              "loadtest": '#include "proto/x.h"\n  #  include "engine/runtime.h"\n',
              "server": '#include "tools/x.h"\n#include "kv/store/kv_cache.h"\n',
              "tests": '#include "apps/x.h"\n#include "server/x.h"\n#include "planner/x.h"\n',
              "apps": '#include "server/x.h"\n#include "newpart/x.h"\n',
              "newpart": '#include "kv/store/kv_cache.h"\n'}
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {f"{part}/a.cc": body for part, body in bodies.items()}, table_parts(rules) | {"tools"})
        bad = {(w, i) for w, i, _ in violations(root, rules)}
        assert bad == {("kv/a.cc:1", "engine/serving/engine_loop.h"), ("engine/a.cc:1", "scheduler/scheduler.h"),
                       ("kernels/a.cc:1", "util/csv.h"), ("loadtest/a.cc:2", "engine/runtime.h"),
                       ("server/a.cc:1", "tools/x.h"), ("tests/a.cc:1", "apps/x.h"),
                       ("newpart/a.cc:1", "kv/store/kv_cache.h")}, bad
        with open(os.path.join(root, "server", "serve_main.cc"), "w") as f:
            f.write("int main(int argc, char** argv) { return 0; }\n")
        assert stray_mains(root) == ["server/serve_main.cc:1"], stray_mains(root)
        os.rmdir(os.path.join(root, "workload"))  # a table line naming a folder that is gone
        assert ("tests/layering.txt", "workload") in {(w, i) for w, i, _ in violations(root, rules)}


def test_checker_handles_sub_parts_and_header_rules():
    # A table of its own, in the file's syntax, with sub-parts on both sides and two header rules.
    table = ("# a comment",
             "util:",
             "proto:        util          # used by nothing: a note",
             "engine:       util",
             "engine/model: util          # a sub-part: not engine's other files",
             "eval:         engine/model  # a sub-part on the right",
             "server:       engine util",
             "server/http:  server util   # its parent's other files, by its own line",
             "server/grpc:  proto",
             "apps:         *",
             "tests:        *",
             "!util/cli_args.h: apps tests",
             "?util/csv.h:      apps")
    bodies = {
        "server/http/a.cc": '#include "server/metrics.h"\n#include "util/log.h"\n#include "server/http/b.h"\n'
                            '#include "engine/x.h"\n',
        "server/grpc/a.cc": '#include "proto/x.h"\n#include "server/metrics.h"\n',
        "server/a.cc": '#include "server/http/b.h"\n#include "engine/model/m.h"\n#include "util/cli_args.h"\n',
        "eval/a.cc": '#include "engine/model/m.h"\n#include "engine/runtime.h"\n',
        "engine/model/a.cc": '#include "util/log.h"\n#include "engine/runtime.h"\n#include "engine/model/b.h"\n',
        "engine/a.cc": '#include "engine/model/m.h"\n#include "util/csv.h"\n',
        "apps/a.cc": '#include "util/cli_args.h"\n#include "util/csv.h"\n',
        "tests/a.cc": '#include "util/cli_args.h"\n',
        "util/cli_args.h": '#include "util/csv.h"\n',
        "util/csv.h": "\n",
    }
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, bodies, ["proto", "tests"])
        with open(os.path.join(root, "table.txt"), "w") as f:
            f.write("\n".join(table) + "\n")
        rules, headers = read_table(os.path.join(root, "table.txt"))
        assert rules["eval"] == {"engine/model"} and headers["util/csv.h"] == ({"apps"}, False), (rules, headers)
        assert part_of("server/http/a.cc", table_parts(rules)) == "server/http"
        assert part_of("server/httpd/a.cc", table_parts(rules)) == "server"  # a '/' boundary, not a string prefix
        assert part_of("engine/model/m.h", table_parts(rules)) == "engine/model"
        got = {(w, i): why for w, i, why in violations(root, rules, headers)}
        assert set(got) == {("server/http/a.cc:4", "engine/x.h"),       # a sub-part's own line governs it
                            ("server/grpc/a.cc:2", "server/metrics.h"),  # ... also towards its parent's files
                            ("eval/a.cc:2", "engine/runtime.h"),         # a sub-part on the right is only that
                            ("engine/model/a.cc:2", "engine/runtime.h"),
                            ("server/a.cc:3", "util/cli_args.h")}, got   # an enforced header rule
        assert got[("server/grpc/a.cc:2", "server/metrics.h")] == "server/grpc/ may include proto"
        assert got[("server/a.cc:3", "util/cli_args.h")] == "only apps tests may include util/cli_args.h"
        # The report-only rule: engine/ including util/csv.h is a note, not a failure.
        notes = {(w, i, enforced) for w, i, _, enforced in header_breaks(root, rules, headers)}
        assert notes == {("engine/a.cc:2", "util/csv.h", False), ("server/a.cc:3", "util/cli_args.h", True)}, notes
        assert unused(root, rules) == [("proto", "util")], unused(root, rules)
        # A sub-part the table names that is not a folder, as a key and on the right; a missing header.
        rules["server/ops"] = {"util"}
        rules["apps"] = {"server/gone"}
        headers["util/gone.h"] = ({"apps"}, True)
        got = {(w, i): why for w, i, why in violations(root, rules, headers)}
        assert got[("tests/layering.txt", "server/ops")] == "no such folder", got
        assert got[("tests/layering.txt", "apps: server/gone")] == "no such folder", got
        assert got[("tests/layering.txt", "!util/gone.h")] == "no such header", got


if __name__ == "__main__":
    test_checker_catches_a_forbidden_include()
    test_checker_handles_sub_parts_and_header_rules()
    test_tree_follows_the_table()
    test_mains_live_in_apps()
    test_readmes_state_the_arrows()
    print("layering: ok")
