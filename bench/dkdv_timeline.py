#!/usr/bin/env python3
"""Where a CTA of fa2's dK/dV kernel spends its time, per mask: its row search, its first loads, its steps,
its epilogue, and the gap before the next CTA on its SM.

Needs a build with bench/patches/dkdv-timeline.patch applied (a development probe, never in main: each CTA
writes %globaltimer stamps and its %smid to a device array that two extra C functions read and clear):

    git apply bench/patches/dkdv-timeline.patch && cmake --build build --target flashlab_capi
    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/dkdv_timeline.py \\
        --hdim 64 --seqlen 8192 nomask aligned2048 random
    git checkout gpu/fa2_bwd.cu

Cases: nomask (the unmasked kernel), alignedN (documents of N tokens, N dividing the seqlen: no partial
tiles), random (mask_compare.py's uneven documents, 8 per 16384 tokens). batch x seqlen = 16384, 16 heads,
bf16. A run of forward + backward is timed once after five warm ones; the table gives means over CTAs.
Results: bench/results/dkdv-timeline-*.txt.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SLOTS = 8192  # CTAs the probe records (the patch's array)


def mask_of(case, s):
    import mask_compare as mc
    if case == "nomask":
        return None
    if case == "random":
        return ("document", mc.document_lengths(s, max(1, round(8 * s / 16384)), 1 + s))
    if case.startswith("aligned") and case[7:].isdigit() and int(case[7:]) > 0 and s % int(case[7:]) == 0:
        n = int(case[7:])
        return ("document", [n] * (s // n))
    sys.exit(f"dkdv_timeline.py: unknown case '{case}' (nomask, random, or alignedN with N dividing {s})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="+", help="nomask, random, alignedN")
    ap.add_argument("--hdim", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=8192)
    args = ap.parse_args()
    if args.seqlen <= 0 or 16384 % args.seqlen:
        sys.exit("dkdv_timeline.py: --seqlen must divide 16384 (batch x seqlen = 16384)")
    import numpy as np
    import torch
    import mask_compare as mc
    from flashlab import _abi
    lib = _abi.lib()
    if not hasattr(lib, "flashlab_dkdv_probe_dump"):
        sys.exit("dkdv_timeline.py: this library has no probe; build it with bench/patches/dkdv-timeline.patch")
    d, s = args.hdim, args.seqlen
    b, h = 16384 // s, 16
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    o, lse = torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    grads = [do] + [torch.empty_like(q) for _ in range(3)]
    print(f"{torch.cuda.get_device_name()}: fa2 dK/dV per CTA, d = {d}, batch {b} x seqlen {s}, {h} heads (us)")
    print(f"{'case':12s} {'CTAs':>5s} {'steps':>7s} {'kernel':>8s} {'search':>7s} {'to step 0':>9s} "
          f"{'loop':>8s} {'a step':>7s} {'epilogue':>8s} {'gap':>5s}")
    for case in args.cases:
        kern = mc.Kernel("fa2", torch, q, k, v, o, lse, grads, mask=mask_of(case, s))
        for _ in range(5):
            kern.forward_backward()
        torch.cuda.synchronize()
        lib.flashlab_dkdv_probe_clear()
        kern.forward_backward()
        torch.cuda.synchronize()
        buf = np.zeros(SLOTS * 8, np.uint64)
        if lib.flashlab_dkdv_probe_dump(buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(buf.nbytes)) != 0:
            sys.exit("dkdv_timeline.py: reading the probe failed")
        kern.close()
        r = buf.reshape(-1, 8).astype(np.int64)
        r = r[r[:, 0] > 0]
        if len(r) == 0:
            sys.exit(f"dkdv_timeline.py: {case}: no CTA recorded")
        t = r[:, :5] - r[:, 0].min()
        sm, steps = r[:, 5], r[:, 6]
        gaps = []
        for m in np.unique(sm):
            at = np.flatnonzero(sm == m)
            at = at[np.argsort(t[at, 0])]
            gaps += list(t[at[1:], 0] - t[at[:-1], 4])
        us = lambda x: float(np.mean(x)) / 1e3
        walked = steps > 0
        step_us = (t[walked, 3] - t[walked, 2]).sum() / max(1, steps[walked].sum()) / 1e3
        print(f"{case:12s} {len(r):5d} {int(steps.sum()):7d} {t[:, 4].max() / 1e3:8.1f} {us(t[:, 1] - t[:, 0]):7.2f} "
              f"{us(t[:, 2] - t[:, 0]):9.2f} {us(t[:, 3] - t[:, 2]):8.2f} {step_us:7.3f} {us(t[:, 4] - t[:, 3]):8.2f} "
              f"{us(gaps) if gaps else 0.0:5.2f}")


if __name__ == "__main__":
    main()
