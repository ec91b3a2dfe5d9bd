#!/usr/bin/env python3
"""The validation rows as a markdown table: runs the test that predicts every measured row
(tests/test_simulator.cpp, "predictions against every measured kernel") and renders what it prints.

    python3 simulator/validation/table.py build/tests/flashlab_tests > rows.md
"""
import re
import subprocess
import sys

ROW = re.compile(r"^\s+(\S+)\s+s=\s*(\d+) d=\s*(\d+) causal=(\d)\s+bytes\s+([+-][\d.]+)%(\*?)\s+time\s+([+-][\d.]+)%(\*?)\s+\(bound (\w+)\)")
FILE = re.compile(r"MESSAGE: (\S+\.csv) on (\S+): (\d+) rows; DRAM bytes within 15%: (\d+); time within 20%: (\d+)")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: table.py PATH/TO/flashlab_tests")
    out = subprocess.run([sys.argv[1], "-tc=predictions against every*", "-s"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        if m := ROW.match(line):
            rows.append(m.groups())
        elif m := FILE.search(line):
            name, preset, n, b, t = m.groups()
            print(f"\n**{name}** on `{preset}`: {n} rows, DRAM bytes within 15% on {b}, time within 20% on {t}.\n")
            print("| kernel | seqlen | d | causal | DRAM bytes error | time error | bound |")
            print("|---|---|---|---|---|---|---|")
            for k, s, d, c, be, bm, te, tm, bound in rows:
                print(f"| {k} | {s} | {d} | {c} | {be}%{' (miss)' if bm else ''} | {te}%{' (miss)' if tm else ''} | {bound} |")
            rows = []


if __name__ == "__main__":
    main()
