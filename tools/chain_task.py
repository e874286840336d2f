"""The recap task of tools/reasoning_eval.py (issue 45): long chains that must look back.

One prompt holds k problems of a numeric reasoning-gym family. The model solves them one
after another, each ending in a line "Answer i: N", then writes a final line

    RECAP: N1; N2; ...; Nk

listing every answer in order. Writing the recap reads answers written hundreds or thousands
of tokens earlier: the revisit a KV policy must keep (the first answer is furthest back).

Scoring (score_chain): the recap's entries are matched to the problems in order, by value
(normalize_number: "1,200", "$1,200", "1200 apples" all read 1200): a longest common
subsequence of the entries and the gold answers (align). Problem i's answer is correct when an
entry matches it. So an entry the model skips (the full cache does, at k = 16) costs that
answer alone, and a loss is filed under the position that was lost, not under every position
after it. The strict reading, entry i against problem i, is recorded beside it (`in_place`).
An answer missing from the recap, no recap line at all, or a chain cut at max_tokens
(finish_reason "length", whatever it wrote) is wrong. The chain is correct when every answer
is. A recap of more than 2k entries is read in place only (a dump of numbers would match by
chance). The inline "Answer i:" lines are recorded beside the recap (was the problem solved,
and was its answer recalled as written), not scored.

Chain c of a run takes problems c*k .. c*k+k-1 of the family's dataset at the run's seed,
so a chain's problems are fixed by (family, seed, k, c) alone.

Pure functions: tests/test_chain_task.py. The summary's tables: recap_summary.py.
"""
import re

import reasoning_eval as rev

# The instruction follows the problems (the single-problem task's order: the question, then what to
# do). Named, because a prompt is part of what a record measured: records carry its name ("prompt")
# and key on it. "brief" (the first pilot): the model answers each problem in a few lines, shorter
# and less often right than alone. "steps" asks for the single task's "Step 1:, Step 2:" working.
PROMPTS = {
    "brief": ("Solve the {k} problems above one after another, in order. For each problem, write "
              '"Problem i" on a line of its own, solve it step by step, and end its solution with a line '
              '"Answer i: N", where N is its final answer (a number).\n'
              "After the last problem, end your reply with one final line that lists all {k} answers in "
              "order, separated by semicolons, exactly in this form:\n"
              "RECAP: {example}"),
    "steps": ("Solve the {k} problems above one after another, in order, each as carefully as if it were "
              'the only one. For each problem, write "Problem i" on a line of its own, then solve it step by '
              'step ("Step 1:", "Step 2:", ...), showing every calculation, and end its solution with a line '
              '"Answer i: N", where N is its final answer (a number).\n'
              "After the last problem, end your reply with one final line that lists all {k} answers in "
              "order, separated by semicolons, exactly in this form:\n"
              "RECAP: {example}"),
}
DEFAULT_PROMPT = "brief"
INSTRUCTION = PROMPTS[DEFAULT_PROMPT]


def chain_indices(chain, k):
    """The dataset indices of chain `chain`'s problems, in order."""
    return list(range(chain * k, chain * k + k))


def build_prompt(questions, instruction=INSTRUCTION):
    """The user message of one chain: every question under a "Problem i:" heading, then the
    instruction (with {k} and {example}, "N1; N2; ...; Nk", filled in). Deterministic."""
    k = len(questions)
    parts = [f"Problem {i + 1}:\n{q.strip()}" for i, q in enumerate(questions)]
    example = "; ".join(f"N{i + 1}" for i in range(k)) if k <= 4 else f"N1; N2; ...; N{k}"
    return "\n\n".join(parts) + "\n\n" + instruction.format(k=k, example=example)


# ---------------------------------------------------------------------------
# Parsing

# At a line's start (after markdown marks), so "Let me recap: ..." in the prose is no recap line.
RECAP_RE = re.compile(r"^[\s#>*-]*recap\s*[:：]", re.I | re.M)
INLINE_RE = re.compile(r"^[\s#>*-]*answer\s*(?:to\s+problem\s*)?(\d+)\s*[:：=]\s*(.*)$", re.I | re.M)
_ENUM = re.compile(r"^\s*(?:\(\d+\)|\d+[.)](?=\s))\s*")  # "(2) 7", "1) 12", "1. 12" (not "1.5")


def parse_item(item):
    """One recap entry as a number string (normalize_number), or None when it holds none.
    "12", " $1,200 ", "30 apples", "1) 12", "(2) 7", "N3 = 30", "5 + 3 = 8", "\\boxed{4}"."""
    s = item.replace("**", "").replace("\\boxed", "").strip()
    if "=" in s:  # "N3 = 30", "5 + 3 = 8": the value is after the last '='
        s = s.rsplit("=", 1)[1]
    elif ":" in s:  # "Problem 2: 7"
        s = s.rsplit(":", 1)[1]
    else:
        s = _ENUM.sub("", s, count=1)
    return rev.normalize_number(s)


def _split_items(line):
    """Semicolons separate entries; a line without one falls back to ", " (a comma and a
    space: "1,200" stays one number) or, failing that too, to whitespace between numbers."""
    line = line.strip().strip("[]()").strip()
    if ";" in line:
        return line.split(";")
    if ", " in line:
        return line.split(", ")
    if re.fullmatch(r"[-$\d.,\s]+", line) and len(line.split()) > 1:  # "12 7 30"
        return line.split()
    return [line] if line else []


def parse_recap(text):
    """The last RECAP line's entries: (found, [number string or None, ...]). The entries follow
    "RECAP:" on its line; when that line is empty, they are the next non-empty line (split as
    one line), or the lines up to a blank one (one entry each) when those hold no ';'. A trailing
    empty entry ("12; 7; 30;") is dropped; an empty one between two others stays (None)."""
    if not text:
        return False, []
    text = text.replace("**", "")
    hits = list(RECAP_RE.finditer(text))
    if not hits:
        return False, []
    after = text[hits[-1].end():]
    first, _, rest = after.partition("\n")
    if first.strip():
        items = _split_items(first)
    else:
        lines = []
        for ln in rest.split("\n"):
            if not ln.strip():
                if lines:
                    break
                continue
            lines.append(ln)
        if len(lines) == 1 or any(";" in ln for ln in lines):
            items = _split_items(" ".join(lines))
        else:
            items = lines
    if items and not items[-1].strip():
        items = items[:-1]
    return True, [parse_item(it) for it in items]


def parse_inline(text, k):
    """Problem i's own "Answer i: N" line (the last one for each i), as numbers; None where absent."""
    out = [None] * k
    for m in INLINE_RE.finditer((text or "").replace("**", "")):
        i = int(m.group(1))
        if 1 <= i <= k:
            out[i - 1] = parse_item(m.group(2))
    return out


# ---------------------------------------------------------------------------
# Scoring


def align(items, golds):
    """For each gold, the index of the recap entry matched to it, or None: a longest common
    subsequence of the two lists under equality by value. Of equally long ones, the walk from
    the start takes a match where one lies on a longest path, else skips an entry before it
    skips a gold (deterministic)."""
    m, k = len(items), len(golds)
    eq = [[rev.numbers_equal(items[j], golds[i]) for j in range(m)] for i in range(k)]
    dp = [[0] * (m + 1) for _ in range(k + 1)]
    for i in range(k - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            dp[i][j] = max(dp[i + 1][j + 1] + 1 if eq[i][j] else 0, dp[i + 1][j], dp[i][j + 1])
    out, i, j = [None] * k, 0, 0
    while i < k and j < m:
        if eq[i][j] and dp[i][j] == dp[i + 1][j + 1] + 1:
            out[i] = j
            i, j = i + 1, j + 1
        elif dp[i][j + 1] == dp[i][j]:
            j += 1
        else:
            i += 1
    return out


def score_chain(golds, text, finish_reason):
    """{"answers": [{"position", "gold", "recap", "matched", "inline", "recalled", "correct",
    "in_place"}], "correct", "n_correct", "n_in_place", "recap_found", "recap_items",
    "recap_entries"} of one chain. Position i + 1 is problem i; "recap" is the recap's (i + 1)-th
    entry, "matched" the index of the entry align() matched to gold i (None: none). correct:
    matched, and the chain not cut at max_tokens; in_place: the (i + 1)-th entry equals gold i,
    and not cut; recalled: the problem's own "Answer i:" value is matched by an entry (align
    against the inline values; False where there is none), right or wrong."""
    k = len(golds)
    found, items = parse_recap(text)
    inline = parse_inline(text, k)
    cut = finish_reason == "length"
    gold_values = [rev.normalize_number(str(g)) for g in golds]
    matched = align(items, gold_values) if len(items) <= 2 * k else [
        i if i < len(items) and rev.numbers_equal(items[i], g) else None for i, g in enumerate(gold_values)]
    recalled = align(items, inline) if len(items) <= 2 * k else [None] * k
    answers = []
    for i, gold in enumerate(golds):
        got = items[i] if i < len(items) else None
        answers.append({"position": i + 1, "gold": str(gold), "recap": got, "matched": matched[i],
                        "inline": inline[i], "recalled": recalled[i] is not None,
                        "correct": not cut and matched[i] is not None,
                        "in_place": bool(not cut and rev.numbers_equal(got, gold_values[i]))})
    n_correct = sum(a["correct"] for a in answers)
    return {"answers": answers, "correct": n_correct == k, "n_correct": n_correct,
            "n_in_place": sum(a["in_place"] for a in answers), "recap_found": found, "recap_items": len(items),
            "recap_entries": items}


def rescore(record):
    """The record with its scoring fields recomputed from its text, gold answers and finish
    reason (score_chain): for records scored by an earlier rule."""
    scored = score_chain([a["gold"] for a in record["answers"]], record["text"], record["finish_reason"])
    return {**record, **scored}
