#!/usr/bin/env python3
"""Race fa3's FP8 forward against its bf16 forward and SDPA's cuDNN backend (bf16) on one GPU.

Runs on the GPU machine (sm_90). For the anchors' sweep (batch * seqlen = 16384, heads * head_dim = 2048),
forward, head dims 128 and 256, it quantizes the bf16 inputs to float8 e4m3 with a descale a tensor
(max|x| / 448, as core/include/flashlab/fp8.hpp does), then times, in one process with
triton.testing.do_bench (median): flashlab's fa3 FP8 forward (its V transpose included), flashlab's fa3
bf16 forward and SDPA's cuDNN backend on the bf16 inputs. Accuracy, as FlashAttention-3 tests FP8:
against attention in fp32 on the dequantized inputs (the values the FP8 kernel computes on), the FP8
kernel's max |error| beside that of SDPA's bf16 math backend on the same dequantized inputs; and the
FP8 output against the bf16 kernel's on the original inputs (the quantization's own cost).

With --accuracy it measures instead the error of the FP8 forward with and without incoherent processing
(the FA3 paper's section 3.3): Q and K multiplied by the same random orthogonal matrix, a Hadamard matrix
with random signs (Q H)(K H)^T = Q K^T, before they are quantized, so that an outlier's mass spreads over
the head dim. Inputs as the paper's: N(0, 1) with 0.1% of the entries plus N(0, 10^2) outliers; errors
(RMSE and max) against attention in fp64 on the original inputs, beside our bf16 fa3's. The rotation is
done here in torch, before the call (it fuses with rotary embeddings in a model); the kernel is the same.

With --other OTHER.so (a second build of the library, say the one before a change) it also times that
build's FP8 forward in the same process (fp8_other_ms, fp8_vs_other) and checks both builds' outputs agree
to within the FP8 rule's scale (fp8_vs_other_max_diff): an A/B without the drift between processes.

Usage: python3 bench/fp8_compare.py LIB.so OUT.csv [--seqlens 1024,...] [--hdims 128,256] [--accuracy]
                                    [--other OTHER.so]
FLOPs follow ANCHORS.md: 4 * batch * heads * seqlen^2 * head_dim, halved for causal.
"""
import argparse
import csv
import ctypes
import datetime
import os
import sys

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa2_abi import Fa2, load  # noqa: E402

E4M3_MAX = 448.0


def quantize(x):
    """(e4m3 tensor, descale): x ~ e4m3 * descale, the largest |x| on 448."""
    descale = (x.abs().max().float() / E4M3_MAX).clamp(min=1e-12)
    return (x.float() / descale).to(torch.float8_e4m3fn), float(descale)


def tflops(b, h, s, d, causal, ms):
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    return flops / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--hdims", default="128,256")
    ap.add_argument("--accuracy", action="store_true", help="FP8's error with and without incoherent processing")
    ap.add_argument("--other", help="a second build of the library whose FP8 forward is timed beside LIB's")
    args = ap.parse_args()
    lib = load(args.lib)
    lib.flashlab_forward_fp8.restype = ctypes.c_int
    other = load(args.other) if args.other else None  # side by side: fa2_abi.load loads RTLD_LOCAL
    if other:
        other.flashlab_forward_fp8.restype = ctypes.c_int
    device = torch.cuda.get_device_name()
    if args.accuracy:
        return accuracy(lib, device, args)
    rows = []
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            for causal in (False, True):
                rows.append(measure(lib, device, d, s, causal, other))
                r = rows[-1]
                ab = f"  fp8/other {r['fp8_vs_other']:.3f}" if other else ""
                print(f"d={d:3} s={s:5} causal={int(causal)}  fp8 {r['fp8_tflops']:6.1f}  fa3 bf16 {r['fa3_tflops']:6.1f}"
                      f"  cudnn {r['cudnn_tflops']:6.1f} TFLOP/s  fp8/fa3 {r['fp8_vs_fa3']:.2f}  fp8/cudnn"
                      f" {r['fp8_vs_cudnn']:.2f}{ab}  err {r['fp8_err']:.2e} (bf16 math {r['math_err']:.2e})", flush=True)
                torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def fp8_forward(lib, q, k, v, causal):
    """O (bf16) and LSE of the FP8 forward on q, k, v quantized here (a descale a tensor)."""
    b, s, h, d = q.shape
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    o = torch.full_like(q, float("nan"), dtype=torch.bfloat16)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    err = ctypes.create_string_buffer(512)
    rc = lib.flashlab_forward_fp8(*[ctypes.c_void_p(t.data_ptr()) for t in (q8, k8, v8, o, lse)], b, s, s, h, h, d,
                                  ctypes.c_float(dq), ctypes.c_float(dk), ctypes.c_float(dv), ctypes.c_float(d ** -0.5),
                                  -1, 0 if causal else -1, ctypes.c_float(0.0),
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), err, 512)
    if rc != 0:
        raise RuntimeError(err.value.decode())
    torch.cuda.synchronize()
    return o


def random_hadamard(d, gen):
    """H = diag(random signs) x Sylvester's Hadamard matrix / sqrt(d): orthogonal (d a power of two)."""
    had = torch.ones(1, 1, dtype=torch.float64)
    while had.shape[0] < d:
        had = torch.cat([torch.cat([had, had], 1), torch.cat([had, -had], 1)], 0)
    signs = torch.randint(0, 2, (d,), generator=gen, dtype=torch.float64) * 2 - 1
    return (signs[:, None] * had / d ** 0.5).cuda()


def accuracy(lib, device, args):
    rows = []
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            b, h = 1, 4
            gen = torch.Generator().manual_seed(d + s)

            def outliers():  # N(0, 1), 0.1% of the entries plus N(0, 10^2)
                x = torch.randn(b, s, h, d, generator=gen, dtype=torch.float64)
                return x + (torch.rand(b, s, h, d, generator=gen, dtype=torch.float64) < 1e-3) * 10 * torch.randn(
                    b, s, h, d, generator=gen, dtype=torch.float64)

            q, k, v = (outliers().cuda().to(torch.bfloat16) for _ in range(3))
            exact = F.scaled_dot_product_attention(*(x.double().transpose(1, 2) for x in (q, k, v))).transpose(1, 2)
            rot = random_hadamard(d, gen)
            q_rot, k_rot = ((x.double() @ rot).to(torch.bfloat16) for x in (q, k))
            o3, lse3 = torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)
            Fa2(torch, lib, q, k, v, o3, lse3, False, kernel=b"fa3").forward()
            torch.cuda.synchronize()
            outs = {"fa3_bf16": o3, "fp8": fp8_forward(lib, q, k, v, False),
                    "fp8_hadamard": fp8_forward(lib, q_rot, k_rot, v, False)}
            row = {"device": device, "date": datetime.date.today().isoformat(), "hdim": d, "seqlen": s, "batch": b,
                   "heads": h, "inputs": "N(0,1) + 0.1% N(0,100) outliers"}
            for name, o in outs.items():
                e = o.double() - exact
                row[f"{name}_rmse"] = e.pow(2).mean().sqrt().item()
                row[f"{name}_max"] = e.abs().max().item()
            rows.append(row)
            print(f"d={d:3} s={s:5}  RMSE: bf16 fa3 {row['fa3_bf16_rmse']:.2e}  fp8 {row['fp8_rmse']:.2e}  fp8 + Hadamard "
                  f"{row['fp8_hadamard_rmse']:.2e} ({row['fp8_rmse'] / row['fp8_hadamard_rmse']:.2f}x lower)", flush=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def measure(lib, device, d, s, causal, other=None):
    b, h = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    o8 = torch.full_like(q, float("nan"))
    lse8 = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    err = ctypes.create_string_buffer(512)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    args = [ctypes.c_void_p(t.data_ptr()) for t in (q8, k8, v8, o8, lse8)]
    args += [b, s, s, h, h, d, ctypes.c_float(dq), ctypes.c_float(dk), ctypes.c_float(dv), ctypes.c_float(d ** -0.5),
             -1, 0 if causal else -1, ctypes.c_float(0.0), stream, err, 512]

    def fp8():
        if lib.flashlab_forward_fp8(*args) != 0:
            raise RuntimeError(err.value.decode())

    o8_other = torch.full_like(q, float("nan"))
    args_other = [ctypes.c_void_p(o8_other.data_ptr()) if i == 3 else a for i, a in enumerate(args)]

    def fp8_other():
        if other.flashlab_forward_fp8(*args_other) != 0:
            raise RuntimeError(err.value.decode())

    o3, lse3 = torch.full_like(q, float("nan")), torch.empty_like(lse8)
    fa3 = Fa2(torch, lib, q, k, v, o3, lse3, causal, kernel=b"fa3")
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    fp8()
    fa3.forward()
    if other:
        fp8_other()
    torch.cuda.synchronize()
    # Accuracy on the first batch entry: the values the FP8 kernel computes on, in fp32, as the oracle.
    deq = [(x8[:1].float() * ds).transpose(1, 2) for x8, ds in ((q8, dq), (k8, dk), (v8, dv))]
    oracle = F.scaled_dot_product_attention(*deq, is_causal=causal).transpose(1, 2)
    with sdpa_kernel(SDPBackend.MATH):
        math = F.scaled_dot_product_attention(*(x.bfloat16() for x in deq), is_causal=causal).transpose(1, 2)
    fp8_err = (o8[:1].float() - oracle).abs().max().item()
    math_err = (math.float() - oracle).abs().max().item()
    vs_bf16 = (o8.float() - o3.float()).abs().max().item()
    t = {name: triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
         for name, fn in (("fp8", fp8), ("fa3", fa3.forward), ("cudnn", cudnn)) + ((("fp8_other", fp8_other),) if other else ())}
    row = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__, "hdim": d,
           "seqlen": s, "causal": int(causal), "batch": b, "heads": h}
    for name, ms in t.items():
        row[f"{name}_ms"] = ms
        row[f"{name}_tflops"] = tflops(b, h, s, d, causal, ms)
    row["fp8_vs_fa3"] = t["fa3"] / t["fp8"]
    row["fp8_vs_cudnn"] = t["cudnn"] / t["fp8"]
    row["fp8_err"], row["math_err"], row["fp8_vs_fa3_bf16_max_diff"] = fp8_err, math_err, vs_bf16
    row["fp8_finite"] = int(torch.isfinite(o8).all().item())
    if other:
        row["fp8_vs_other"] = t["fp8_other"] / t["fp8"]
        row["fp8_vs_other_max_diff"] = (o8.float() - o8_other.float()).abs().max().item()
    return row


if __name__ == "__main__":
    main()
