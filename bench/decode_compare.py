"""KV-cache decoding on one GPU, one process: flashlab's decode kernel (gpu/decode/, through
flashlab.flash_attn_with_kvcache) against PyTorch SDPA's backends on the same decode shapes, and against
the HBM roofline (the cache's bytes over the GPU's measured copy bandwidth).

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/decode_compare.py out.csv

Shapes: q_len 1, heads 32 over 8 kv heads (GQA 4:1), head_dim 128, bf16, a contiguous cache (or with
--paged N, the same keys in pages of N rows through a shuffled block table) of cache_len keys a batch
entry, every entry full; batch x cache_len over a sweep, shapes whose K and V pass --max-cache-bytes
skipped. Times are
triton.testing.do_bench medians (warm-up 25, 100 repetitions). SDPA gets the same K/V as
(batch, heads_kv, cache_len, dim) views with enable_gqa, and each backend is tried alone; one that refuses
the shape is recorded as empty. The achieved rate is the cache bytes (K and V) over the time; the roofline
is a device-to-device copy's bandwidth ((bytes read + written) / time) measured here. The error is
against SDPA in fp64 on the first two batch entries. `one_launch_s`, the same timing of one kernel that
adds 1 to one element, is the floor any call measured this way pays (launch, the events, the empty
pipeline), beside which small caches are read.
"""
import argparse
import csv
import datetime
import sys
import warnings

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashlab

warnings.filterwarnings("ignore", category=UserWarning)  # SDPA's notes on the backends that refuse GQA

BACKENDS = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
            "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}


def median_s(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def copy_rate():
    """A 2 GiB device-to-device copy's bandwidth: (bytes read + bytes written) per second."""
    src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = median_s(lambda: dst.copy_(src))
    return 2 * src.numel() / t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--cache-lens", default="1024,4096,16384,65536")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--paged", type=int, default=0, help="page size of a paged cache (0: contiguous)")
    ap.add_argument("--max-cache-bytes", type=float, default=20e9, help="skip shapes whose K and V exceed this")
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    roof = copy_rate()
    one = torch.zeros(1, device="cuda")
    floor = median_s(lambda: one.add_(1))
    print(f"{dev}: a copy moves {roof / 1e12:.2f} TB/s; one kernel's launch, timed alike, {floor * 1e6:.1f} us",
          flush=True)
    rows = []
    for batch in map(int, args.batches.split(",")):
        for cache_len in map(int, args.cache_lens.split(",")):
            hq, hk, d = args.heads, args.kv_heads, args.hdim
            if 2 * batch * cache_len * hk * d * 2 > args.max_cache_bytes:
                continue
            torch.manual_seed(0)
            q = torch.randn(batch, 1, hq, d, device="cuda", dtype=torch.bfloat16)
            kc = torch.randn(batch, cache_len, hk, d, device="cuda", dtype=torch.bfloat16)
            vc = torch.randn_like(kc)
            lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
            kw = {}
            kf, vf = kc, vc  # what flashlab reads: the same keys, paged through a shuffled block table
            if args.paged:
                pages = cache_len // args.paged
                table = torch.randperm(batch * pages, device="cuda", dtype=torch.int32).reshape(batch, pages)
                kf = torch.empty(batch * pages, args.paged, hk, d, device="cuda", dtype=kc.dtype)
                vf = torch.empty_like(kf)
                kf[table.flatten().long()] = kc.reshape(batch * pages, args.paged, hk, d)
                vf[table.flatten().long()] = vc.reshape(batch * pages, args.paged, hk, d)
                kw["block_table"] = table
            ours = flashlab.flash_attn_with_kvcache(q, kf, vf, cache_seqlens=lens, **kw)
            splits = flashlab.flash_attn_with_kvcache.last_num_splits
            row = {"device": dev, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                   "batch": batch, "cache_len": cache_len, "page_size": args.paged, "heads_q": hq, "heads_kv": hk, "hdim": d,
                   "num_splits": splits, "cache_bytes": 2 * kc.numel() * kc.element_size(),
                   "copy_bytes_per_s": roof, "one_launch_s": floor}
            row["flashlab_s"] = median_s(lambda: flashlab.flash_attn_with_kvcache(q, kf, vf, cache_seqlens=lens, **kw))
            qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
            n = min(batch, 2)
            ref = F.scaled_dot_product_attention(qt[:n].double(), kt[:n].double(), vt[:n].double(), enable_gqa=True)
            row["max_abs_err"] = (ours[:n].transpose(1, 2).double() - ref).abs().max().item()
            del ref
            for name, backend in BACKENDS.items():
                try:
                    with sdpa_kernel(backend):
                        F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                        row[name + "_s"] = median_s(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True))
                except RuntimeError:
                    row[name + "_s"] = ""
            row["flashlab_bytes_per_s"] = row["cache_bytes"] / row["flashlab_s"]
            row["flashlab_of_roofline"] = row["flashlab_bytes_per_s"] / roof
            rows.append(row)
            best = min((row[n + "_s"] for n in BACKENDS if row[n + "_s"] != ""), default=None)
            print(f"batch {batch:3d} cache {cache_len:6d} splits {splits:3d}: flashlab {row['flashlab_s'] * 1e6:8.1f} us "
                  f"({row['flashlab_of_roofline'] * 100:5.1f}% of the copy rate)"
                  + "".join(f", {n} {row[n + '_s'] * 1e6:.1f} us" if row[n + "_s"] != "" else f", {n} n/a"
                            for n in BACKENDS)
                  + (f", best SDPA / flashlab {best / row['flashlab_s']:.2f}x" if best else "")
                  + f", err {row['max_abs_err']:.1e}", flush=True)
            del q, kc, vc, kf, vf
            torch.cuda.empty_cache()
    write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
