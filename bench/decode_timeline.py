#!/usr/bin/env python3
"""Where a decode call's time goes: each split CTA's start, its Q and first block, its stream, its merge and
partials; the combine's release after the split kernel and its work; beside the call's time on the layers
clock. The mechanisms `flashlab estimate --decode --impl flashlab` charges, measured one by one.

Needs a build with bench/patches/decode-timeline.patch applied (a development probe, never in main: thread 0
of each split and combine CTA writes %globaltimer and %clock64 at its phases to device arrays, which one extra
C function reads):

    git apply bench/patches/decode-timeline.patch && cmake --build build --target flashlab_capi
    cp build/capi/libflashlab.so /tmp/probe.so && git checkout gpu/decode/decode.cu
    cmake --build build --target flashlab_capi
    PYTHONPATH=python python3 bench/decode_timeline.py /tmp/probe.so [--shapes 1x8192,8x1024]

Shapes as bench/decode_compare.py (q_len 1, 32 heads over 8 kv heads, d = 128, bf16, full contiguous caches).
Each shape's calls run over distinct caches (at least four L2s) back to back in a CUDA graph, replayed; the
stamps are the graph's last call's. Times in microseconds from the split kernel's first CTA start.
"""
import argparse
import ctypes
import os
import statistics
import sys

import numpy as np
import torch

import flashlab
from flashlab import _abi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_compare import caches_for, layers_s  # noqa: E402

CTAS, SPLIT_FIELDS, COMBINE_FIELDS = 4096, 10, 7  # the patch's arrays


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("probe_lib")
    ap.add_argument("--shapes", default="1x1024,1x8192,1x16384,1x65536,8x1024,8x8192,64x1024")
    args = ap.parse_args()
    try:
        shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    except ValueError:
        ap.error("--shapes is batch x cache_len, ... (integers)")
    if any(len(sh) != 2 or min(sh) < 1 for sh in shapes):
        ap.error("--shapes is batch x cache_len, ... (positive)")
    try:
        lib = _abi.load(args.probe_lib)
        dump = lib.flashlab_decode_probe_dump
    except _abi.FlashlabError as e:
        sys.exit(f"decode_timeline: {e}")
    except AttributeError:
        sys.exit(f"decode_timeline: {args.probe_lib} has no probe (build it with bench/patches/decode-timeline.patch)")
    _abi._lib = lib
    dump.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    split = np.zeros((CTAS, SPLIT_FIELDS), dtype=np.uint64)
    comb = np.zeros((CTAS, COMBINE_FIELDS), dtype=np.uint64)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{torch.cuda.get_device_name()}: times in us from the split kernel's first CTA start; "
          "p50 [p10, p90] over CTAs")
    for batch, cache_len in shapes:
        torch.manual_seed(0)
        cache_bytes = 2 * batch * cache_len * 8 * 128 * 2
        copies = max(2, -(-4 * l2 // cache_bytes))
        caches = [c[:3] for c in caches_for(batch, cache_len, 0, copies, 128)]  # (q, k, v), contiguous
        lens = torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")
        call_s, _ = layers_s([lambda c=c: flashlab.flash_attn_with_kvcache(*c, cache_seqlens=lens) for c in caches])
        splits = flashlab.flash_attn_with_kvcache.last_num_splits
        torch.cuda.synchronize()
        split[:] = 0
        comb[:] = 0
        if dump(split.ctypes.data, split.nbytes, comb.ctypes.data, comb.nbytes) != 0:
            sys.exit("decode_timeline: reading the probe failed (a build without the patch?)")
        n_split = batch * 8 * splits
        sp = split[:n_split].astype(np.int64)
        t0 = sp[:, 0].min()
        us = lambda x: (x - t0) / 1e3  # noqa: E731
        start, first, looped, end = us(sp[:, 0]), us(sp[:, 2]), us(sp[:, 4]), us(sp[:, 6])
        keys = sp[:, 9]
        stream_rate = keys * 128 * 2 * 2 / np.maximum((sp[:, 4] - sp[:, 2]) * 1e-9, 1e-9)
        def spread(x):
            return f"{pct(x, 50):.2f} [{pct(x, 10):.2f}, {pct(x, 90):.2f}]"
        line = (f"b{batch} x {cache_len} ({splits} splits, {n_split} CTAs): a call {call_s * 1e6:.1f} us | split CTAs: "
                f"start {spread(start)}, Q + first block {spread(first - start)}, "
                f"stream {pct(looped - first, 50):.2f} at {pct(stream_rate, 50) / 1e9:.0f} GB/s a CTA, "
                f"merge + partials {spread(end - looped)}, last end {end.max():.2f}")
        if splits > 1:
            rows = batch * 32
            cb = comb[:rows].astype(np.int64)
            c_in, c_rel, c_end = us(cb[:, 0]), us(cb[:, 2]), us(cb[:, 4])
            line += (f" | combine ({rows} CTAs): in {pct(c_in, 50):.2f}, released {c_rel.min():.2f}"
                     f" ({c_rel.min() - end.max():+.2f} after the split kernel's last CTA), "
                     f"merged {pct(c_end, 50):.2f}, last {c_end.max():.2f}")
        resolution = np.diff(np.unique(sp[:, [0, 2, 4, 6]].ravel()))
        line += f" | globaltimer step {resolution[resolution > 0].min() if resolution.size else 0} ns"
        print(line, flush=True)
        del caches
        torch.cuda.empty_cache()
    _abi._lib = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
