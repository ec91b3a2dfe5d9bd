#!/usr/bin/env python3
"""Measured DRAM bytes and time of flashlab's fa2 forward next to the simulator's estimate.

Usage: python3 bench/dram_vs_simulator.py FLASHLAB [MEASURED.csv] [> table.md]
  FLASHLAB     the flashlab CLI, e.g. build/cli/flashlab (runs `flashlab shapes` and `flashlab estimate` for
               every row; CPU only)
  MEASURED.csv rows from simulator/validation/measure_flashlab.py (ncu, caches flushed);
               default: simulator/validation/flashlab-h200-2026-11-22.csv

The estimate uses our kernel's own tiles, as `flashlab shapes` reports them from gpu/shapes.hpp (the
shapes the launchers compile; forward v8: Br x Bc = 128 x 128 for d = 64, 128 x 64 for d = 128, 64 x 64 for
d = 256), on the preset of the measured GPU, so the comparison is of the model, not of a tile-size
mismatch.
"""
import csv
import json
import os
import subprocess
import sys

PRESETS = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100-sxm"}


def forward_tiles(cli, d, preset, cache={}):
    """(Br, Bc) of fa2's forward at head dim d, from `flashlab shapes` (gpu/shapes.hpp)."""
    if (d, preset) not in cache:
        out = subprocess.run([cli, "shapes", "--algo", "fa2", "--pass", "fwd", "--hdim", str(d), "--gpu", preset,
                              "--dtype", "bf16", "--json"], check=True, capture_output=True, text=True).stdout
        shape = json.loads(out)[0]
        cache[d, preset] = shape["block_m"], shape["block_n"]
    return cache[d, preset]


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
        bm, bn = forward_tiles(cli, d, PRESETS[r["device"]])
        cmd = [cli, "estimate", "--gpu", PRESETS[r["device"]], "--batch", r["batch"], "--heads", r["heads"],
               "--seqlen", str(s), "--hdim", str(d), "--dtype", "bf16", "--algo", "fa2", "--block-m", str(bm),
               "--block-n", str(bn), "--format", "json"] + (["--causal"] if causal else [])
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
