#!/usr/bin/env python3
"""Where a masked forward+backward spends its time, kernel by kernel: flashlab's fa2 (or fa3) run with and
without each of bench/mask_compare.py's masks, every kernel's device time from torch.profiler (CUPTI), and
each kernel's masked time over density x its unmasked time (bench/mask_compare.py's mask_vs_density, split
by kernel). A kernel whose work does not shrink with the mask (the backward's preprocess and dQ conversion)
shows 1 / density; the tile kernels show what skipping costs beyond the skipped tiles.

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/mask_kernel_split.py \\
        [--hdims 64,128] [--seqlens 8192,16384] [--masks document,prefix-lm] [--kernel fa2] [--out OUT.txt]

The shapes, masks and densities are mask_compare.py's (batch x seqlen = 16384, 16 heads, bf16, the forward
tile's density); each run is 3 warm-up calls, then 10 profiled ones, times per call in ms.
"""
import argparse
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mask_compare as mc  # noqa: E402
from kernel_times import device_times as kernel_times  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hdims", default="64,128")
    ap.add_argument("--seqlens", default="8192,16384")
    ap.add_argument("--masks", default="document,prefix-lm")
    ap.add_argument("--kernel", default="fa2", choices=["fa2", "fa3"])
    ap.add_argument("--out", help="also write the lines to this file")
    args = ap.parse_args()
    import torch
    from flashlab import _abi
    lib = _abi.lib()
    if not lib.flashlab_has_cuda():
        sys.exit(f"{lib.path} was built without CUDA: build where nvcc is installed, or set FLASHLAB_LIBRARY")
    cases_args = types.SimpleNamespace(masks=args.masks, docs=8, docs_per_seq=0, prefix_frac=0.25, seed=17)
    lines = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.kernel} forward+backward; "
             "ms per call (masked / (density x unmasked))"]
    print(lines[0], flush=True)
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            b, h = mc.TOKENS // s, 16
            q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            o, lse = torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)
            grads = [do] + [torch.empty_like(q) for _ in range(3)]
            br, bc = mc.forward_tile(args.kernel, d)
            plain = mc.Kernel(args.kernel, torch, q, k, v, o, lse, grads)
            base = kernel_times(torch, plain.forward_backward)
            plain.close()
            runs = [("no mask", 1.0, base)]
            for name, kind, value, causal, _ in mc.mask_cases(s, cases_args):
                begin, end = mc.intervals(kind, value, s, causal)
                masked = mc.Kernel(args.kernel, torch, q, k, v, o, lse, grads, mask=(kind, value), causal=causal)
                runs.append((name, mc.density(begin, end, br, bc), kernel_times(torch, masked.forward_backward)))
                masked.close()
            for name, rho, per in runs:
                total = sum(per.values()) / (rho * sum(base.values()))
                parts = "  ".join(f"{n} {t:.3f} ({t / (rho * base[n]):.2f})" if n in base else f"{n} {t:.3f}"
                                  for n, t in sorted(per.items()))
                lines.append(f"d={d} s={s} {name:9s} rho {rho:.3f} all {sum(per.values()):.3f} ({total:.2f}): {parts}")
                print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
