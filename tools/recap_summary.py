"""The recap task's tables (issue 45; the task: chain_task.py): accuracy per answer and per
chain, paired against full and between peers, and by the answer's position in the recap.

The unit of the per-answer tests is one (chain, position) entry; the chain-level tests pair
whole chains (all correct or not). Both are exact McNemar, Holm-corrected over one family
of tests, with reasoning_eval's functions (the GSM summary's statistics).

Position: entry i of the recap answers problem i, solved i-th, so the early half of the
recap (positions 1 .. k//2) reads answers written furthest back, the late half (the last
k//2 positions) the nearest; the middle position of an odd k is in neither half. A policy
whose losses to full fall on the early half loses what is revisited.
"""
import collections

import reasoning_eval as rev


def _cells(records):
    """{(model, family, seed, k, max_tokens, prompt): {cell: {chain index: record}}}; a cell is
    reasoning_eval.cell_key's (policy, budget, interval, window, variant, match)."""
    groups = collections.defaultdict(dict)
    for r in records:
        g = (r["model"], r["family"], r["seed"], r["k"], r["max_tokens"], r.get("prompt") or "")
        groups[g].setdefault(rev.cell_key(r), {})[r["index"]] = r
    return groups


def _sort_cell(c):
    order = {p: i for i, p in enumerate(rev.POLICIES)}
    return (c[1], c[5] or "", c[2], c[3] or 0, order.get(c[0], 99), c[4] or "")


_label = rev.cell_label


def _setting(c):
    window = "-" if c[0] == "full" else (c[3] if c[3] is not None else "default")
    return f"| {_label(c)} | {c[1] or '-'} | {c[2] or '-'} | {window} |"


def held_bytes(r):
    """Bytes a record's sequence held at its peak: its peak KV slots (the prompt's included) and its policy's
    state (kv/policy/policy_bytes.h, as the server reported them); None from a server that did not report bytes."""
    if not r.get("bytes_per_slot") or r.get("peak_cached_tokens") is None:
        return None
    return r["peak_cached_tokens"] * r["bytes_per_slot"] + (r.get("state_bytes") or 0)


def _kept(c, rs):
    """The generated slots a cell's policy kept after an eviction: the budget, or under a budget in bytes the
    slots the server gave (kv_budget)."""
    if c[0] == "full":
        return "all"
    kept = sorted({r.get("kv_budget", c[1]) for r in rs})
    return "/".join(str(k) for k in kept)


def _stateless(cell):
    """Whether a cell's policy holds no state beside its KV slots (streaming, random): then N slots are
    also the bytes of N slots, and its slot cell pairs with the byte cells of the same N."""
    return all(r.get("bytes_per_slot") and r.get("state_bytes") == 0 for r in cell.values())


def _entries(cell, positions=None):
    """{(chain, position): correct} of a cell, optionally only the given positions (1-based)."""
    return {(i, a["position"]): a["correct"] for i, r in cell.items() for a in r["answers"]
            if positions is None or a["position"] in positions}


def _paired(a, z):
    """(n, a right/z wrong, a wrong/z right, exact McNemar p) on the keys both have."""
    common = set(a) & set(z)
    b = sum(1 for key in common if a[key] and not z[key])
    c = sum(1 for key in common if not a[key] and z[key])
    return len(common), b, c, rev.mcnemar_exact(b, c)


def _pct(k, n):
    return f"{100 * k / n:.1f}% ({k}/{n})" if n else ""


def halves(k):
    """(early positions, late positions), 1-based: the first and the last k // 2."""
    h = k // 2
    return set(range(1, h + 1)), set(range(k - h + 1, k + 1))


def summarize_recap(records):
    """Markdown tables of recap records (task "recap"): per cell; against full per answer and per
    chain; by position (each position, and early against late half); pairs of peers per answer."""
    lines = []
    groups = _cells(records)
    for g in sorted(groups):
        cells = groups[g]
        model, family, seed, k, max_tokens, prompt = g
        ordered = sorted(cells, key=_sort_cell)
        full = cells.get(rev.FULL_CELL)
        lines.append(f"### recap of {k} x {family}, seed {seed}, {model}, max_tokens {max_tokens}"
                     f"{', prompt ' + prompt if prompt else ''}\n")
        lines.append("| policy | budget | interval | window | chains | per answer | in place | all correct "
                     "| solved inline "
                     "| recalled as written | mean chain | truncated | no recap | evictions/seq | peak KV slots "
                     "(mean / max) | slots kept | MB held at the peak |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in ordered:
            rs = list(cells[c].values())
            ans = [a for r in rs for a in r["answers"]]
            solved = sum(rev.numbers_equal(a["inline"], rev.normalize_number(a["gold"])) for a in ans)
            written = [a for r in rs if r["recap_found"] for a in r["answers"] if a["inline"] is not None]
            recalled = sum(a.get("recalled", rev.numbers_equal(a["recap"], a["inline"])) for a in written)
            peaks = [r["peak_cached_tokens"] for r in rs if r.get("peak_cached_tokens") is not None]
            peak = f"{rev._mean(peaks):.0f} / {max(peaks)}" if peaks else "n/a"
            held = rev._mean([held_bytes(r) for r in rs])
            lines.append(f"{_setting(c)} {len(rs)} | {_pct(sum(a['correct'] for a in ans), len(ans))} "
                         f"| {_pct(sum(a.get('in_place', False) for a in ans), len(ans))} "
                         f"| {_pct(sum(r['correct'] for r in rs), len(rs))} | {_pct(solved, len(ans))} "
                         f"| {_pct(recalled, len(written))} "
                         f"| {rev._f(rev._mean([r['completion_tokens'] for r in rs]))} "
                         f"| {_pct(sum(r['finish_reason'] == 'length' for r in rs), len(rs))} "
                         f"| {sum(not r['recap_found'] for r in rs)} "
                         f"| {rev._f(rev._mean([r.get('evictions') for r in rs]), 2) or 'n/a'} | {peak} "
                         f"| {_kept(c, rs)} | {rev._f(held / 1e6 if held else None) or 'n/a'} |")
        lines.append("")
        lines.append("Per answer: the recap's entries matched to the problems in order (chain_task.align); in "
                     "place: entry i against problem i; solved inline: the problem's own \"Answer i:\" line is "
                     "right; recalled as written: an entry matches that line's value, in order (of the problems "
                     "that have one, in chains that wrote a recap line). A chain cut at max_tokens scores no entry.\n")
        if full is not None and len(cells) > 1:
            lines += _vs_full(cells, full, ordered, k)
        lines += _peers(cells, ordered)
    return "\n".join(lines)


def _vs_full(cells, full, ordered, k):
    others = [c for c in ordered if c[0] != "full"]
    per_answer = [_paired(_entries(full), _entries(cells[c])) for c in others]
    per_chain = [_paired({i: r["correct"] for i, r in full.items()}, {i: r["correct"] for i, r in cells[c].items()})
                 for c in others]
    pa, pc = rev.holm([v[3] for v in per_answer]), rev.holm([v[3] for v in per_chain])
    lines = ["Against full, paired (lost:gained = full right and this wrong : full wrong and this right; Holm over "
             "the cells, per answer and per chain apart):\n",
             "| policy | budget | interval | window | answers | lost:gained | p | p (Holm) | chains | lost:gained "
             "| p | p (Holm) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c, a, ha, ch, hc in zip(others, per_answer, pa, per_chain, pc):
        lines.append(f"{_setting(c)} {a[0]} | {a[1]}:{a[2]} | {rev._fmt_p(a[3])} | {rev._fmt_p(ha)} | {ch[0]} "
                     f"| {ch[1]}:{ch[2]} | {rev._fmt_p(ch[3])} | {rev._fmt_p(hc)} |")
    lines.append("")
    # Each position; then the halves, tested.
    lines.append("Accuracy by position in the recap (1 = solved first, furthest back when the recap is written; "
                 "lost:gained against full):\n")
    lines.append("| policy | budget | interval | window | " + " | ".join(str(p) for p in range(1, k + 1)) + " |")
    lines.append("|---|---|---|---|" + "---|" * k)
    for c in ordered:
        cols = []
        for p in range(1, k + 1):
            e = _entries(cells[c], {p})
            right = sum(e.values())
            share = f"{100 * right / len(e):.0f}%" if e else ""
            if c[0] != "full" and e:
                _, lost, gained, _ = _paired(_entries(full, {p}), e)
                share += f", {lost}:{gained}"
            cols.append(share)
        lines.append(f"{_setting(c)} " + " | ".join(cols) + " |")
    lines.append("")
    early, late = halves(k)
    if not early:
        return lines
    tests = [(c, h, _paired(_entries(full, pos), _entries(cells[c], pos)))
             for c in others for h, pos in (("early", early), ("late", late))]
    adj = rev.holm([t[2][3] for t in tests])
    lines.append(f"Early half (positions {min(early)}-{max(early)}) against late half (positions "
                 f"{min(late)}-{max(late)}), against full (Holm over these {len(tests)} tests):\n")
    lines.append("| policy | budget | interval | window | early: accuracy | lost:gained | p (Holm) "
                 "| late: accuracy | lost:gained | p (Holm) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for i, c in enumerate(others):
        row = []
        for (_, h, (n, lost, gained, _)), ph in zip(tests[2 * i:2 * i + 2], adj[2 * i:2 * i + 2]):
            pos = early if h == "early" else late
            e = _entries(cells[c], pos)
            row.append(f"{_pct(sum(e.values()), len(e))} | {lost}:{gained} | {rev._fmt_p(ph)}")
        lines.append(f"{_setting(c)} " + " | ".join(row) + " |")
    lines.append("")
    return lines


def _peers(cells, ordered):
    by_setting = collections.defaultdict(list)
    for c in ordered:
        if c[0] != "full":
            by_setting[(c[1], c[5] or "", c[2], c[3] or 0)].append(c)
            if not c[5] and _stateless(cells[c]):  # its slot budget is its byte budget too
                by_setting[(c[1], "bytes", c[2], c[3] or 0)].append(c)
    lines = []
    for setting in sorted(by_setting):
        cs = by_setting[setting]
        pairs = [(cs[i], cs[j]) for i in range(len(cs)) for j in range(i + 1, len(cs))]
        wtext = f", window {setting[3]}" if setting[3] else ""
        lines += _pairs_table(cells, pairs, f"Pairs at budget {setting[0]}{' in bytes' if setting[1] else ''}, "
                                            f"interval {setting[2]}{wtext}")
    # Across the matchings of one budget: a slot cell against the byte cells of the same N (their slots
    # differ by their states; kept apart from the families above, with a Holm of their own).
    across = [(a, b) for a in ordered for b in ordered
              if a[0] != "full" and not a[5] and not _stateless(cells[a]) and b[5] and b[0] != a[0]
              and (a[1], a[2], a[3]) == (b[1], b[2], b[3])]
    if across:
        lines += _pairs_table(cells, across, f"Across matchings at budget {across[0][0][1]}: a slot cell against "
                                             "the byte cells of the same N")
    return lines


def _pairs_table(cells, pairs, title):
    """Markdown of paired per-answer tests, Holm over them."""
    if not pairs:
        return []
    tests = [(a, b, _paired(_entries(cells[a]), _entries(cells[b]))) for a, b in pairs]
    adj = rev.holm([t[2][3] for t in tests])
    lines = [f"{title}, per answer (A right/B wrong : A wrong/B right; Holm over these {len(tests)} tests):\n",
             "| A | B | answers | A:B discordant | p | p (Holm) |", "|---|---|---|---|---|---|"]
    for (a, b, (n, x, y, p)), pa in zip(tests, adj):
        lines.append(f"| {_label(a)} | {_label(b)} | {n} | {x}:{y} | {rev._fmt_p(p)} | {rev._fmt_p(pa)} |")
    lines.append("")
    return lines
