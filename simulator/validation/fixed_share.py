#!/usr/bin/env python3
"""How much of a fused kernel's time at s = 1k does not scale with its tiles, measured and modelled.

The anchors' sweep keeps batch x seqlen = 16k, so a kernel launches the same CTAs at s = 1k and s = 16k and,
without a mask, every CTA computes 16x the tiles at 16k. With T = W (F + n t) (W waves of CTAs, F what a
CTA costs its slot besides its tiles, n tiles of t seconds each), the part of the 1k time that does not
scale with the tiles is W F = (16 T(1k) - T(16k)) / 15, from two measured times and nothing else. The same
split of the model's two predictions says how much of it the model holds. Under a causal mask the average
CTA computes about 14x the tiles at 16k, not 16x: those lines are a rough guide only.

    python3 simulator/validation/fixed_share.py build/tests/flashlab_tests
"""
import csv
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The test prints the rows of these files in this order (tests/test_simulator.cpp).
FILES = ["sdpa-h100-2026-11-22.csv", "sdpa-h200-2026-11-22.csv", "flashlab-h100-2026-11-22.csv",
         "flashlab-h200-2026-11-22.csv"]
ROW = re.compile(r"^\s+(\S+)\s+s=\s*(\d+) d=\s*(\d+) causal=(\d)\s+bytes\s+[+-][\d.]+%\*?\s+time\s+([+-][\d.]+)%")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fixed_share.py PATH/TO/flashlab_tests")
    out = subprocess.run([sys.argv[1], "-tc=predictions against every*", "-s"], capture_output=True, text=True).stdout
    errors = [float(m.group(5)) / 100 for line in out.splitlines() if (m := ROW.match(line))]
    rows = {}  # (gpu, kernel, seqlen, d, causal) -> (measured s, predicted s)
    i = 0
    for name in FILES:
        gpu = name.split("-")[1]
        for r in csv.DictReader(open(os.path.join(HERE, name))):
            if i >= len(errors):
                sys.exit(f"the test printed {len(errors)} rows; expected one per row of {FILES}")
            t = float(r["event_time_s"])
            rows[(gpu, r["backend"], int(r["seqlen"]), int(r["hdim"]), int(r["causal"]))] = (t, t * (1 + errors[i]))
            i += 1
    print("| GPU | kernel | d | causal | T(1k) measured | not scaling with tiles, measured | model |")
    print("|---|---|---|---|---|---|---|")
    for (gpu, kernel, s, d, causal), (m1, p1) in rows.items():
        if s != 1024 or kernel == "math" or (gpu, kernel, 16384, d, causal) not in rows:
            continue
        m16, p16 = rows[(gpu, kernel, 16384, d, causal)]
        fm, fp = (16 * m1 - m16) / 15, (16 * p1 - p16) / 15
        print(f"| {gpu} | {kernel} | {d} | {causal} | {m1 * 1e6:.0f} us | {fm * 1e6:.1f} us ({100 * fm / m1:.1f}%) "
              f"| {fp * 1e6:.1f} us ({100 * fp / p1:.1f}%) |")


if __name__ == "__main__":
    main()
