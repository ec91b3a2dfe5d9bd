#!/usr/bin/env python3
"""Each kernel of fa3's forward and backward beside the kernels of SDPA's cuDNN backend, on one GPU.

Runs on the GPU machine (an H100 / H200: fa3 is sm_90a). gpu_compare.py gives one time a call; this gives
the device time of every kernel a call launches (torch.profiler, CUDA activity, the mean of `--reps` calls
after three warm-up calls), so that a gap to cuDNN is pinned on a kernel: fa3's forward; its backward's
preprocess (D = rowsum(dO o O)), main kernel (dK, dV and the dQ reductions) and dQ conversion; cuDNN's
forward and backward kernels by their names. The anchors' setup: bf16, batch x seqlen = 16384 tokens,
heads x head_dim = 2048, causal or not. It found v8's convert kernel: 0.22 ms where cuDNN's conversion
took 0.075 (gpu/HISTORY.md).

Usage: python3 bench/kernel_times.py LIB.so OUT.csv [--seqlens 1024,4096,16384] [--hdims 64,128,256] [--reps 10]
                                     [--flush none|dirty|clean]
Prints a table (one line a configuration: ours and cuDNN's per pass, then each kernel); writes one CSV row a
(configuration, side, pass, kernel) with its mean device time in ms.
"""
import argparse
import collections
import csv
import datetime
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa2_abi import Fa2, load  # noqa: E402


def cuda_events(torch, fn, calls=10):
    """torch.profiler's CUDA-activity events of `calls` calls of fn, after three warm-up calls. Also
    launch_gaps.py's."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def short_name(name):
    """A kernel's name without its namespaces, template arguments and `void`."""
    return re.sub(r".*::", "", name.split("<")[0]).replace("void ", "")


def device_times(torch, fn, calls=10, before=None):
    """Each CUDA kernel's device time per call of fn (ms), by its unqualified name, the mean of `calls`
    calls after three warm-up calls (torch.profiler). Also mask_kernel_split.py's. With `before` (an L2
    flush from flushes()), it runs before every call and its own kernels are left out of the times."""
    per = collections.defaultdict(float)
    skip = flush_kernel_names(torch, before)
    if before is not None:
        def call():
            before()
            fn()
    for e in cuda_events(torch, fn if before is None else call, calls):
        if e.name not in skip:
            per[short_name(e.name)] += e.device_time / calls / 1e3
    return dict(per)


_flush_names = {}  # a flush's kernels, profiled once a flush


def flush_kernel_names(torch, before):
    """The full names (a functor's template arguments too) of the kernels the flush `before` launches."""
    if before is None:
        return set()
    if id(before) not in _flush_names:
        _flush_names[id(before)] = (before, {e.name for e in cuda_events(torch, before, 1)})
    return _flush_names[id(before)][1]


def flushes(torch):
    """The L2's state before each call (bench/l2_regimes.py): none (back to back), dirty (256 MB written, as
    triton's do_bench does and so the anchors' sweep), clean (256 MB read)."""
    buf = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    return {"none": None, "dirty": buf.zero_, "clean": lambda: buf.sum(dtype=torch.int32)}


def measure(torch, lib, d, s, causal, reps, before=None):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    ours = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do,) + tuple(torch.empty_like(q) for _ in range(3)),
               kernel=b"fa3")
    result = {("fa3", "fwd"): device_times(torch, ours.forward, reps, before)}
    ours.forward()
    result[("fa3", "bwd")] = device_times(torch, ours.backward, reps, before)
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        result[("cudnn", "fwd")] = device_times(torch, lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                                               reps, before)
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        g = do.transpose(1, 2)
        result[("cudnn", "bwd")] = device_times(
            torch, lambda: torch.autograd.grad(out, (qt, kt, vt), g, retain_graph=True), reps, before)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--flush", choices=("none", "dirty", "clean"), default="none",
                    help="the L2's state before each call (default: calls back to back)")
    args = ap.parse_args()
    import torch
    lib = load(args.lib)
    device = torch.cuda.get_device_name()
    rows = []
    before = flushes(torch)[args.flush]
    print(f"{device}: mean device time a call (ms), torch.profiler, {args.reps} calls, flush {args.flush}")
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            for causal in (False, True):
                r = measure(torch, lib, d, s, causal, args.reps, before)
                tot = {key: sum(v.values()) for key, v in r.items()}
                print(f"d={d:3d} s={s:5d} causal={int(causal)}  fwd fa3 {tot['fa3', 'fwd']:.3f} cudnn "
                      f"{tot['cudnn', 'fwd']:.3f} ({tot['cudnn', 'fwd'] / tot['fa3', 'fwd']:.2f}x)  bwd fa3 "
                      f"{tot['fa3', 'bwd']:.3f} cudnn {tot['cudnn', 'bwd']:.3f} ({tot['cudnn', 'bwd'] / tot['fa3', 'bwd']:.2f}x)",
                      flush=True)
                for (side, pas), kernels in r.items():
                    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:4]
                    print(f"    {side:5s} {pas}: " + "  ".join(f"{n[:38]} {t:.3f}" for n, t in top))
                    for n, t in kernels.items():
                        rows.append({"device": device, "date": str(datetime.date.today()), "hdim": d, "seqlen": s, "causal": int(causal), "side": side,
                                     "flush": args.flush, "pass": pas, "kernel": n, "ms": t})
                torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
