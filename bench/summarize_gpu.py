#!/usr/bin/env python3
"""The TFLOP/s tables of a gpu_compare.py CSV, as markdown.

Usage: python3 bench/summarize_gpu.py results/gpu-<device>-<date>-<version>.csv [> summary.md]

One table per pass (fwd, fwd+bwd): a row per (head_dim, causal), a column per sequence length, each
cell `fa2 / SDPA flash / cuDNN` TFLOP/s, then flashlab fa2's ratio to SDPA flash. The acceptance
lines count the cells at seqlen >= 1024 against issue 4's targets (forward >= 1.0x flash,
forward+backward >= 0.9x).
"""
import csv
import sys
from collections import defaultdict

TARGET = {"fwd": 1.0, "fwd+bwd": 0.9}


def tables(rows):
    """The markdown summary of gpu_compare.py rows (dicts of strings or numbers)."""
    out = []
    first = rows[0]
    out.append(f"# flashlab fa2 against PyTorch SDPA on {first['device']} ({first['date']}, torch {first['torch']})\n")
    out.append("bf16, batch x seqlen = 16384 tokens, heads x head_dim = 2048; TFLOP/s by ANCHORS.md's convention "
               "(forward 4 b h s^2 d, halved when causal; forward+backward 3.5x that); medians of "
               "triton.testing.do_bench in one process.\n")
    by_pass = defaultdict(list)
    for r in rows:
        by_pass[r["pass"]].append(r)
    for pas, prs in by_pass.items():
        seqlens = sorted({int(r["seqlen"]) for r in prs})
        out.append(f"## {pas}{' (deterministic backward)' if str(prs[0].get('deterministic')) == '1' else ''}\n")
        out.append("| d | causal | " + " | ".join(f"s={s}" for s in seqlens) + " |")
        out.append("|---|---|" + "---|" * len(seqlens))
        cells = {(int(r["hdim"]), int(r["causal"]), int(r["seqlen"])): r for r in prs}
        for d in sorted({k[0] for k in cells}):
            for causal in (0, 1):
                line = []
                for s in seqlens:
                    r = cells.get((d, causal, s))
                    if r is None:
                        line.append("-")
                        continue
                    fa3 = f" / fa3 {float(r['flashlab_fa3_tflops']):.0f}" if r.get("flashlab_fa3_tflops") else ""
                    line.append(f"{float(r['flashlab_fa2_tflops']):.0f} / {float(r['sdpa_flash_tflops']):.0f} / "
                                f"{float(r['sdpa_cudnn_tflops']):.0f}{fa3} (**{float(r['ratio_vs_flash']):.2f}x**)")
                out.append(f"| {d} | {causal} | " + " | ".join(line) + " |")
        counted = [r for r in prs if int(r["seqlen"]) >= 1024]
        ratios = [float(r["ratio_vs_flash"]) for r in counted]
        if ratios:
            met = sum(x >= TARGET[pas] for x in ratios)
            out.append(f"\nCells `fa2 / flash / cuDNN` TFLOP/s (**fa2 / flash**). At seqlen >= 1024: fa2 / flash from "
                       f"{min(ratios):.2f}x to {max(ratios):.2f}x; {met} of {len(ratios)} cells meet the target of "
                       f"{TARGET[pas]:.1f}x.\n")
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{sys.argv[1]}: no rows")
    print(tables(rows))


if __name__ == "__main__":
    main()
