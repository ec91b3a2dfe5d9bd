"""Runs flashlab's decode kernel (gpu/decode/) once per configuration of a sweep, for ncu to measure:

    ncu --csv --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        -k regex:"split_kernel|combine_kernel|append_kernel" \
        python3 simulator/validation/measure_decode.py > ncu.csv

Each configuration prints one line `config batch=.. cache_len=.. heads_q=.. heads_kv=.. hdim=.. splits=..`
before its launch, so the ncu rows (in launch order) can be matched to it. Shapes: q_len 1, bf16,
contiguous caches, every entry full (cache_seqlens = cache_len)."""
import sys

import torch

import flashlab

CONFIGS = [(b, s, 32, 8, 128) for b in (1, 8) for s in (4096, 16384, 65536)] + [(1, 65536, 32, 8, 64),
                                                                                 (4, 16384, 16, 2, 128)]


def main():
    for batch, cache_len, hq, hk, d in CONFIGS:
        q = torch.randn(batch, 1, hq, d, device="cuda", dtype=torch.bfloat16)
        kc = torch.randn(batch, cache_len, hk, d, device="cuda", dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        flashlab.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        torch.cuda.synchronize()
        print(f"config batch={batch} cache_len={cache_len} heads_q={hq} heads_kv={hk} hdim={d} "
              f"splits={flashlab.flash_attn_with_kvcache.last_num_splits}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
