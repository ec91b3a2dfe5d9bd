#!/usr/bin/env python3
"""The simulator's prediction for every row of a flashlab validation file, beside what was measured.

For files measure_flashlab.py wrote (backend flashlab_fa2 / flashlab_fa3, pass fwd or bwd): each row's
problem goes to `flashlab estimate --impl flashlab` on the preset, and the DRAM bytes (read + write) and
the time are compared with ncu's bytes and the CUDA-event time. Prints a row a line (markdown) and the
summary the simulator README quotes. Nothing here is fitted: it only reads.

Usage: python3 simulator/validation/compare_rows.py FLASHLAB_BINARY FILE.csv [--gpu h100-sxm]
"""
import csv
import json
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    binary, path = sys.argv[1], sys.argv[2]
    gpu = sys.argv[sys.argv.index("--gpu") + 1] if "--gpu" in sys.argv else "h100-sxm"
    rows = list(csv.DictReader(open(path, newline="")))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    print("| pass | seqlen | d | causal | DRAM bytes predicted / measured | error | time predicted / measured | error | bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    byte_errors, time_errors = [], []
    for r in rows:
        algo = r["backend"].removeprefix("flashlab_")
        args = [binary, "estimate", "--gpu", gpu, "--algo", algo, "--impl", "flashlab", "--pass", r["pass"],
                "--seqlen", r["seqlen"], "--batch", r["batch"], "--heads", r["heads"], "--hdim", r["hdim"],
                "--dtype", r["dtype"], "--format", "json"] + (["--causal"] if r["causal"] == "1" else [])
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"flashlab estimate failed for {r['pass']} s={r['seqlen']} d={r['hdim']}: {out.stderr.strip()}")
        e = json.loads(out.stdout)[0]
        predicted, measured = e["hbm_read_bytes"] + e["hbm_write_bytes"], int(r["dram_read_bytes"]) + int(r["dram_write_bytes"])
        be, te = predicted / measured - 1, e["time_s"] / float(r["event_time_s"]) - 1
        byte_errors.append(be)
        time_errors.append(te)
        print(f"| {r['pass']} | {r['seqlen']} | {r['hdim']} | {r['causal']} | {predicted / 1e6:.0f} / {measured / 1e6:.0f} MB "
              f"| {100 * be:+.1f}% | {1e3 * e['time_s']:.3f} / {1e3 * float(r['event_time_s']):.3f} ms | {100 * te:+.1f}% "
              f"| {e['bound']} |")
    worst = lambda xs: max(xs, key=abs)  # noqa: E731
    print(f"\n{len(rows)} rows: DRAM bytes median {100 * statistics.median(byte_errors):+.1f}%, worst "
          f"{100 * worst(byte_errors):+.1f}%, within 15% on {sum(abs(x) <= 0.15 for x in byte_errors)}; time median "
          f"{100 * statistics.median(time_errors):+.1f}%, worst {100 * worst(time_errors):+.1f}%, within 20% on "
          f"{sum(abs(x) <= 0.20 for x in time_errors)}")


if __name__ == "__main__":
    main()
