#!/usr/bin/env python3
"""A/B builds of flashlab's decode kernel (gpu/decode/) in one process, beside the fastest SDPA backend.

Runs on the GPU machine. Loads two or more builds of libflashlab.so side by side (python/flashlab/_abi.py
`load`: RTLD_LOCAL) and times each one's flash_attn_with_kvcache on the same caches with
bench/decode_compare.py's layers clock (calls over distinct caches, at least four L2s of them, back to back
in a CUDA graph: what a decode step pays a layer), in rounds whose order rotates (the first library of one
round is the last of the next), so that a change is read without the drift between processes. Each build's
output is checked against the first's. Shapes as decode_compare.py: q_len 1, 32 heads over 8 kv heads,
d = 128 (--hdim), bf16, full caches; --paged N pages them through a shuffled block table (SDPA reads them
contiguous). Prints one line a shape and writes a CSV (a row a shape and build).

    PYTHONPATH=python python3 bench/decode_ab.py OUT.csv base.so new.so [more.so ...]
        [--names base,new] [--shapes 1x8192,64x1024] [--paged 0,256] [--hdim 128] [--rounds 3]
"""
import argparse
import datetime
import os
import statistics
import sys

import torch

import flashlab
from flashlab import _abi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_compare import caches_for, copy_rate, layers_s, write_csv  # noqa: E402
from decode_splits import best_sdpa_s  # noqa: E402
from rounds import rotating  # noqa: E402


def ours(c, lens):
    kw = {"block_table": c[3]} if c[3] is not None else {}
    return lambda: flashlab.flash_attn_with_kvcache(c[0], c[1], c[2], cache_seqlens=lens, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("libs", nargs="+")
    ap.add_argument("--names", default="", help="a name a library (default: the file names)")
    ap.add_argument("--shapes", default="1x8192,1x16384,1x65536,8x1024,8x8192,64x1024,64x4096",
                    help="batch x cache_len, ...")
    ap.add_argument("--paged", default="0,256", help="page sizes (0: contiguous)")
    ap.add_argument("--hdim", type=int, default=128, help="head dim (a multiple of 8 up to 256)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.hdim < 8 or args.hdim > 256 or args.hdim % 8:
        ap.error("--hdim is a multiple of 8 up to 256")
    if len(args.libs) < 2:
        ap.error("give two libraries or more")
    names = args.names.split(",") if args.names else [os.path.basename(p) for p in args.libs]
    if len(names) != len(args.libs):
        ap.error(f"{len(names)} names for {len(args.libs)} libraries")
    try:
        shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
        pages = [int(p) for p in args.paged.split(",")]
    except ValueError:
        ap.error("--shapes is batch x cache_len, ... and --paged page sizes, all integers")
    for batch, cache_len in shapes:
        for p in pages:
            if batch < 1 or cache_len < 1 or p < 0 or (p and cache_len % p):
                ap.error(f"{batch}x{cache_len} with pages of {p}: positive sizes, cache_len a multiple of the page")
    try:
        libs = [_abi.load(p) for p in args.libs]
    except _abi.FlashlabError as e:
        sys.exit(f"decode_ab: {e}")
    dev = torch.cuda.get_device_name()
    roof = copy_rate()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{dev}: a copy moves {roof / 1e12:.2f} TB/s; layers clock, median of {args.rounds} rounds; "
          f"x: time of {names[0]} over each build's", flush=True)
    rows = []
    for batch, cache_len in shapes:
        for paged in pages:
            d = args.hdim
            cache_bytes = 2 * batch * cache_len * 8 * d * 2
            copies = max(2, -(-4 * l2 // cache_bytes))
            torch.manual_seed(0)
            caches = caches_for(batch, cache_len, paged, copies, d)
            lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
            sdpa = best_sdpa_s(lambda fns: layers_s(fns)[0],
                               [(c[0].transpose(1, 2), c[4].transpose(1, 2), c[5].transpose(1, 2)) for c in caches])
            times = [[] for _ in libs]
            outs, splits = [], []
            for i, lib in enumerate(libs):
                _abi._lib = lib
                outs.append(ours(caches[0], lens)())
                splits.append(flashlab.flash_attn_with_kvcache.last_num_splits)
            for i in rotating(range(len(libs)), args.rounds):
                _abi._lib = libs[i]
                times[i].append(layers_s([ours(c, lens) for c in caches])[0])
            base = statistics.median(times[0])
            cells = []
            for i, name in enumerate(names):
                t = statistics.median(times[i])
                diff = (outs[i].float() - outs[0].float()).abs().max().item()
                rows.append({"device": dev, "date": datetime.date.today().isoformat(), "build": name,
                             "hdim": d, "batch": batch, "cache_len": cache_len, "page_size": paged, "num_splits": splits[i],
                             "layer_copies": copies, "time_s": t, "times_s": " ".join(f"{x:.4e}" for x in times[i]),
                             "of_copy_rate": cache_bytes / t / roof, "over_first": base / t,
                             "best_sdpa_s": sdpa or "", "best_sdpa_over": sdpa / t if sdpa else "",
                             "max_abs_diff_vs_first": diff})
                cells.append(f"{name} {t * 1e6:7.1f} us {cache_bytes / t / roof * 100:5.1f}% s{splits[i]:<3d}"
                             f" x{base / t:5.3f} SDPA/{sdpa / t if sdpa else float('nan'):5.3f} d{diff:.0e}")
            print(f"d{d} b{batch} c{cache_len} p{paged}: " + " | ".join(cells), flush=True)
            del caches, outs
            torch.cuda.empty_cache()
    _abi._lib = None
    write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
