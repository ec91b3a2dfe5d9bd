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

Three clocks, every implementation on each (columns `<impl>_s`, `<impl>_cold_s`, `<impl>_layers_s`):
  do_bench  triton.testing.do_bench's median. Its L2 flush *writes* 256 MB (zero_), so the call it times
            starts with up to an L2 of dirty lines, and every line its reads evict is written back to
            HBM first: a cache smaller than the L2 pays about its own size again in writes.
  cold      one call after a read of 256 MB (the L2 full of clean lines: its reads evict for free),
            events around the call, median of 100: a cold cache, the launch and the events included.
  layers    the call over `copies` distinct caches back to back (as a model's layers read theirs, each
            cold: the copies together are at least four L2s), captured in a CUDA graph and replayed,
            the time a call: what a decode step pays per layer, launch gaps included, no flush. Timed
            last, every implementation in three rounds whose order rotates, the median (layers_rounds).
"""
import argparse
import csv
import datetime
import os
import statistics
import sys
import warnings

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashlab

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rounds import rotating  # noqa: E402

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


_clean_flush = []  # the 256 MB the cold clock reads before each call, made at its first use


def cold_s(fn, reps=100):
    """Median of one call's time after the L2 was filled with clean lines (a 256 MB read)."""
    if not _clean_flush:
        _clean_flush.append(torch.ones((256 << 20) // 4, dtype=torch.float32, device="cuda"))
    flush = _clean_flush[0]
    fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        flush.sum()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2] * 1e-3


def layers_s(fns, replays=20):
    """The time a call of fns (one a distinct cache), run back to back in a CUDA graph, replayed; the
    graph's clock (`graph`), or a plain loop where capture fails (`loop`)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in fns:  # warm: allocations and plans made outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for fn in fns:
                fn()
        run, how = graph.replay, "graph"
    except Exception:  # noqa: BLE001 (a backend or flashlab's call that cannot be captured: timed as a loop)
        torch.cuda.synchronize()

        def run():
            for fn in fns:
                fn()
        how = "loop"
    run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(5):
        start.record()
        for _ in range(replays):
            run()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / (replays * len(fns)))
    return sorted(samples)[len(samples) // 2], how


def layers_rounds(fns_by_name, rounds=3):
    """layers_s of each implementation (name -> its calls) in `rounds` rounds, each round starting one name later,
    the median of each: so that no implementation is always the one timed right after the shape before (a full
    sweep timed batch 64 x 1k 0.89-0.92x the best SDPA backend with flashlab always first, 1.00x alone:
    bench/results/decode-h200-2026-11-29-v8-b64x1k-probe.txt). Returns name -> (seconds, how)."""
    samples = {n: [] for n in fns_by_name}
    how = {}
    for n in rotating(fns_by_name, rounds):
        t, how[n] = layers_s(fns_by_name[n])
        samples[n].append(t)
    return {n: (statistics.median(samples[n]), how[n]) for n in samples}


def copy_rate():
    """A 2 GiB device-to-device copy's bandwidth: (bytes read + bytes written) per second."""
    src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = median_s(lambda: dst.copy_(src))
    return 2 * src.numel() / t


def paged_like(kc, vc, page_size):
    """The same keys and values in pages of `page_size` through a shuffled block table: (table, k_pages, v_pages)."""
    batch, cache_len, hk, d = kc.shape
    pages = cache_len // page_size
    table = torch.randperm(batch * pages, device="cuda", dtype=torch.int32).reshape(batch, pages)
    kf = torch.empty(batch * pages, page_size, hk, d, device="cuda", dtype=kc.dtype)
    vf = torch.empty_like(kf)
    kf[table.flatten().long()] = kc.reshape(batch * pages, page_size, hk, d)
    vf[table.flatten().long()] = vc.reshape(batch * pages, page_size, hk, d)
    return table, kf, vf


def caches_for(batch, cache_len, paged, copies, d, heads=32, kv_heads=8):
    """`copies` distinct (q, k, v, block_table, k_sdpa, v_sdpa) of one shape, bf16; the same keys paged (pages of
    `paged`) or not (0)."""
    out = []
    for _ in range(copies):
        q = torch.randn(batch, 1, heads, d, device="cuda", dtype=torch.bfloat16)
        kc = torch.randn(batch, cache_len, kv_heads, d, device="cuda", dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        if not paged:
            out.append((q, kc, vc, None, kc, vc))
            continue
        table, kf, vf = paged_like(kc, vc, paged)
        out.append((q, kf, vf, table, kc, vc))
    return out


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
    ap.add_argument("--max-layers-bytes", type=float, default=24e9,
                    help="the layers clock's copies together at most this (else its columns are empty)")
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    roof = copy_rate()
    one = torch.zeros(1, device="cuda")
    floor = median_s(lambda: one.add_(1))
    floor_cold = cold_s(lambda: one.add_(1))
    print(f"{dev}: a copy moves {roof / 1e12:.2f} TB/s; one kernel's launch, timed by do_bench {floor * 1e6:.1f} us, "
          f"cold {floor_cold * 1e6:.1f} us", flush=True)
    print("each clock: flashlab's time, its cache bytes a second over the copy rate, the best SDPA backend's time "
          "over flashlab's\n" + " " * 37 + "| do_bench                | cold                    | layers", flush=True)
    rows = []
    for batch in map(int, args.batches.split(",")):
        for cache_len in map(int, args.cache_lens.split(",")):
            hq, hk, d = args.heads, args.kv_heads, args.hdim
            if 2 * batch * cache_len * hk * d * 2 > args.max_cache_bytes:
                continue
            torch.manual_seed(0)
            # kf, vf: what flashlab reads (the same keys, paged through a shuffled block table where --paged)
            q, kf, vf, table, kc, vc = caches_for(batch, cache_len, args.paged, 1, d, hq, hk)[0]
            lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
            kw = {"block_table": table} if args.paged else {}
            ours = flashlab.flash_attn_with_kvcache(q, kf, vf, cache_seqlens=lens, **kw)
            splits = flashlab.flash_attn_with_kvcache.last_num_splits
            row = {"device": dev, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                   "batch": batch, "cache_len": cache_len, "page_size": args.paged, "heads_q": hq, "heads_kv": hk, "hdim": d,
                   "num_splits": splits, "cache_bytes": 2 * kc.numel() * kc.element_size(),
                   "copy_bytes_per_s": roof, "one_launch_s": floor, "one_launch_cold_s": floor_cold}
            # The layers clock's distinct caches: enough copies that together they are four L2s (two at least).
            l2 = torch.cuda.get_device_properties(0).L2_cache_size
            copies = max(2, -(-4 * l2 // row["cache_bytes"]))
            held = copies * row["cache_bytes"] * (2 if args.paged else 1)
            layers = held <= args.max_layers_bytes
            row["layer_copies"] = copies if layers else 0
            caches = [(kf, vf, kc, vc)]
            for _ in range(copies - 1 if layers else 0):
                kc2, vc2 = kc.clone(), vc.clone()
                caches.append((kf.clone(), vf.clone(), kc2, vc2) if args.paged else (kc2, vc2, kc2, vc2))

            def ours_on(c):
                return lambda: flashlab.flash_attn_with_kvcache(q, c[0], c[1], cache_seqlens=lens, **kw)

            def sdpa_on(c):
                kt_, vt_ = c[2].transpose(1, 2), c[3].transpose(1, 2)
                return lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kt_, vt_, enable_gqa=True)

            def in_backend(backend, fn):  # a call that picks its backend itself (the layers graph is captured later)
                def call():
                    with sdpa_kernel(backend):
                        return fn()
                return call

            layer_fns = {}  # the layers clock's calls, timed at the end in rotating rounds (layers_rounds)

            def clocks(name, on):
                row[name + "_s"] = median_s(on(caches[0]))
                row[name + "_cold_s"] = cold_s(on(caches[0]))
                row[name + "_layers_s"], row[name + "_layers_how"] = "", ""

            clocks("flashlab", ours_on)
            if layers:
                layer_fns["flashlab"] = [ours_on(c) for c in caches]
            qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
            n = min(batch, 2)
            ref = F.scaled_dot_product_attention(qt[:n].double(), kt[:n].double(), vt[:n].double(), enable_gqa=True)
            row["max_abs_err"] = (ours[:n].transpose(1, 2).double() - ref).abs().max().item()
            del ref
            for name, backend in BACKENDS.items():
                try:
                    with sdpa_kernel(backend):
                        F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                        clocks(name, sdpa_on)
                    if layers:
                        layer_fns[name] = [in_backend(backend, sdpa_on(c)) for c in caches]
                except RuntimeError:
                    for suffix in ("_s", "_cold_s", "_layers_s", "_layers_how"):
                        row[name + suffix] = ""
            for name, (t, how) in layers_rounds(layer_fns).items():
                row[name + "_layers_s"], row[name + "_layers_how"] = t, how
            for clock in ("", "_cold", "_layers"):
                t = row["flashlab" + clock + "_s"]
                row["flashlab" + clock + "_of_roofline"] = row["cache_bytes"] / t / roof if t != "" else ""
                best = min((row[b + clock + "_s"] for b in BACKENDS if row[b + clock + "_s"] != ""), default="")
                row["best_sdpa_over_flashlab" + clock] = best / t if best != "" and t != "" else ""
            row["flashlab_bytes_per_s"] = row["cache_bytes"] / row["flashlab_s"]
            rows.append(row)

            def cell(clock):
                t = row["flashlab" + clock + "_s"]
                if t == "":
                    return "        n/a"
                return (f"{t * 1e6:7.1f} us {row['flashlab' + clock + '_of_roofline'] * 100:5.1f}% "
                        f"{row['best_sdpa_over_flashlab' + clock] or float('nan'):5.2f}x")
            print(f"batch {batch:3d} cache {cache_len:6d} splits {splits:3d} | " + " | ".join(cell(c) for c in ("", "_cold", "_layers"))
                  + f" | err {row['max_abs_err']:.1e}", flush=True)
            del caches
            del q, kc, vc, kf, vf
            torch.cuda.empty_cache()
    write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
