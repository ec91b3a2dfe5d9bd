#!/usr/bin/env python3
"""Where fa3's forward spends a tile: each consumer warpgroup's wait for its tile and its Q, its first block,
its loop over the others (and within it the waits for K, V, its turn and its GEMMs, and the softmax), its last
P V and its epilogue; the producer's waits; the SM's clock while the kernel runs.

Needs a build with bench/patches/fa3-fwd-timeline.patch applied (a development probe, never in main: each
role's leading thread writes %clock64 stamps a tile, and %globaltimer beside %clock64 at its start and end,
to device arrays that two extra C functions read and clear):

    git apply bench/patches/fa3-fwd-timeline.patch && cmake --build build --target flashlab_capi
    cp build/capi/libflashlab.so /tmp/probe.so && git checkout gpu/fa3 && rm gpu/fa3/probe.cuh
    cmake --build build --target flashlab_capi
    python3 bench/fa3_fwd_timeline.py /tmp/probe.so --base build/capi/libflashlab.so --hdim 128 \\
        --seqlens 1024,16384 [--causal]

batch x seqlen = 16384, heads x d = 2048 (the anchors' sweep), bf16. Each case runs five warm launches,
then one recorded; --base times the unprobed build's forward in the same process (the probe's cost).
Times are in microseconds at each CTA's own measured clock. Results: bench/results/fa3-fwd-timeline-*.txt.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CTAS, ROLES, TILES, FIELDS = 160, 4, 64, 16  # probe.cuh's arrays


def median_time_us(torch, fn, reps=50):
    for _ in range(5):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for a, b in zip(start, end):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1e3 for a, b in zip(start, end))
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("probe", help="libflashlab.so built with the probe")
    ap.add_argument("--base", help="an unprobed libflashlab.so, timed beside it")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlens", default="1024,16384")
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import torch
    import mask_compare as mc
    from flashlab import _abi
    probe = _abi.load(args.probe)
    if not hasattr(probe, "flashlab_fa3_probe_dump"):
        sys.exit("fa3_fwd_timeline.py: this library has no probe; build it with bench/patches/fa3-fwd-timeline.patch")
    base = _abi.load(args.base) if args.base else None
    d = args.hdim
    print(f"{torch.cuda.get_device_name()}: fa3 forward per tile, d = {d}, heads {2048 // d}, "
          f"{'causal' if args.causal else 'no mask'}, bf16 (us; means over tiles, every consumer warpgroup)")
    for s in (int(x) for x in args.seqlens.split(",")):
        if s <= 0 or 16384 % s:
            sys.exit("fa3_fwd_timeline.py: each seqlen must divide 16384 (batch x seqlen = 16384)")
        b, h = 16384 // s, 2048 // d
        gen = torch.Generator(device="cuda").manual_seed(1)
        q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
        o, lse = torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        grads = [do] + [torch.empty_like(q) for _ in range(3)]
        kern = mc.Kernel("fa3", torch, q, k, v, o, lse, grads, causal=args.causal, lib=probe)
        t_probe = median_time_us(torch, kern.forward)
        t_base = None
        if base is not None:
            kb = mc.Kernel("fa3", torch, q, k, v, o, lse, grads, causal=args.causal, lib=base)
            t_base = median_time_us(torch, kb.forward)
            t_probe = median_time_us(torch, kern.forward)  # again, after the base: both orders' mean below
        if probe.flashlab_fa3_probe_clear() != 0:
            sys.exit("fa3_fwd_timeline.py: clearing the probe failed")
        kern.forward()
        torch.cuda.synchronize()
        tiles = np.zeros(CTAS * ROLES * TILES * FIELDS, np.uint64)
        ctas = np.zeros(CTAS * FIELDS, np.uint64)
        rc = probe.flashlab_fa3_probe_dump(tiles.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(tiles.nbytes),
                                          ctas.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(ctas.nbytes))
        if rc != 0:
            sys.exit("fa3_fwd_timeline.py: reading the probe failed")
        report(np, s, d, tiles.reshape(CTAS, ROLES, TILES, FIELDS).astype(np.int64),
               ctas.reshape(CTAS, FIELDS).astype(np.int64), t_probe, t_base)


def report(np, s, d, tiles, ctas, t_probe, t_base):
    live = ctas[:, 0] > 0
    n_cta = int(live.sum())
    # The SM clock of each CTA: its consumers' span in %globaltimer ns over the same span in %clock64 cycles.
    ghz = np.zeros(CTAS)
    for c in np.flatnonzero(live):
        ends = [(ctas[c, f], ctas[c, f + 1]) for f in (2, 4, 6) if ctas[c, f] > 0]
        end_ns, end_clk = max(ends)
        ghz[c] = (end_clk - ctas[c, 1]) / max(1, end_ns - ctas[c, 0])
    span_us = (max(ctas[live, f].max() for f in (2, 4, 6)) - ctas[live, 0].min()) / 1e3
    us = lambda cyc, c: cyc / ghz[c] / 1e3
    rows = []  # one a consumer tile: [n, tile wait, q wait, first, loop, last pv, epilogue, gap, k, v, turn, g1, g0, sm,
    #                                 the epilogue's setup, its first row's stores, its second's]
    for c in np.flatnonzero(live):
        for wg in range(ROLES - 1):  # consumer warpgroups 0 .. 2 (three at d = 64), those that recorded tiles
            t = tiles[c, wg]
            done = [kk for kk in range(TILES) if t[kk, 6] > 0]
            for kk in done:
                r = t[kk].copy()
                n = int(r[7] & 0xFFFFF)
                for f in range(1, 6):  # stamps a warpgroup with no block of its own never took: no time there
                    r[f] = r[f] or r[f - 1]
                nxt = t[kk + 1, 0] if kk + 1 < TILES and t[kk + 1, 0] > 0 else r[6]
                rows.append([n] + [us(x, c) for x in (r[1] - r[0], r[2] - r[1], r[3] - r[2], r[4] - r[3], r[5] - r[4],
                                                       r[6] - r[5], nxt - r[6], r[8], r[9], r[10], r[11], r[12], r[13],
                                                       r[14] - r[5] if r[14] else 0, r[15] - r[14] if r[15] else 0,
                                                       r[6] - r[15] if r[15] else 0)])
    a = np.array(rows)
    n = a[:, 0]
    # The loop's and the beyond-the-loop figures over the warpgroup tiles that walk blocks of their own: a
    # warpgroup with none (v23: rows before a ragged tile's sequence) only passes its turns, and its waits for
    # them would read as the loop's.
    walking = n >= 1
    steps = np.maximum(n[walking] - 1, 0)
    loop_per_block = a[walking, 4].sum() / max(1, steps.sum())
    w = a[walking]
    prod = tiles[live, 3]
    prod = prod[prod[:, :, 4] > 0]
    pc = np.repeat(np.flatnonzero(live), [int((tiles[c, 3, :, 4] > 0).sum()) for c in np.flatnonzero(live)])
    q_wait_p = np.mean([(r[2] - r[1]) / ghz[c] / 1e3 for r, c in zip(prod, pc)]) if len(prod) else 0.0
    base = f", unprobed {t_base:.1f} us (probe/unprobed {t_probe / t_base:.3f})" if t_base else ""
    print(f"\ns = {s}: {n_cta} CTAs, {len(a)} warpgroup tiles, {n.mean():.1f} blocks a tile; kernel {t_probe:.1f} us "
          f"(median of 50){base}; recorded span {span_us:.1f} us; SM clock {ghz[live].mean():.3f} GHz "
          f"({ghz[live].min():.3f}-{ghz[live].max():.3f})")
    print(f"  a tile: {a[:, 1:8].sum(axis=1).mean():7.2f}   tile wait {a[:, 1].mean():6.2f}   Q wait {a[:, 2].mean():6.2f}   "
          f"first block {a[:, 3].mean():6.2f}   loop {a[:, 4].mean():8.2f}   last P V {a[:, 5].mean():6.2f}   "
          f"epilogue {a[:, 6].mean():6.2f}   gap {a[:, 7].mean():6.2f}")
    per = lambda col: w[:, col].sum() / max(1, steps.sum())  # noqa: E731 (a loop block's share)
    print(f"  a loop block (warpgroups walking blocks of their own): {loop_per_block:6.3f}   of it waiting for K "
          f"{per(8):6.3f}, V {per(9):6.3f}, the turn {per(10):6.3f}, S {per(11):6.3f}, P V {per(12):6.3f}; "
          f"the softmax {per(13):6.3f}")
    for own in sorted(set(n.astype(int))):  # v23: a warpgroup walks its own rows' blocks
        sel = n == own
        print(f"  walking {own:3d} blocks: {int(sel.sum()):5d} warpgroup tiles, a tile {a[sel, 1:8].sum(axis=1).mean():7.2f}"
              f" (tile wait {a[sel, 1].mean():6.2f}, Q wait {a[sel, 2].mean():6.2f}, epilogue {a[sel, 6].mean():6.2f},"
              f" gap {a[sel, 7].mean():6.2f})")
    over = w[:, 1:8].sum(axis=1) - steps * loop_per_block
    if (a[:, 15] > 0).any():  # a probe that stamps inside the epilogue (fields 14 and 15)
        print(f"  the epilogue: setup {a[:, 14].mean():6.2f}, first row's O and LSE {a[:, 15].mean():6.2f}, "
              f"second row's {a[:, 16].mean():6.2f}")
    print(f"  a walking tile beyond its loop blocks at the loop's rate: {over.mean():6.2f} us "
          f"({over.mean() / loop_per_block:4.2f} blocks); "
          f"producer's wait for the consumers' Q release {q_wait_p:6.2f}")


if __name__ == "__main__":
    main()
