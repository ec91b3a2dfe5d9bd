#!/usr/bin/env python3
"""What each kernel runs at: the SM clock, the board's power and the clock's limiters while flashlab's fa3
and SDPA's cuDNN backend run the same attention back to back, on one GPU, in one process.

ncu times kernels at locked base clocks; triton's do_bench and a training loop run them at whatever clock
the board's power and thermal limits leave. Two kernels that tie at the base clock can part at the boost
clock if one draws more power (and is held lower) or if one spends more of its time in fixed-latency waits
(memory and barrier latencies in nanoseconds do not shrink with the clock). This script tells the two apart:
for each cell it runs each implementation for --seconds in a loop of calls without an L2 flush, samples
nvidia-smi every 50 ms meanwhile (clocks.sm, power.draw, the active clock-event reasons), and reports the
time a call (CUDA events over the loop) with the medians of the samples.

Usage: python3 bench/power_clocks.py LIB.so OUT.csv [--cells fwd:64:1024:0,fwd:64:1024:1,...] [--seconds 3]
A cell is pass:head_dim:seqlen:causal; shapes as ANCHORS.md's sweep (batch x seqlen = 16k, heads x d = 2048),
bf16 (bench/anchor_cell.py). Implementations: fa3 (flashlab's, through the C ABI) and cudnn (SDPA's backend).
simulator/validation/clock_under_load.py uses the same sampler (sample_while) for the presets' clock under load.
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from anchor_cell import Cell, cells_or_exit, write_csv  # noqa: E402
from fa2_abi import load  # noqa: E402



def query_fields():
    """nvidia-smi's fields: the clock-event reasons under their name since driver 535, else the older one."""
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        fields = f"clocks.sm,power.draw,{reasons}"
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return fields
    sys.exit("power_clocks.py: nvidia-smi does not answer --query-gpu=clocks.sm,power.draw,...")


def sample_while(fn, seconds, fields):
    """Calls fn back to back for `seconds` while nvidia-smi samples the GPU every 50 ms; returns the time a
    call (events around the whole loop, over its calls) and the samples taken while the loop ran."""
    fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "-i", str(torch.cuda.current_device()), f"--query-gpu={fields}",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.3)  # nvidia-smi's first sample lands before the loop begins: dropped below by the warm-up
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.monotonic()
    start.record()
    while time.monotonic() - t0 < seconds:
        for _ in range(10):
            fn()
        calls += 10
        if calls % 100 == 0:
            torch.cuda.synchronize()  # keep the host within a few calls of the device
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    lines = smi.communicate()[0].strip().splitlines()
    samples = []
    for line in lines[len(lines) // 5:]:  # the first fifth: the loop's ramp and the sample before it
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:
            try:
                samples.append((float(parts[0]), float(parts[1]), int(parts[2], 16)))
            except ValueError:
                pass
    return start.elapsed_time(end) * 1e-3 / calls, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--cells", default="fwd:64:1024:0,fwd:64:1024:1,fwd:64:16384:0,fwd:128:1024:0,"
                                       "fwd+bwd:128:1024:0,fwd+bwd:128:16384:0")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    lib = load(args.lib)
    fields = query_fields()
    device = torch.cuda.get_device_name()
    rows = []
    for spec in cells_or_exit(args.cells, "power_clocks.py"):
        cell = Cell(torch, lib, spec)
        pas, d, s, causal = spec.split(":")
        for name, call in cell.calls.items():
            def fn(call=call):
                cell.reset()
                call()
            sec, samples = sample_while(fn, args.seconds, fields)
            clocks, watts = [x[0] for x in samples], [x[1] for x in samples]
            reasons = 0
            for x in samples:
                reasons |= x[2]
            row = {"device": device, "date": datetime.date.today().isoformat(), "pass": pas, "hdim": d,
                   "seqlen": s, "causal": causal, "impl": name, "call_s": sec, "tflops": cell.flops / sec / 1e12,
                   "samples": len(samples),
                   "sm_clock_mhz_median": statistics.median(clocks) if clocks else "",
                   "sm_clock_mhz_min": min(clocks) if clocks else "",
                   "power_w_median": statistics.median(watts) if watts else "",
                   "clock_event_reasons_any": hex(reasons)}
            rows.append(row)
            print(f"{pas:7s} d={d:>3s} s={s:>5s} causal={causal}  {name:6s} {row['tflops']:6.1f} TFLOP/s  "
                  f"SM clock median {row['sm_clock_mhz_median']} MHz (min {row['sm_clock_mhz_min']})  "
                  f"power {row['power_w_median']} W  reasons {row['clock_event_reasons_any']}  "
                  f"({len(samples)} samples)", flush=True)
        del cell
        torch.cuda.empty_cache()
    write_csv(args.out, rows)


if __name__ == "__main__":
    main()
