#!/usr/bin/env python3
"""Race flashlab's GPU kernels against PyTorch SDPA (flash = FlashAttention 2, cuDNN) on one GPU.

Runs on the GPU machine. For the anchors' sweep (bf16, batch * seqlen = 16384, heads * head_dim = 2048,
forward), it times flashlab's fa2 (through the C ABI, on the same PyTorch tensors), SDPA's flash
backend and its cuDNN backend in the same process with triton.testing.do_bench (median), checks
flashlab's output against SDPA flash's on the same inputs, and writes a CSV and a TFLOP/s table.

Usage: python3 bench/gpu_compare.py LIB.so OUT.csv [--seqlens 512,1024,...] [--hdims 64,128,256]
FLOPs follow ANCHORS.md: 4 * batch * heads * seqlen^2 * head_dim, halved for causal.
"""
import argparse
import csv
import ctypes
import datetime

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--hdims", default="64,128,256")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    fwd = lib.flashlab_forward
    fwd.restype = ctypes.c_int
    err = ctypes.create_string_buffer(512)
    device = torch.cuda.get_device_name()
    rows = []
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            for causal in (False, True):
                b, h = 16384 // s, 2048 // d
                gen = torch.Generator(device="cuda").manual_seed(s + d)
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
                o = torch.full_like(q, float("nan"))
                lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
                stream = torch.cuda.current_stream().cuda_stream

                def ours():
                    rc = fwd(b"fa2", ctypes.c_void_p(q.data_ptr()), ctypes.c_void_p(k.data_ptr()),
                             ctypes.c_void_p(v.data_ptr()), ctypes.c_void_p(o.data_ptr()),
                             ctypes.c_void_p(lse.data_ptr()), b, s, s, h, h, d, 2, ctypes.c_float(d ** -0.5),
                             -1, 0 if causal else -1, ctypes.c_float(0.0), ctypes.c_void_p(stream), err, 512)
                    if rc != 0:
                        raise RuntimeError(err.value.decode())

                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

                def sdpa(backend):
                    def call():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    return call

                ours()
                ref = sdpa(SDPBackend.FLASH_ATTENTION)().transpose(1, 2)
                torch.cuda.synchronize()
                max_diff = (o.float() - ref.float()).abs().max().item()
                flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
                t = {name: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3
                     for name, fn in (("flashlab_fa2", ours), ("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION)),
                                      ("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)))}
                row = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                       "pass": "fwd", "hdim": d, "seqlen": s, "causal": int(causal), "batch": b, "heads": h,
                       "max_abs_diff_vs_sdpa_flash": max_diff}
                for name, sec in t.items():
                    row[f"{name}_ms"] = sec * 1e3
                    row[f"{name}_tflops"] = flops / sec / 1e12
                row["ratio_vs_flash"] = row["flashlab_fa2_tflops"] / row["sdpa_flash_tflops"]
                rows.append(row)
                print(f"d={d:3d} s={s:5d} causal={int(causal)}  fa2 {row['flashlab_fa2_tflops']:6.1f}  "
                      f"flash {row['sdpa_flash_tflops']:6.1f}  cudnn {row['sdpa_cudnn_tflops']:6.1f} TFLOP/s  "
                      f"ratio {row['ratio_vs_flash']:.2f}  maxdiff {max_diff:.2e}", flush=True)
                del q, k, v, o, lse, ref
                torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
