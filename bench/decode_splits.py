"""How the split count shapes flash-decoding's time: flashlab's decode kernel (gpu/decode/) on one GPU, one
process, at each num_splits of a list and at the heuristic's own pick, beside the fastest SDPA backend.

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/decode_splits.py out.csv

Shapes as bench/decode_compare.py (q_len 1, 32 heads over 8 kv heads, head_dim 128 or --hdim, bf16, a
full contiguous cache). Times: with --clock do_bench (the default), triton.testing.do_bench medians (warm-up 25,
100 repetitions; its L2 flush writes 256 MB before each call, which small caches pay for); with --clock
layers, decode_compare.py's layers clock (calls over distinct caches, at least four L2s of them, back to back
in a CUDA graph: what a decode step pays a layer). A row per (batch, cache_len, num_splits); `heuristic`
marks the count the heuristic picks (num_splits=0).
"""
import argparse
import datetime
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

import flashlab

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_compare import BACKENDS, caches_for, layers_s, median_s, write_csv  # noqa: E402


def best_sdpa_s(clock, caches):
    """The fastest SDPA backend's time on the caches (q, k, v as SDPA takes them), on the clock."""
    best = None
    for backend in BACKENDS.values():
        def call(q, k, v, backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        try:
            call(*caches[0])
            t = clock([lambda c=c: call(*c) for c in caches])
        except RuntimeError:
            continue
        best = t if best is None else min(best, t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shapes", default="1x1024,1x8192,1x65536,8x1024,8x8192", help="batch x cache_len, ...")
    ap.add_argument("--splits", default="1,2,4,8,12,16,24,32,48,64,96,128")
    ap.add_argument("--clock", choices=("do_bench", "layers"), default="do_bench")
    ap.add_argument("--hdim", type=int, default=128, help="head dim (a multiple of 8 up to 256)")
    args = ap.parse_args()
    if args.hdim < 8 or args.hdim > 256 or args.hdim % 8:
        ap.error("--hdim is a multiple of 8 up to 256")
    try:
        shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
        splits = sorted(set(int(s) for s in args.splits.split(",")))
    except ValueError:
        ap.error("--shapes is batch x cache_len, ... and --splits a list of integers")
    if any(len(sh) != 2 or min(sh) < 1 for sh in shapes) or min(splits) < 1 or max(splits) > 128:
        ap.error("--shapes is batch x cache_len, ... (positive); --splits 1 .. 128")
    d = args.hdim
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    if args.clock == "layers":
        def clock(fns):
            return layers_s(fns)[0]
    else:
        def clock(fns):
            return median_s(fns[0])
    dev = torch.cuda.get_device_name()
    rows = []
    for batch, cache_len in shapes:
        torch.manual_seed(0)
        cache_bytes = 2 * batch * cache_len * 8 * d * 2
        copies = 1 if args.clock == "do_bench" else max(1, -(-4 * l2 // cache_bytes))
        caches = [c[:3] for c in caches_for(batch, cache_len, 0, copies, d)]
        lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
        sdpa = best_sdpa_s(clock, [tuple(x.transpose(1, 2) for x in c) for c in caches])
        flashlab.flash_attn_with_kvcache(*caches[0], cache_seqlens=lens)
        picked = flashlab.flash_attn_with_kvcache.last_num_splits
        counts = sorted(set(splits) | {picked})
        for splits in counts:
            t = clock([lambda c=c: flashlab.flash_attn_with_kvcache(*c, cache_seqlens=lens, num_splits=splits)
                       for c in caches])
            row = {"device": dev, "date": datetime.date.today().isoformat(), "clock": args.clock, "copies": copies,
                   "hdim": d,
                   "batch": batch, "cache_len": cache_len,
                   "num_splits": splits, "heuristic": int(splits == picked), "flashlab_s": t,
                   "best_sdpa_s": sdpa, "best_sdpa_over_flashlab": sdpa / t if sdpa else ""}
            rows.append(row)
            print(f"d{d} batch {batch:3d} cache {cache_len:6d} splits {splits:3d}{' *' if splits == picked else '  '}: "
                  f"{t * 1e6:8.1f} us, best SDPA {sdpa * 1e6:8.1f} us ({sdpa / t:.2f}x)", flush=True)
        del caches
        torch.cuda.empty_cache()
    write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
