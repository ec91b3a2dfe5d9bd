#!/usr/bin/env python3
"""What a masked backward's tiles cost, split: fa2's dK/dV kernel (dkdv_kernel; with --kernel fa3, fa3's
fa3_backward_kernel) under document masks, its device time fitted as (whole steps) x (a whole step's cost) + (K/V
blocks) x (a block's fixed cost: fa2's CTA, one of fa3's persistent CTA's tiles), the rest put on the partial steps
(tiles on a document's edge, element-masked).

Runs on the GPU machine. Batch 2 x 8192 tokens, 16 heads, bf16, head dim --hdim. Masks: block-aligned documents of
8192 (one document: every tile whole, through the mask kernel), 4096, 2048, 1024 and 512 tokens (no partial tiles:
their times fit the step and the CTA costs), then mask_compare.py's 8k documents (2060 1727 2224 2181) and
documents shifted by 64 keys ([64, 2048, 2048, 2048, 1984]), whose partial steps take the rest. Each kernel's time
is torch.profiler's (kernel_times.device_times, 20 calls after 3 warm-up ones); the step counts are the dK/dV
kernel's tiles (Bc keys x Br queries, shapes as `flashlab shapes --pass bwd`) counted by mask_compare.document_tiles.

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/mask_step_costs.py \\
        [--kernel fa2|fa3] [--hdim 64] [--other OTHER.so] [--out OUT.txt]

With --other a second build is timed after the first on the same tensors (an A/B in one process), and its dK and
dV are compared with the first's (the same tiles and sums: equal bit for bit unless the change means otherwise).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mask_compare as mc  # noqa: E402
from kernel_times import device_times  # noqa: E402

S, BATCH, HEADS = 8192, 2, 16
ALIGNED = [8192, 4096, 2048, 1024, 512]
UNEVEN = [("documents", [2060, 1727, 2224, 2181]), ("shifted 64", [64, 2048, 2048, 2048, 1984])]


def fit(points):
    """Least squares t = a x + c over (x, t) points."""
    n = len(points)
    mx, mt = sum(x for x, _ in points) / n, sum(t for _, t in points) / n
    a = sum((x - mx) * (t - mt) for x, t in points) / sum((x - mx) ** 2 for x, _ in points)
    return a, mt - a * mx


KERNEL_NAME = {"fa2": "dkdv_kernel", "fa3": "fa3_backward_kernel"}


def measure(torch, lib, kernel, tensors, br, bc, say):
    q, k, v, o, lse, grads = tensors
    name_of = KERNEL_NAME[kernel]
    plain = mc.Kernel(kernel, torch, q, k, v, o, lse, grads, lib=lib)
    t0 = device_times(torch, plain.forward_backward, 20)[name_of] * 1e3
    plain.close()
    ctas = (S // bc) * HEADS * BATCH
    total = (S // br) * (S // bc)
    rows, grads_of = [], {}
    for name, docs in [(f"aligned {n}", [n] * (S // n)) for n in ALIGNED] + UNEVEN:
        kern = mc.Kernel(kernel, torch, q, k, v, o, lse, grads, mask=("document", docs), lib=lib)
        t = device_times(torch, kern.forward_backward, 20)[name_of] * 1e3
        grads_of[name] = [g.clone() for g in grads[2:]]  # dK, dV
        kern.close()
        whole, partial = mc.document_tiles(docs, br, bc)
        rows.append((name, whole, partial, t))
    step, cta_total = fit([(w * HEADS * BATCH, t) for name, w, p, t in rows if name.startswith("aligned")])
    say(f"unmasked {t0:8.1f} us  | aligned documents fit: a whole step {step * 1e3:.2f} ns of the kernel "
        f"({step * 1e3 * torch.cuda.get_device_properties(0).multi_processor_count / 1e3:.2f} us on its SM), "
        f"a K/V block's fixed cost {cta_total / ctas * 1e3:.1f} ns ({ctas} blocks: {cta_total:.0f} us)")
    for name, whole, partial, t in rows:
        steps = whole + partial
        rho = steps / total
        line = (f"  {name:12s} steps/head {steps:5d} (partial {partial:4d})  rho {rho:.3f}  dkdv {t:8.1f} us  "
                f"/ (rho x unmasked) {t / (rho * t0):.3f}")
        if partial:
            extra = (t - step * whole * HEADS * BATCH - cta_total) / (partial * HEADS * BATCH)
            line += f"  | a partial step {extra / step:.2f}x a whole one"
        say(line)
    return grads_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", default="fa2", choices=["fa2", "fa3"], help="flashlab's backward")
    ap.add_argument("--hdim", type=int, default=64, choices=[64, 128, 256])
    ap.add_argument("--other", help="a second build of the library, timed after the first (an A/B)")
    ap.add_argument("--out", help="also write the lines to this file")
    args = ap.parse_args()
    import torch
    from flashlab import _abi
    try:
        libs = [_abi.lib()] + ([_abi.load(args.other)] if args.other else [])
    except _abi.FlashlabError as e:
        sys.exit(f"mask_step_costs.py: {e}")
    if not libs[0].flashlab_has_cuda():
        sys.exit(f"{libs[0].path} was built without CUDA: build where nvcc is installed, or set FLASHLAB_LIBRARY")
    br, bc = mc.forward_tile(args.kernel, args.hdim, "bwd")  # dK/dV's Br queries x Bc keys
    lines = []

    def say(text):
        lines.append(text)
        print(text, flush=True)

    say(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.kernel} {KERNEL_NAME[args.kernel]}, "
        f"bf16 d = {args.hdim}, "
        f"batch {BATCH} x {S}, {HEADS} heads, tiles {bc} keys x {br} queries")
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(BATCH, S, HEADS, args.hdim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(4))
    o, lse = torch.empty_like(q), torch.empty(BATCH, HEADS, S, device="cuda", dtype=torch.float32)
    tensors = (q, k, v, o, lse, [do] + [torch.empty_like(q) for _ in range(3)])
    first = None
    for which, lib in zip(["library", "other"], libs):
        say(f"-- {which}: {getattr(lib, 'path', lib)}")
        try:
            got = measure(torch, lib, args.kernel, tensors, br, bc, say)
        except RuntimeError as e:  # the kernel refused the problem (fa3 off Hopper, say): nothing is written
            sys.exit(f"mask_step_costs.py: {e}")
        if first is None:
            first = got
        else:
            same = all(torch.equal(a, b) for name in got for a, b in zip(first[name], got[name]))
            say(f"dK and dV {'bit for bit the same' if same else 'DIFFER'} in both builds, every mask")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
