"""The layering of the tree (tests/layering.txt): every #include of ours in
every C++/CUDA source ("kv/x.h" or <kv/x.h>: the first path component is a
top-level folder of the repo) names a part its own part may include. Fails
naming file:line, the include and the rule. Every main() is in apps/ (or a
test's in tests/). Also checks that the checker itself catches forbidden
includes and stray mains, on a small tree it writes."""
import os
import re
import subprocess
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')
EXTS = (".h", ".cc", ".cu", ".cuh")
NEVER_INCLUDED = {"tools", "apps"}  # scripts and program entry points
NOT_SOURCE = {"models", "docs", "deploy", "configs"}


def read_rules(path):
    """{part: set of parts it may include}; "*" in the set means any part."""
    rules = {}
    for n, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        part, colon, allowed = line.partition(":")
        assert colon and part.strip(), f"{path}:{n}: expected 'part: parts it may include'"
        rules[part.strip()] = set(allowed.split())
    return rules


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


def violations(root, rules):
    """(file:line, include, why) for every include that breaks a rule, and
    ("tests/layering.txt", part, why) for a table line naming no folder."""
    parts = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}
    out = [("tests/layering.txt", p, "no such top-level folder") for p in sorted(rules) if p not in parts]
    out += [("tests/layering.txt", f"{p}: {a}", "no such top-level folder")
            for p in sorted(rules) for a in sorted(rules[p]) if a != "*" and a not in parts]
    for rel in source_files(root):
        part = rel.split("/")[0]
        if part == rel or part in NOT_SOURCE or part.startswith("build"):
            continue
        for n, line in enumerate(open(os.path.join(root, rel), errors="replace"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1) or m.group(2)
            target = inc.split("/")[0]
            if "/" not in inc or target not in parts or target == part:
                continue  # a sibling header ("foo.h"), a system or third-party header, or our own part
            if target in NEVER_INCLUDED:
                out.append((f"{rel}:{n}", inc, f"nothing includes {target}/"))
            elif part not in rules:
                out.append((f"{rel}:{n}", inc, f"{part}/ has no line in tests/layering.txt"))
            elif target not in rules[part] and "*" not in rules[part]:
                allowed = " ".join(sorted(rules[part])) or "nothing of ours"
                out.append((f"{rel}:{n}", inc, f"{part}/ may include {allowed}"))
    return out


def unused(root, rules):
    """(part, allowed part) pairs of the table that no include uses: a rule
    that could be tighter (reported, not a failure)."""
    used = set()
    for rel in source_files(root):
        part = rel.split("/")[0]
        for line in open(os.path.join(root, rel), errors="replace"):
            m = INCLUDE.match(line)
            if m:
                used.add((part, (m.group(1) or m.group(2)).split("/")[0]))
    return [(p, a) for p in sorted(rules) for a in sorted(rules[p]) if a != "*" and (p, a) not in used]


def test_tree_follows_the_table():
    rules = read_rules(os.path.join(SRC, "tests", "layering.txt"))
    bad = violations(SRC, rules)
    assert not bad, "layering violations:\n" + "\n".join(f"  {w}: #include \"{i}\" ({why})" for w, i, why in bad)
    for p, a in unused(SRC, rules):
        print(f"layering: note: {p}/ may include {a}/ but does not (tests/layering.txt could be tighter)")


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


def test_checker_catches_a_forbidden_include():
    rules = read_rules(os.path.join(SRC, "tests", "layering.txt"))
    bodies = {"kv": '#include "server/engine_loop.h"\n#include "kernels/cpu/ops.h"\n',
              "engine": '#include <scheduler/scheduler.h>\n#include <vector>\n#include "kv/x.h"\n',
              "kernels": '#include "util/csv.h"\n#include "kernels/cpu/ops.h"\n#include "ops.h"\n',
              "loadtest": '#include "proto/x.h"\n  #  include "engine/runtime.h"\n',
              "server": '#include "tools/x.h"\n#include "kv/kv_cache.h"\n',
              "tests": '#include "apps/x.h"\n#include "server/x.h"\n#include "planner/x.h"\n',
              "apps": '#include "server/x.h"\n#include "newpart/x.h"\n',
              "newpart": '#include "kv/kv_cache.h"\n'}
    with tempfile.TemporaryDirectory() as root:
        for part in set(rules) | {a for allowed in rules.values() for a in allowed if a != "*"} | {"tools"}:
            os.makedirs(os.path.join(root, part))
        for part, body in bodies.items():
            os.makedirs(os.path.join(root, part), exist_ok=True)
            with open(os.path.join(root, part, "a.cc"), "w") as f:
                f.write(body)
        bad = {(w, i) for w, i, _ in violations(root, rules)}
        assert bad == {("kv/a.cc:1", "server/engine_loop.h"), ("engine/a.cc:1", "scheduler/scheduler.h"),
                       ("kernels/a.cc:1", "util/csv.h"), ("loadtest/a.cc:2", "engine/runtime.h"),
                       ("server/a.cc:1", "tools/x.h"), ("tests/a.cc:1", "apps/x.h"),
                       ("newpart/a.cc:1", "kv/kv_cache.h")}, bad
        with open(os.path.join(root, "server", "serve_main.cc"), "w") as f:
            f.write("int main(int argc, char** argv) { return 0; }\n")
        assert stray_mains(root) == ["server/serve_main.cc:1"], stray_mains(root)
        os.rmdir(os.path.join(root, "workload"))  # a table line naming a folder that is gone
        assert ("tests/layering.txt", "workload") in {(w, i) for w, i, _ in violations(root, rules)}


if __name__ == "__main__":
    test_checker_catches_a_forbidden_include()
    test_tree_follows_the_table()
    test_mains_live_in_apps()
    print("layering: ok")
