"""A CTA's fixed cost in flashlab's fa2 forward, measured: the time of the same grid (16 Q blocks of 128
rows x 2048 (batch, head) pairs = 32768 CTAs, non-causal, bf16) with n = 1, 2, 4, 8, 16 K/V tiles a CTA
(seqlen_k = n x Bc), fitted as t(n) = waves x (a + b n) with waves = CTAs / (2 CTAs an SM x SMs): a is
what a CTA costs its slot besides its tiles (its first loads, its epilogue, its launch), b a tile.
Prints JSON. Run on the GPU machine:
    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 simulator/validation/cta_fixed_cost.py
"""
import json

import torch
import triton.testing

import flashlab


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"device": torch.cuda.get_device_name(), "method": __doc__.split("\n\n")[0], "rows": [], "fits": {}}
    for d, bc in ((64, 128), (128, 64)):
        batch, heads, sq = 64, 32, 2048
        q = torch.randn(batch, sq, heads, d, device="cuda", dtype=torch.bfloat16)
        times = []
        for n in (1, 2, 4, 8, 16):
            k = torch.randn(batch, n * bc, heads, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            t = triton.testing.do_bench(lambda: flashlab.flash_attn_func(q, k, v), warmup=25, rep=200,
                                        return_mode="median") * 1e-3
            times.append((n, t))
            out["rows"].append({"hdim": d, "tiles_per_cta": n, "seconds": t})
        waves = batch * heads * (sq // 128) / (2 * sms)
        xs = [n for n, _ in times]
        ys = [t / waves for _, t in times]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = my - b * mx
        out["fits"][str(d)] = {"fixed_s_per_cta_slot": a, "tile_s_per_cta_slot": b, "waves": waves}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
