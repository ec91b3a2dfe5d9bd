#!/usr/bin/env python3
"""Measured DRAM bytes and time of flashlab's fa2 forward next to the simulator's estimate.

Usage: python3 bench/dram_vs_simulator.py FLASHLAB [MEASURED.csv] [> table.md]
  FLASHLAB     the flashlab CLI (runs `flashlab estimate` for every row; CPU only)
  MEASURED.csv rows from simulator/validation/measure_flashlab.py (ncu, caches flushed);
               default: simulator/validation/flashlab-h200-2026-11-22.csv

The estimate models flashlab's own kernel (`--impl flashlab`: the tiles of gpu/shapes.hpp, which the
kernel's launcher instantiates, and its K/V order) on the preset of the measured GPU, so the comparison
is of the model, not of a tile-size mismatch. Rows measured with an older kernel version need its
tiles: the H200 rows of 2026-11-22 ran forward v5 (128 x 64 at d = 64), passed as --block-n 64.
"""
import csv
import json
import os
import subprocess
import sys

PRESETS = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100-sxm"}


# Kernel versions whose tiles differ from today's shapes.hpp, by measured file: {head_dim: extra flags}.
OLDER_TILES = {"flashlab-h200-2026-11-22.csv": {64: ["--block-n", "64"]}}


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cli = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "simulator", "validation",
                                                              "flashlab-h200-2026-11-22.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"# fa2 forward: ncu DRAM bytes and time against `flashlab estimate --algo fa2`\n")
    print(f"Measured: `{os.path.basename(path)}` ({rows[0]['device']}, {rows[0]['date']}; ncu with caches "
          "flushed, clocks not locked; time from CUDA events). bf16, batch x seqlen = 16k, heads x d = 2048.\n")
    print("| d | causal | seqlen | DRAM read+write measured (MB) | estimated (MB) | error | "
          "time measured (us) | estimated (us) | error | bound |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    byte_err, time_err = [], []
    for r in rows:
        d, s, causal = int(r["hdim"]), int(r["seqlen"]), r["causal"] == "1"
        cmd = [cli, "estimate", "--gpu", PRESETS[r["device"]], "--batch", r["batch"], "--heads", r["heads"],
               "--seqlen", str(s), "--hdim", str(d), "--dtype", "bf16", "--algo", "fa2", "--impl", "flashlab",
               "--format", "json"] + (["--causal"] if causal else [])
        cmd += OLDER_TILES.get(os.path.basename(path), {}).get(d, [])
        est = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)[0]
        measured_bytes = int(r["dram_read_bytes"]) + int(r["dram_write_bytes"])
        predicted_bytes = est["hbm_read_bytes"] + est["hbm_write_bytes"]
        measured_t, predicted_t = float(r["event_time_s"]), est["time_s"]
        be, te = predicted_bytes / measured_bytes - 1, predicted_t / measured_t - 1
        byte_err.append(abs(be))
        time_err.append(abs(te))
        print(f"| {d} | {int(causal)} | {s} | {measured_bytes / 1e6:.0f} | {predicted_bytes / 1e6:.0f} | {be:+.0%} | "
              f"{measured_t * 1e6:.0f} | {predicted_t * 1e6:.0f} | {te:+.0%} | {est['bound']} |")
    n = len(rows)
    print(f"\n{sum(e <= 0.15 for e in byte_err)} of {n} rows within 15% in DRAM bytes, "
          f"{sum(e <= 0.25 for e in time_err)} of {n} within 25% in time.")


if __name__ == "__main__":
    main()
