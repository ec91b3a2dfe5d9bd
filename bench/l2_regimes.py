#!/usr/bin/env python3
"""The same attention calls timed under three states of the L2, flashlab's fa3 beside SDPA's cuDNN backend,
on one GPU, in one process: is a gap in the anchors' sweep the kernels' own, or the clock's?

gpu_compare.py times with triton's do_bench, which before every call zeroes a 256 MB buffer: each call starts
under an L2 full of *dirty* lines, so its first reads evict by writing back. A training step's attention
follows other kernels (GEMMs writing activations), so that state is real too, but it is one of several:
  dirty  before each call, 256 MB written (do_bench's flush); events around the call; median of --reps.
  clean  before each call, 256 MB read (the L2 full of clean lines, evicted for free); the same timing.
  hot    calls back to back (inputs as the call before left them in the L2); events around --loop calls,
         the median of five such loops, a call's share.

Usage: python3 bench/l2_regimes.py LIB.so OUT.csv [--cells fwd+bwd:128:1024:0,...] [--reps 50]
A cell is pass:head_dim:seqlen:causal; shapes as ANCHORS.md's sweep (batch x seqlen = 16k, heads x d = 2048),
bf16 (bench/anchor_cell.py).
"""
import argparse
import datetime
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from anchor_cell import Cell, cells_or_exit, write_csv  # noqa: E402
from fa2_abi import load  # noqa: E402
from kernel_times import flushes  # noqa: E402


def per_call_s(fn, before, reps):
    """Median of `reps` calls of fn, each after before() (outside the events)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        before()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e-3


def hot_s(fn, loop):
    times = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(loop):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3 / loop)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--cells", default="fwd:64:1024:0,fwd:64:1024:1,fwd:128:1024:0,fwd+bwd:128:1024:0,"
                                       "fwd+bwd:128:1024:1,fwd+bwd:128:16384:0")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--loop", type=int, default=20)
    args = ap.parse_args()
    lib = load(args.lib)
    device = torch.cuda.get_device_name()
    regimes = {name: fn for name, fn in flushes(torch).items() if fn is not None}  # dirty, clean
    rows = []
    for spec in cells_or_exit(args.cells, "l2_regimes.py"):
        cell = Cell(torch, lib, spec)
        pas, d, s, causal, flops, no_grads = cell.pas, cell.d, cell.s, cell.causal, cell.flops, cell.reset
        row = {"device": device, "date": datetime.date.today().isoformat(), "pass": pas, "hdim": d, "seqlen": s,
               "causal": int(causal)}
        for name, fn in cell.calls.items():
            for _ in range(3):
                no_grads()
                fn()
            for regime, flush_fn in regimes.items():
                sec = per_call_s(fn, lambda f=flush_fn: (no_grads(), f()), args.reps)
                row[f"{name}_{regime}_tflops"] = flops / sec / 1e12

            def looped(fn=fn):
                no_grads()
                fn()
            row[f"{name}_hot_tflops"] = flops / hot_s(looped, args.loop) / 1e12
        for regime in ("dirty", "clean", "hot"):
            row[f"fa3_vs_cudnn_{regime}"] = row[f"fa3_{regime}_tflops"] / row[f"cudnn_{regime}_tflops"]
        rows.append(row)
        print(f"{pas:7s} d={d:3d} s={s:5d} causal={int(causal)}  " + "  ".join(
            f"{r}: fa3 {row[f'fa3_{r}_tflops']:6.1f} cudnn {row[f'cudnn_{r}_tflops']:6.1f} "
            f"({row[f'fa3_vs_cudnn_{r}']:.3f}x)" for r in ("dirty", "clean", "hot")), flush=True)
        del cell
        torch.cuda.empty_cache()
    write_csv(args.out, rows)


if __name__ == "__main__":
    main()
