#!/usr/bin/env python3
"""A/B two builds of flashlab's fa2 (or fa3) kernels in one process, beside SDPA flash (FlashAttention 2).

Runs on the GPU machine. Loads two builds of libflashlab_gpu_c.so (say, before and after a change)
side by side and times each one's fa2, and SDPA's flash backend, on the same bf16 tensors of the
anchors' setup (batch * seqlen = 16384 tokens, heads * head_dim = 2048) with triton.testing.do_bench
(median), so that a change's effect is read without the 2-3% drift between processes. Both builds'
outputs are checked against each other. Prints one line a shape and writes a CSV.

Usage: python3 bench/ab_libs.py A.so B.so OUT.csv [--seqlens 1024,8192] [--hdims 64,128,256]
                                [--passes fwd,fwd+bwd] [--kernel fa2|fa3] [--deterministic] [--rounds 4]
With --kernel fa3 (an H100/H200) SDPA's cuDNN backend is timed too.

A call's place in the order of timing biases it: timed right after A, B read 1-3% slower in every pair of
builds on the H200 (gpu/HISTORY.md), so A/B runs were made twice, the libraries' order swapped, and the
geometric mean read. --rounds N times every call N times, each round starting one call later (a, b, flash,
cudnn; then b, flash, cudnn, a; ...), and keeps each call's median: with N a multiple of the calls (4 with
fa3, 3 with fa2) every call takes every place equally often, in one run.
"""
import argparse
import csv
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa2_abi import Fa2, load  # noqa: E402
from rounds import rotating  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("out")
    ap.add_argument("--seqlens", default="1024,8192")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--passes", default="fwd,fwd+bwd")
    ap.add_argument("--kernel", default="fa2", choices=["fa2", "fa3"])
    ap.add_argument("--deterministic", action="store_true", help="both libraries' deterministic backward")
    ap.add_argument("--rounds", type=int, default=1, help="time each call this many times in rotating order")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds is 1 or more")
    libs = {"a": load(args.a), "b": load(args.b)}  # side by side: fa2_abi.load loads RTLD_LOCAL
    rows = []
    for pas in args.passes.split(","):
        for d in map(int, args.hdims.split(",")):
            for s in map(int, args.seqlens.split(",")):
                for causal in (False, True):
                    rows.append(measure(libs, pas, d, s, causal, args.kernel, args.deterministic, args.rounds))
                    torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def measure(libs, pas, d, s, causal, kernel, deterministic=False, rounds=1):
    b, h = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    outs = {}

    def ours(name):
        o, dq, dk, dv = outs.setdefault(name, [torch.full_like(q, float("nan")) for _ in range(4)])
        fa2 = Fa2(torch, libs[name], q, k, v, o, lse, causal, grads=(do, dq, dk, dv), kernel=kernel.encode(),
                  deterministic=deterministic)
        return fa2.forward if pas == "fwd" else fa2.forward_backward

    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(pas != "fwd") for x in (q, k, v))

    def sdpa(backend):
        def call():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                if pas != "fwd":
                    out.backward(do.transpose(1, 2))
        return call

    calls = {"a": ours("a"), "b": ours("b"), "flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    if kernel == "fa3":
        calls["cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    for fn in calls.values():
        fn()
    torch.cuda.synchronize()
    n = 1 if pas == "fwd" else 4
    diff = max((x.float() - y.float()).abs().max().item() for x, y in zip(outs["a"][:n], outs["b"][:n]))
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0) * (1.0 if pas == "fwd" else 3.5)
    leaves = [qt, kt, vt] if pas != "fwd" else None
    ms = {name: [] for name in calls}
    for name in rotating(calls, rounds):  # see --rounds
        ms[name].append(triton.testing.do_bench(calls[name], warmup=25, rep=100, return_mode="median",
                                                grad_to_none=leaves))
    tf = {name: flops / (statistics.median(ms[name]) * 1e-3) / 1e12 for name in calls}
    row = {"pass": pas, "deterministic": int(deterministic), "rounds": rounds, "hdim": d, "seqlen": s,
           "causal": int(causal), "a_tflops": tf["a"], "b_tflops": tf["b"],
           "flash_tflops": tf["flash"], "b_over_a": tf["b"] / tf["a"], "a_vs_flash": tf["a"] / tf["flash"],
           "b_vs_flash": tf["b"] / tf["flash"], "max_abs_diff_a_b": diff}
    if "cudnn" in tf:
        row.update(cudnn_tflops=tf["cudnn"], a_vs_cudnn=tf["a"] / tf["cudnn"], b_vs_cudnn=tf["b"] / tf["cudnn"])
    print(f"{pas:7s} d={d:3d} s={s:5d} causal={int(causal)}  a {tf['a']:6.1f}  b {tf['b']:6.1f}  "
          f"flash {tf['flash']:6.1f} TFLOP/s  b/a {row['b_over_a']:.3f}  a/flash {row['a_vs_flash']:.2f}  "
          f"b/flash {row['b_vs_flash']:.2f}  |a-b| {diff:.1e}" +
          (f"  cudnn {tf['cudnn']:6.1f}  b/cudnn {row['b_vs_cudnn']:.2f}" if "cudnn" in tf else ""), flush=True)
    return row


if __name__ == "__main__":
    main()
