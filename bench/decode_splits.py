"""How the split count shapes flash-decoding's time: flashlab's decode kernel (gpu/decode/) on one GPU, one
process, at each num_splits of a list and at the heuristic's own pick, beside the fastest SDPA backend.

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/decode_splits.py out.csv

Shapes as bench/decode_compare.py (q_len 1, 32 heads over 8 kv heads, head_dim 128, bf16, a full
contiguous cache); times are triton.testing.do_bench medians (warm-up 25, 100 repetitions). A row per
(batch, cache_len, num_splits); `heuristic` marks the count the heuristic picks (num_splits=0).
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
from decode_compare import BACKENDS, median_s, write_csv  # noqa: E402


def best_sdpa_s(q, k, v):
    best = None
    for backend in BACKENDS.values():
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                t = median_s(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        except RuntimeError:
            continue
        best = t if best is None else min(best, t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shapes", default="1x1024,1x8192,1x65536,8x1024,8x8192", help="batch x cache_len, ...")
    ap.add_argument("--splits", default="1,2,4,8,12,16,24,32,48,64,96,128")
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    rows = []
    for shape in args.shapes.split(","):
        batch, cache_len = map(int, shape.split("x"))
        torch.manual_seed(0)
        q = torch.randn(batch, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
        kc = torch.randn(batch, cache_len, 8, 128, device="cuda", dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
        sdpa = best_sdpa_s(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2))
        flashlab.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        picked = flashlab.flash_attn_with_kvcache.last_num_splits
        counts = sorted(set(int(s) for s in args.splits.split(",")) | {picked})
        for splits in counts:
            t = median_s(lambda: flashlab.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=splits))
            row = {"device": dev, "date": datetime.date.today().isoformat(), "batch": batch, "cache_len": cache_len,
                   "num_splits": splits, "heuristic": int(splits == picked), "flashlab_s": t,
                   "best_sdpa_s": sdpa, "best_sdpa_over_flashlab": sdpa / t if sdpa else ""}
            rows.append(row)
            print(f"batch {batch:3d} cache {cache_len:6d} splits {splits:3d}{' *' if splits == picked else '  '}: "
                  f"{t * 1e6:8.1f} us, best SDPA {sdpa * 1e6:8.1f} us ({sdpa / t:.2f}x)", flush=True)
        del q, kc, vc
        torch.cuda.empty_cache()
    write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
