#!/usr/bin/env python3
"""The SM clock and board power while a kernel runs back to back: a bf16 matmul (the source of the presets'
wgmma fraction), SDPA's cuDNN attention forward and flashlab's fa3 forward. nvidia-smi samples clocks.sm, power.draw
and the clock-event reasons every 50 ms while each runs for a few seconds (bench/power_clocks.py's sampler, which
does the same for any cell of the anchors' sweep); the medians of the samples are reported with its achieved rate.

Why: the presets' exponential and FP32 rates were measured by short microbenchmarks at the 1.98 GHz maximum
clock, and the tensor rate by a long matmul, whose clock was not recorded; the fa3 timeline probe
(bench/fa3_fwd_timeline.py) read 1.49-1.76 GHz inside the attention kernel. Prints JSON. Run on the GPU
machine:

    PYTHONPATH=python FLASHLAB_LIBRARY=build/capi/libflashlab.so python3 simulator/validation/clock_under_load.py
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

SECONDS = 4.0


def sampled(torch, fn, work, what, fields):
    """Runs fn back to back for SECONDS while nvidia-smi samples (bench/power_clocks.py's sampler: the clock, the
    power and the clock-event reasons every 50 ms); returns the medians and the rate."""
    from power_clocks import sample_while
    call_s, samples = sample_while(fn, SECONDS, fields)
    clocks = sorted(c for c, _, _ in samples)
    power = sorted(p for _, p, _ in samples)
    reasons = 0
    for _, _, r in samples:
        reasons |= r
    return {"kernel": what, "call_s": call_s, "rate": work / call_s, "samples": len(samples),
            "sm_clock_mhz_median": clocks[len(clocks) // 2] if clocks else None,
            "sm_clock_mhz_min": clocks[0] if clocks else None, "sm_clock_mhz_max": clocks[-1] if clocks else None,
            "power_w_median": power[len(power) // 2] if power else None, "clock_event_reasons_any": hex(reasons)}


def main():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from power_clocks import query_fields
    fields = query_fields()
    dev = torch.cuda.get_device_name()
    rows = []
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    rows.append(sampled(torch, lambda: a @ b, 2.0 * n ** 3 / 1e12, "bf16 matmul 8192^3 (TFLOP/s)", fields))
    del a, b
    s, h, d = 16384, 16, 128
    q, k, v = (torch.randn(1, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4.0 * h * s * s * d / 1e12

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v)
    rows.append(sampled(torch, cudnn, flops, "SDPA cuDNN forward d = 128 s = 16k (TFLOP/s)", fields))
    try:
        import mask_compare as mc
        ql, kl, vl = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        o, lse = torch.empty_like(ql), torch.empty(1, h, s, device="cuda", dtype=torch.float32)
        kern = mc.Kernel("fa3", torch, ql, kl, vl, o, lse, [torch.empty_like(ql) for _ in range(4)])
        rows.append(sampled(torch, kern.forward, flops, "flashlab fa3 forward d = 128 s = 16k (TFLOP/s)", fields))
    except Exception as e:  # no library: report the others
        rows.append({"kernel": "flashlab fa3 forward", "skipped": str(e)})
    print(json.dumps({"device": dev, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                      "method": __doc__.split("\n\n")[0], "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
