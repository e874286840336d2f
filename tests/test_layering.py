"""The layering of the tree (tests/layering.txt): every quoted #include of
ours in every C++/CUDA source names a part its own part may include. Fails
naming file:line, the include and the rule. Also checks that the checker
itself catches a forbidden include, on a small tree it writes."""
import os
import re
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
EXTS = (".h", ".cc", ".cu", ".cuh")
NEVER_INCLUDED = {"tools", "apps"}


def read_rules(path):
    rules = {}
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        part, _, allowed = line.partition(":")
        rules[part.strip()] = set(allowed.split())
    return rules


def violations(root, rules):
    """(file:line, include, why) for every include that breaks a rule."""
    parts = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    out = []
    for part in sorted(parts):
        if part.startswith(".") or part.startswith("build") or part in ("models", "docs", "deploy", "configs"):
            continue
        for dirpath, _, files in os.walk(os.path.join(root, part)):
            for name in sorted(files):
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                for n, line in enumerate(open(path, errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1).split("/")[0]
                    if target not in parts or target == part:
                        continue  # a sibling header ("foo.h") or ourselves
                    if target in NEVER_INCLUDED:
                        out.append((f"{rel}:{n}", m.group(1), f"nothing includes {target}/"))
                    elif part not in rules:
                        out.append((f"{rel}:{n}", m.group(1), f"{part}/ has no line in layering.txt"))
                    elif target not in rules[part]:
                        allowed = " ".join(sorted(rules[part])) or "nothing of ours"
                        out.append((f"{rel}:{n}", m.group(1), f"{part}/ may include {allowed}"))
    return out


def test_tree_follows_the_table():
    rules = read_rules(os.path.join(SRC, "tests", "layering.txt"))
    bad = violations(SRC, rules)
    assert not bad, "layering violations:\n" + "\n".join(f"  {w}: #include \"{i}\" ({why})" for w, i, why in bad)


def test_checker_catches_a_forbidden_include():
    rules = read_rules(os.path.join(SRC, "tests", "layering.txt"))
    with tempfile.TemporaryDirectory() as root:
        for part, body in {"kv": '#include "server/engine_loop.h"\n#include "kernels/cpu/ops.h"\n',
                           "server": '#include "tools/x.h"\n#include "kv/kv_cache.h"\n',
                           "tools": "", "kernels": "", "newpart": '#include "kv/kv_cache.h"\n'}.items():
            os.makedirs(os.path.join(root, part))
            with open(os.path.join(root, part, "a.cc"), "w") as f:
                f.write(body)
        bad = {(w, i) for w, i, _ in violations(root, rules)}
        assert bad == {("kv/a.cc:1", "server/engine_loop.h"), ("server/a.cc:1", "tools/x.h"),
                       ("newpart/a.cc:1", "kv/kv_cache.h")}, bad


if __name__ == "__main__":
    test_checker_catches_a_forbidden_include()
    test_tree_follows_the_table()
    print("layering: ok")
