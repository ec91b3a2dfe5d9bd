#!/usr/bin/env python3
"""Race flashlab's GPU kernels against PyTorch SDPA (flash = FlashAttention 2, cuDNN) on one GPU.

Runs on the GPU machine. For the anchors' sweep (bf16, batch * seqlen = 16384, heads * head_dim = 2048),
forward and forward+backward, it times flashlab's fa2 and, on sm_90, fa3
(through the C ABI, on the same PyTorch tensors), SDPA's flash backend and its cuDNN backend in the same process with triton.testing.do_bench (median),
checks flashlab's outputs (O; dQ, dK, dV) against SDPA flash's on the same inputs, and writes a CSV and
a TFLOP/s table.

Usage: python3 bench/gpu_compare.py LIB.so OUT.csv [--seqlens 512,1024,...] [--hdims 64,128,256]
                                    [--passes fwd,fwd+bwd] [--deterministic]
FLOPs follow ANCHORS.md: 4 * batch * heads * seqlen^2 * head_dim, halved for causal; forward+backward
counts 3.5x the forward.
"""
import argparse
import csv
import datetime
import os
import sys

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize_gpu  # noqa: E402
from fa2_abi import Fa2, load  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--passes", default="fwd,fwd+bwd")
    ap.add_argument("--deterministic", action="store_true", help="time fa2's and fa3's deterministic backward")
    args = ap.parse_args()
    lib = load(args.lib)
    device = torch.cuda.get_device_name()
    rows = []
    for pas in args.passes.split(","):
        for d in map(int, args.hdims.split(",")):
            for s in map(int, args.seqlens.split(",")):
                for causal in (False, True):
                    rows.append(measure(lib, device, pas, d, s, causal, args.deterministic))
                    torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))  # fa3's columns where it ran
        w.writeheader()
        w.writerows(rows)
    print()
    print(summarize_gpu.tables(rows))  # the TFLOP/s tables (bench/summarize_gpu.py makes them from the CSV too)


def measure(lib, device, pas, d, s, causal, deterministic):
    b, h = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    o = torch.full_like(q, float("nan"))
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    fa2 = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do, dq, dk, dv), deterministic=deterministic)
    # fa3 (Hopper): its own output tensors, checked and timed beside fa2 where it runs.
    o3, lse3 = torch.full_like(q, float("nan")), torch.empty_like(lse)
    grads3 = tuple(torch.full_like(q, float("nan")) for _ in range(3))  # dq, dk, dv
    fa3 = None
    if has_fa3():
        fa3 = Fa2(torch, lib, q, k, v, o3, lse3, causal, grads=(do,) + grads3, deterministic=deterministic,
                  kernel=b"fa3")

    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(pas != "fwd") for x in (q, k, v))
    dot = do.transpose(1, 2)

    def sdpa(backend):
        def call():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                if pas != "fwd":
                    out.backward(dot)
            return out
        return call

    ours = fa2.forward if pas == "fwd" else fa2.forward_backward
    ours()
    ref = sdpa(SDPBackend.FLASH_ATTENTION)().transpose(1, 2)
    torch.cuda.synchronize()
    diffs = {"o": (o.float() - ref.float()).abs().max().item()}
    if fa3:
        fa3.forward() if pas == "fwd" else fa3.forward_backward()
        torch.cuda.synchronize()
        diffs["o_fa3"] = (o3.float() - ref.float()).abs().max().item()
    if pas != "fwd":
        for name, mine, theirs in (("dq", dq, qt.grad), ("dk", dk, kt.grad), ("dv", dv, vt.grad)):
            diffs[name] = (mine.float() - theirs.transpose(1, 2).float()).abs().max().item()
        if fa3:
            for name, mine, theirs in zip(("dq_fa3", "dk_fa3", "dv_fa3"), grads3, (qt.grad, kt.grad, vt.grad)):
                diffs[name] = (mine.float() - theirs.transpose(1, 2).float()).abs().max().item()
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0) * (1.0 if pas == "fwd" else 3.5)
    t = {}
    ours3 = (fa3.forward if pas == "fwd" else fa3.forward_backward) if fa3 else None
    timed = [("flashlab_fa2", ours)] + ([("flashlab_fa3", ours3)] if fa3 else [])
    if fa3 and deterministic and pas != "fwd":  # the atomic backward in the same process: the ratio the issue asks
        atomic = Fa2(torch, lib, q, k, v, torch.empty_like(q), torch.empty_like(lse), causal,
                     grads=(do,) + tuple(torch.empty_like(q) for _ in range(3)), kernel=b"fa3")
        timed.append(("flashlab_fa3_atomic", atomic.forward_backward))
    for name, fn in timed + [("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION)),
                             ("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION))]:
        leaves = [qt, kt, vt] if pas != "fwd" else None  # grads reset (untimed) before every run
        t[name] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median", grad_to_none=leaves) * 1e-3
    row = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
           "pass": pas, "deterministic": int(deterministic and pas != "fwd"), "hdim": d, "seqlen": s,
           "causal": int(causal), "batch": b, "heads": h}
    for name in ("o", "dq", "dk", "dv", "o_fa3", "dq_fa3", "dk_fa3", "dv_fa3"):
        row[f"max_abs_diff_{name}_vs_sdpa_flash"] = diffs.get(name, "")
    for name, sec in t.items():
        row[f"{name}_ms"] = sec * 1e3
        row[f"{name}_tflops"] = flops / sec / 1e12
    row["ratio_vs_flash"] = row["flashlab_fa2_tflops"] / row["sdpa_flash_tflops"]
    row["ratio_vs_cudnn"] = row["flashlab_fa2_tflops"] / row["sdpa_cudnn_tflops"]
    row["fa3_vs_cudnn"] = row["flashlab_fa3_tflops"] / row["sdpa_cudnn_tflops"] if fa3 else ""
    if "flashlab_fa3_atomic" in t:
        row["fa3_deterministic_vs_atomic"] = row["flashlab_fa3_tflops"] / row["flashlab_fa3_atomic_tflops"]
    fa3_text = f"fa3 {row['flashlab_fa3_tflops']:6.1f} ({row['fa3_vs_cudnn']:.2f}x cuDNN)  " if fa3 else ""
    if "fa3_deterministic_vs_atomic" in row:
        fa3_text += f"det/atomic {row['fa3_deterministic_vs_atomic']:.2f}  "
    print(f"{pas:7s} d={d:3d} s={s:5d} causal={int(causal)}  fa2 {row['flashlab_fa2_tflops']:6.1f}  {fa3_text}"
          f"flash {row['sdpa_flash_tflops']:6.1f}  cudnn {row['sdpa_cudnn_tflops']:6.1f} TFLOP/s  "
          f"ratio {row['ratio_vs_flash']:.2f}  maxdiff " + " ".join(f"{k} {v:.2e}" for k, v in diffs.items()),
          flush=True)
    return row


def has_fa3():
    """Whether this GPU runs fa3 (sm_90: an H100 or H200)."""
    return torch.cuda.get_device_capability() == (9, 0)


if __name__ == "__main__":
    main()
