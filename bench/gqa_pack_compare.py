#!/usr/bin/env python3
"""fa3's PackGQA against unpacked tiles, and both against SDPA, on short query sequences under GQA.

Runs on the GPU machine (sm_90). A tile of fa3's forward is 128 query rows. Unpacked, they are 128
positions of one query head, so a query of 1 to 64 positions (a decoding step, a speculative step, a short
prefill chunk) leaves most of the tile's rows idle, and each query head's CTA reads its kv head's K and V
again. Packed (gpu/fa3/scheduler.cuh PackGQA), a tile holds every query head of one kv head at 128 / group
positions: the group's K and V are read once and the rows are full. For each shape it times, in one
process with triton.testing.do_bench (median), fa3 packed ("fa3-pack-gqa"), unpacked ("fa3-no-pack-gqa"),
as the library picks by itself ("fa3", pack_of's rule), and SDPA's cuDNN and flash backends (with
enable_gqa where the backend takes it, else K and V repeated over the group: column sdpa_gqa), and checks
the packed output against SDPA's math backend in fp32 on the first batch entry.

Shapes: d = 128, batch 4, 32 query heads over 8 kv heads (group 4) and 64 over 8 (group 8), seqlen_q 1 to
2048, seqlen_k 4096 and 16384, no mask (SDPA's is_causal aligns top-left when seqlen_q != seqlen_k; ours
bottom-right) and, packed against unpacked only, causal.

Usage: python3 bench/gqa_pack_compare.py LIB.so OUT.csv [--seqlens-q 1,...] [--seqlens-k 4096,16384]
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
from fa2_abi import load  # noqa: E402


def forward(lib, kernel, q, k, v, o, lse, causal):
    """A closure running flashlab's forward `kernel` on (b, s, h, d) bf16 tensors."""
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    err = ctypes.create_string_buffer(512)
    args = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, lse)]
    args += [b, sq, sk, hq, hk, d, 2, ctypes.c_float(d ** -0.5), -1, 0 if causal else -1, ctypes.c_float(0.0),
             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), err, 512]

    def run():
        if lib.flashlab_forward(kernel, *args) != 0:
            raise RuntimeError(err.value.decode())
    return run


def sdpa(backend, q, k, v):
    """SDPA on (b, s, h, d) tensors with `backend`: (closure, 'native' | 'expanded'), or (None, why)."""
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]

    def native():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    ke, ve = (x.repeat_interleave(group, dim=1) for x in (kt, vt))

    def expanded():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, ke, ve)
    for fn, how in ((native, "native"), (expanded, "expanded")):
        try:
            fn()
            torch.cuda.synchronize()
            return fn, how
        except RuntimeError as e:
            why = str(e).splitlines()[0][:80]
    return None, why


def measure(lib, device, hq, hk, sq, sk, causal, d=128, b=4):
    gen = torch.Generator(device="cuda").manual_seed(sq * 7 + sk + hq)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2))
    outs = {}
    fns = {}
    for name, kernel in (("packed", b"fa3-pack-gqa"), ("unpacked", b"fa3-no-pack-gqa"), ("auto", b"fa3")):
        o = torch.full_like(q, float("nan"))
        lse = torch.full((b, hq, sq), float("nan"), device="cuda", dtype=torch.float32)
        fns[name] = forward(lib, kernel, q, k, v, o, lse, causal)
        fns[name]()
        outs[name] = (o, lse)
    torch.cuda.synchronize()
    row = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__, "hdim": d,
           "batch": b, "heads_q": hq, "heads_kv": hk, "group": hq // hk, "seqlen_q": sq, "seqlen_k": sk,
           "causal": int(causal)}
    row["packed_equals_unpacked"] = int(torch.equal(outs["packed"][0], outs["unpacked"][0]) and
                                        torch.equal(outs["packed"][1], outs["unpacked"][1]))
    if not causal:
        qt, kt, vt = (x[:1].float().transpose(1, 2) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True).transpose(1, 2)
        row["packed_max_err"] = (outs["packed"][0][:1].float() - ref).abs().max().item()
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            fn, how = sdpa(backend, q, k, v)
            row[f"{name}_gqa"] = how
            if fn:
                fns[name] = fn
    t = {name: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") for name, fn in fns.items()}
    for name in ("packed", "unpacked", "auto", "cudnn", "flash"):
        row[f"{name}_us"] = t[name] * 1e3 if name in t else float("nan")
    row["packed_vs_unpacked"] = t["unpacked"] / t["packed"]
    row["auto_vs_best_of_two"] = min(t["packed"], t["unpacked"]) / t["auto"]
    best_sdpa = min((t[n] for n in ("cudnn", "flash") if n in t), default=float("nan"))
    row["auto_vs_best_sdpa"] = best_sdpa / t["auto"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--seqlens-q", default="1,4,16,32,64,128,512,2048")
    ap.add_argument("--seqlens-k", default="4096,16384")
    args = ap.parse_args()
    lib = load(args.lib)
    device = torch.cuda.get_device_name()
    rows = []
    for hq, hk in ((32, 8), (64, 8)):
        for sk in map(int, args.seqlens_k.split(",")):
            for sq in map(int, args.seqlens_q.split(",")):
                for causal in (False, True):
                    r = measure(lib, device, hq, hk, sq, sk, causal)
                    rows.append(r)
                    print(f"group {r['group']} sq={sq:5} sk={sk:5} causal={int(causal)}  packed {r['packed_us']:8.1f}"
                          f"  unpacked {r['unpacked_us']:8.1f}  auto {r['auto_us']:8.1f}  cudnn {r['cudnn_us']:8.1f}"
                          f"  flash {r['flash_us']:8.1f} us  packed/unpacked {r['packed_vs_unpacked']:.2f}x"
                          f"  auto/best-sdpa {r['auto_vs_best_sdpa']:.2f}x  same bits {r['packed_equals_unpacked']}"
                          f"  err {r.get('packed_max_err', float('nan')):.1e}", flush=True)
                    torch.cuda.empty_cache()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(key for r in rows for key in r)))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
