#!/usr/bin/env python3
"""Plots beacon-eval results: one panel per metric against the KV budget
(log x axis), one line per policy.

    .venv/bin/python tools/plot_fidelity.py RESULTS.csv OUT.png [--title TEXT]

RESULTS.csv is model_results.csv (panels: KL after the first eviction, log y,
and attention recall after the first eviction) or synthetic_results.csv
(panels: revisit recall and all-query recall), as beacon-eval writes them.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import csv
import sys
from collections import defaultdict

# (column, axis label, log y) per panel, for each kind of result file.
PANELS = {
    "model": [
        ("kl_post", "mean KL(full || policy), nats\n(steps after the first eviction)", True),
        ("recall_post", "attention-mass recall\n(steps after the first eviction)", False),
    ],
    "synthetic": [
        ("revisit_recall", "recall of revisit queries' attention", False),
        ("all_recall", "recall of all queries' attention", False),
    ],
}


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    args = ap.parse_args()

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_fidelity.py needs matplotlib: pip install matplotlib")

    rows = load(args.csv)
    kind = "model" if "kl_post" in rows[0] else "synthetic"
    series = defaultdict(list)  # policy -> [(budget, row)], in file order
    for r in rows:
        series[r["policy"]].append((float(r["budget"]), r))

    panels = PANELS[kind]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    for ax, (col, label, log_y) in zip(axes, panels):
        for policy, points in series.items():
            # An empty cell is a metric without samples (no eviction at that budget).
            points = sorted((p for p in points if p[1][col] != ""), key=lambda p: p[0])
            if not points:
                continue
            xs = [b for b, _ in points]
            ys = [float(r[col]) for _, r in points]
            style = dict(linewidth=2.5, marker="o") if policy == "beacon" else dict(linewidth=1.2, marker=".")
            ax.plot(xs, ys, label=policy, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({b for pts in series.values() for b, _ in pts}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("KV budget (generated tokens kept per head)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
