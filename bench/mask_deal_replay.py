#!/usr/bin/env python3
"""Why the order of a masked grid matters: a greedy replay of fa2's forward grid under mask_compare.py's
masks (CPU only; no GPU, no torch).

Each tile (Q block, batch x head pair) costs its walk, the K/V blocks its Q block computes (interval masks,
as tiled_cpu/block_mask.cpp counts them), plus `--fixed` blocks of per-CTA work; `--slots` CTAs run at once
(fa2's forward holds two CTAs an SM: 264 on an H100) and each free slot takes the next tile, which is how
the hardware deals a grid. Printed per mask and seqlen: the makespan over the ideal (total work / slots) of

  grid      fa2's grid order (Q block fastest, then head, then entry), what fa2 ran before v9
  deal      longest walk first in even sections (gpu/tile_order.hpp), as many as DeviceMask picks: pairs
            whose longest walk's K and V fit half of an L2 of --l2 bytes (the H100: 50 MiB) a section
  uneven    longest walk first in sections of as many pairs as fit their whole K and V, and a remainder
            (the first v9 build)

    python3 bench/mask_deal_replay.py [--hdim 128] [--slots 264] [--fixed 2]
"""
import argparse
import heapq
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mask_compare import document_lengths, intervals  # noqa: E402


def walks(begin, end, br, bc):
    out = []
    for r0 in range(0, len(begin), br):
        r1 = min(len(begin), r0 + br)
        out.append(max(0, -(-end[r1 - 1] // bc) - begin[r0] // bc))
    return out


def makespan(costs, slots):
    free = [0.0] * slots
    end = 0.0
    for c in costs:
        t = heapq.heappop(free) + c
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def deal(walk, pairs, sizes):
    order = sorted(range(len(walk)), key=lambda m: -walk[m])
    tiles = []
    for n in sizes:
        tiles += [m for m in order for _ in range(n)]
    return tiles


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--slots", type=int, default=264)
    ap.add_argument("--fixed", type=float, default=2.0, help="per-CTA work in K/V blocks")
    ap.add_argument("--l2", type=float, default=50 * 2**20, help="L2 bytes (the H100: 50 MiB)")
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    br, bc = 128, (64 if args.hdim == 128 else 128)  # `flashlab shapes --algo fa2`
    print(f"fa2 forward d = {args.hdim} ({br} x {bc} tiles), {args.slots} slots, {args.fixed} blocks a CTA fixed")
    print(f"{'mask':10s} {'s':>6s} {'pairs':>5s}  {'grid':>6s} {'deal':>6s} {'uneven':>6s}  sections (deal, uneven)")
    for s in (4096, 8192, 16384):
        pairs = 16 * (16384 // s)
        for kind in ("document", "prefix-lm"):
            value = document_lengths(s, 8 * s // 16384, args.seed + s) if kind == "document" else s // 4
            walk = walks(*intervals(kind, value, s), br, bc)
            cost = lambda m: walk[m] + args.fixed  # noqa: E731
            ideal = pairs * sum(cost(m) for m in range(len(walk))) / args.slots
            grid = [m for _ in range(pairs) for m in range(len(walk))]
            block = 2 * 2 * bc * args.hdim  # a K/V block's K and V, bf16
            fit = max(1, min(pairs, int(args.l2 / 2 / (max(walk) * block))))
            k = -(-pairs // fit)
            even = [pairs // k + (i < pairs % k) for i in range(k)]
            n = max(1, min(pairs, int(args.l2 / 2 / (s * 2 * 2 * args.hdim))))
            uneven = [n] * (pairs // n) + ([pairs % n] if pairs % n else [])
            row = [makespan([cost(m) for m in order], args.slots) / ideal
                   for order in (grid, deal(walk, pairs, even), deal(walk, pairs, uneven))]
            print(f"{kind:10s} {s:6d} {pairs:5d}  " + " ".join(f"{x:6.3f}" for x in row) + f"  {even}, {uneven}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
