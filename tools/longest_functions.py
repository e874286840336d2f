#!/usr/bin/env python3
"""The longest function bodies in the C++/CUDA sources (issue 33's before and
after numbers come from this script, so both are counted the same way).

    tools/longest_functions.py [--top N] [--min-lines L] [paths]

What it counts: for every function with a body (free functions, members
defined in or out of their class, constructors, operators, CUDA kernels), the
lines from the line of its opening '{' to the line of its closing '}', both
included. Lambdas and local classes count as part of the function they are
written in; they are not listed on their own. Blank lines and comments inside
the body count too: the number is the body's height on screen.

How: comments, string and character literals (raw strings too) and
preprocessor lines are blanked first, keeping the line breaks, then braces
are matched. A '{' at namespace or class level opens a function body when the
text before it (back to the last ';', '{' or '}' at that level) looks like a
function head: it has a '(', and is not a control statement, an initialiser
(`= ...(` or a trailing '=' or ','), or a member's brace initialiser in a
constructor's init list.

Limits: a heuristic, not a parser. It runs no preprocessor: directive lines
are dropped but the code of every #if branch is kept, so a function head or
brace written once per branch can throw the matching off; a macro that
expands to a function is not seen as one. A head with parentheses inside
template arguments (`std::function<void(int)> Make()`) gets a wrong name,
though the right length. A namespace-level initialiser that calls a function
and then opens a brace may be taken for a function. Good enough to rank the
long functions and to compare two versions of the tree.

Output: a summary line (files, bodies, how many are over 100 and over 60
lines), then one line per function, longest first:
`lines  file:line  name`, where line is that of the opening '{'.
--top N lists the N longest (default 15; 0 lists all); --min-lines L only
those of at least L lines. paths are files or folders (folders are walked,
skipping hidden and build* folders). Without paths: every file git tracks
ending in .h, .cc, .cu or .cuh, outside tests/ and build* folders, under the
repository this script is in.
"""
import argparse
import os
import re
import subprocess
import sys

EXTS = (".h", ".cc", ".cu", ".cuh")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^(\s]*)\(')
CONTROL = re.compile(r"^\s*(?:if|for|while|switch|catch|do|else|try)\b")
# namespace/class/struct/enum/union/extern "C" (its "C" already blanked to ""), maybe after a template head.
SCOPE = re.compile(r'^\s*(?:template\s*<.*>\s*)?(?:namespace|class|struct|enum|union|extern\s*"")\b', re.S)
# An '=' that is an assignment or initialiser (not ==, <=, += ...) before the first '(' of a head.
INITIALISER = re.compile(r"(?<![=!<>+\-*/%&|^])=(?!=)[^()]*\(")
NAME = re.compile(r"((?:[\w~]+::)*(?:operator\s*\S+?|[~\w]+))\s*$")


def blank_code(src):
    """src with comments, literals and preprocessor lines blanked. Every line
    break stays, so line numbers do not move; a literal becomes "" or ''."""
    out = []
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start:
            j = i
            while j < n and src[j] in " \t":
                j += 1
            if j < n and src[j] == "#":  # a directive, with its backslash continuations
                while j < n and src[j] != "\n":
                    if src.startswith("\\\n", j):
                        out.append("\n")
                        j += 2
                    else:
                        j += 1
                i = j
                line_start = False
                continue
            line_start = False
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
        elif src.startswith("//", i):
            while i < n and src[i] != "\n":
                i += 1
        elif src.startswith("/*", i):
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * src.count("\n", i, end))
            i = end
        elif (m := RAW_STRING.match(src, i)) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            end = src.find(close, m.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c == '"' or (c == "'" and not in_number(src, i)):
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" and src[j + 1:j + 2] != "\n" else 1
            out.append(c + c)
            i = j + 1 if j < n and src[j] == c else j  # an unclosed literal ends at its line's end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def in_number(src, i):
    """Whether the quote at i is a digit separator (1'000'000, 0xFF'FF)."""
    j = i
    while j > 0 and (src[j - 1].isalnum() or src[j - 1] in "_'."):
        j -= 1
    return j < i and src[j].isdigit()


def function_name(head):
    """The name in a function head: what comes before its first '('."""
    head = re.sub(r"\s+", " ", re.sub(r"__launch_bounds__\s*\([^)]*\)", "", head)).strip()
    paren = head.find("(")
    if paren < 0:
        return None
    m = NAME.search(head[:paren])
    return m.group(1) if m else None


def opens_function(head, before):
    """Whether a '{' at namespace or class level, after head (the text back to
    the last ';', '{' or '}' there) and right after the character before,
    opens a function body. Returns "scope", "init" (a member's brace
    initialiser in a constructor's init list), "function" or "other"."""
    colon = head.find(":")
    if SCOPE.match(head) and "(" not in head[:colon if colon >= 0 else None]:
        return "scope"
    if (before.isalnum() or before in "_>") and re.search(r"\)\s*:", head):
        return "init"
    if "(" not in head or head.rstrip().endswith(("=", ",")) or CONTROL.match(head):
        return "other"
    before_paren = re.sub(r"\boperator\s*=(?!=)", "operator", head.split("(")[0]) + "("
    return "other" if INITIALISER.search(before_paren) else "function"


def function_bodies(src):
    """[(lines, first line, name)] of every function body in src (C++ text)."""
    code = blank_code(src)
    found = []
    stack = []  # (kind, line of its '{', name); kind: scope, init, function, other or inner
    head_start, line = 0, 1
    for i, c in enumerate(code):
        at_scope_level = all(kind == "scope" for kind, _, _ in stack)
        if c == "\n":
            line += 1
        elif c == ";" and at_scope_level:
            head_start = i + 1
        elif c == "{":
            if not at_scope_level:
                stack.append(("inner", line, None))  # a block, lambda or local class inside a body
                continue
            head = code[head_start:i]
            kind = opens_function(head, code[i - 1] if i else " ")
            stack.append((kind, line, function_name(head) if kind == "function" else None))
            if kind == "scope":
                head_start = i + 1
        elif c == "}" and stack:
            kind, start, name = stack.pop()
            if kind == "function":
                found.append((line - start + 1, start, name))
            if kind != "init" and all(k == "scope" for k, _, _ in stack):
                head_start = i + 1
    return found


def default_files(root):
    """Tracked C++/CUDA files of the repository, outside tests/ and build*."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, text=True,
                             check=True).stdout
        files = out.split("\0")
    except (OSError, subprocess.CalledProcessError):
        files = walk(root, root)
    return [os.path.join(root, f) for f in sorted(files)
            if f.endswith(EXTS) and f.split("/")[0] != "tests" and not f.split("/")[0].startswith("build")]


def walk(folder, rel_to):
    found = []
    for d, dirs, names in os.walk(folder):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and not x.startswith("build"))
        found += [os.path.relpath(os.path.join(d, x), rel_to) for x in names if x.endswith(EXTS)]
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=15, metavar="N", help="list the N longest (0: all; default 15)")
    ap.add_argument("--min-lines", type=int, default=1, metavar="L", help="list only bodies of at least L lines")
    ap.add_argument("paths", nargs="*", help="files or folders (default: the repository's tracked non-test sources)")
    args = ap.parse_args(argv)

    if args.paths:
        files = []
        for p in args.paths:
            if os.path.isdir(p):
                files += [os.path.join(p, f) for f in sorted(walk(p, p))]
            elif os.path.isfile(p):
                files.append(p)
            else:
                ap.error(f"{p}: no such file or folder")
        shown = {f: os.path.normpath(f) for f in files}
    else:
        files = default_files(ROOT)
        shown = {f: os.path.relpath(f, ROOT) for f in files}

    bodies = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            bodies += [(n, shown[f], start, name) for n, start, name in function_bodies(fh.read())]
    bodies.sort(key=lambda b: (-b[0], b[1], b[2]))
    print(f"# {len(files)} files, {len(bodies)} function bodies; over 100 lines: "
          f"{sum(b[0] > 100 for b in bodies)}; over 60: {sum(b[0] > 60 for b in bodies)}")
    listed = [b for b in bodies if b[0] >= args.min_lines]
    for n, path, start, name in listed[:args.top or None]:
        print(f"{n:5d}  {path}:{start}  {name or '?'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
