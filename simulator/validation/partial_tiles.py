#!/usr/bin/env python3
"""What a partial tile (one on a mask's edge, element-masked) costs against a full one, in flashlab's fa2 forward
(or, with --pass bwd, its backward: the forward+backward time less the forward's, at the dK/dV kernel's tiles).

Runs on the GPU machine. Times fa2's forward (its mask instantiation) with document masks of 4096 and 2048 tokens
over 16k tokens x 16 heads, aligned to the tiles, and shifted by 64 keys so that each Q block's walk gains a
partial tile at both ends; counts both masks' full and partial tiles at the kernel's tiles (Br 128; Bc 128 at
d = 64, 64 at d = 128), and solves time(shifted) / time(aligned) for the partial tile's cost in full tiles.
Both in one process, each timed twice (the least kept).

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 simulator/validation/partial_tiles.py \
        [--pass bwd]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch  # noqa: E402
from mask_compare import Kernel, Timer, document_tiles as tiles, forward_tile  # noqa: E402
timer = Timer(torch)

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--pass", dest="pas", default="fwd", choices=["fwd", "bwd"])
backward = ap.parse_args().pas == "bwd"
time = (lambda k: timer.median_ms(k.forward_backward) - timer.median_ms(k.forward)) if backward else \
    (lambda k: timer.median_ms(k.forward))
s, b, h = 16384, 1, 16
for d in (64, 128):
    br, bc = forward_tile("fa2", d, "bwd" if backward else "fwd")  # the forward's tiles, or dK/dV's
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    o = torch.empty_like(q); lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    grads = [do, torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)]
    plain = Kernel("fa2", torch, q, k, v, o, lse, grads)
    t_plain = time(plain)
    plain.close()
    for L in (4096, 2048):
        aligned = [L] * (s // L)
        shifted = [64] + [L] * (s // L - 1) + [L - 64]
        t = {}
        for name, docs in (("aligned", aligned), ("shifted", shifted)) * 2:
            kern = Kernel("fa2", torch, q, k, v, o, lse, grads, mask=("document", docs))
            t.setdefault(name, []).append(time(kern))
            kern.close()
        fa, pa = tiles(aligned, br, bc)
        fs, ps = tiles(shifted, br, bc)
        ta, ts = min(t["aligned"]), min(t["shifted"])
        # time a tile if partial tiles cost (1 + x) full ones: ts/ta = (fs + ps (1 + x)) / (fa + pa (1 + x))
        x = (ts / ta * (fa + pa) - (fs + ps)) / (ps - ts / ta * pa) if ps else float("nan")
        print(f"{'bwd' if backward else 'fwd'} d={d} docs {L}: aligned {fa} full + {pa} partial tiles a head, {t['aligned']} ms; shifted {fs} + {ps}, "
              f"{t['shifted']} ms; a partial tile costs {1 + x:.2f}x a full one; aligned against density x unmasked "
              f"({t_plain:.3f} ms): {ta / (L / s * t_plain):.2f}", flush=True)
