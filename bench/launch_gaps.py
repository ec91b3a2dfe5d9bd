#!/usr/bin/env python3
"""Where a forward+backward call's time goes outside its kernels: fa3 through the C ABI beside SDPA's cuDNN.

Runs on the GPU machine (an H100 / H200). kernel_times.py gives each kernel's device time; gpu_compare.py
one time a call (triton.testing.do_bench). Their difference at short sequences is time the GPU spends
between kernels. This measures it: `--calls` back-to-back forward+backward calls under torch.profiler
(CUDA activity), and for each side the mean, per call, of the wall span (first kernel's start to the next
call's first kernel), the kernels' device time, and the gaps (span minus kernels), largest first with the
kernel after each; then the host time a call takes to enqueue its work (time.perf_counter over the same
number of calls, the GPU kept busy so that no call waits for the device). When the host time exceeds the
kernels' time, the GPU waits for the host.

With --flush dirty or clean (bench/l2_regimes.py's states: 256 MB written, or read, before every call) the
flush's kernel runs before each call; it is named `(flush)` in the gaps and its time is left out of the
kernels' and the gaps'.

Usage: python3 bench/launch_gaps.py LIB.so [--hdim 128] [--seqlens 1024,2048] [--calls 50] [--flush none|dirty|clean]
"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa2_abi import Fa2, load  # noqa: E402
from kernel_times import cuda_events, flush_kernel_names, flushes, short_name  # noqa: E402


def kernel_timeline(torch, fn, calls, flush_names=()):
    """The CUDA kernels (and memsets) of `calls` calls of fn, as (start us, end us, short name), in order;
    kernels whose full name is in flush_names named `(flush)`."""
    return sorted((e.time_range.start, e.time_range.end, "(flush)" if e.name in flush_names else short_name(e.name)[:40])
                  for e in cuda_events(torch, fn, calls) if e.time_range.elapsed_us() > 0)


def host_time_us(torch, fn, calls):
    """Host microseconds a call spends enqueueing, measured while the GPU still runs the calls before."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def summarize(events, calls):
    kernels = sum(e - s for s, e, name in events if name != "(flush)") / calls
    flush = sum(e - s for s, e, name in events if name == "(flush)") / calls
    span = (events[-1][1] - events[0][0]) / calls - flush
    gaps = collections.defaultdict(float)
    for (_, end, _), (start, _, name) in zip(events, events[1:]):
        gaps[name] += max(0.0, start - end) / calls
    return span, kernels, sorted(gaps.items(), key=lambda x: -x[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlens", default="1024,2048")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--flush", choices=("none", "dirty", "clean"), default="none")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    lib = load(args.lib)
    before = flushes(torch)[args.flush]
    flush_names = flush_kernel_names(torch, before)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.calls} calls a side, flush {args.flush}; "
          "times in us a call")
    d = args.hdim
    for s in map(int, args.seqlens.split(",")):
        for causal in (False, True):
            b, h = 16384 // s, 2048 // d
            q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            o = torch.empty_like(q)
            lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
            ours = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do,) + tuple(torch.empty_like(q) for _ in range(3)),
                       kernel=b"fa3")
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(True) for x in (q, k, v))
            g = do.transpose(1, 2)

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    torch.autograd.grad(out, (qt, kt, vt), g)

            for side, call in (("fa3", ours.forward_backward), ("cudnn", cudnn)):
                def fn(call=call):
                    if before:
                        before()
                    call()
                span, kernels, gaps = summarize(kernel_timeline(torch, fn, args.calls, flush_names), args.calls)
                host = host_time_us(torch, fn, args.calls)
                top = ", ".join(f"before {n} {t:.1f}" for n, t in gaps[:4])
                print(f"d={d} s={s:5d} causal={int(causal)} {side:5s} span {span:7.1f}  kernels {kernels:7.1f}  "
                      f"gaps {span - kernels:6.1f}  host {host:6.1f}  | {top}", flush=True)


if __name__ == "__main__":
    main()
