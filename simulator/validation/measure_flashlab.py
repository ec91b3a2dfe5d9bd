#!/usr/bin/env python3
"""Measure flashlab's own fa2 (or fa3) kernels on a real GPU, in the same rows as measure_sdpa.py.

The same sweep (bf16, batch * seqlen = 16384 tokens, heads * head_dim = 2048, forward), the same
two measurements (CUDA events through triton.testing.do_bench; ncu's dram__bytes_read.sum,
dram__bytes_write.sum, lts__t_bytes.sum and gpu__time_duration.sum with caches flushed), the
kernel called through flashlab's C ABI (libflashlab_gpu_c.so) on PyTorch tensors. Backend name in
the CSV: flashlab_fa2 (flashlab_fa3 with --kernel fa3, on an H100/H200). With --pass bwd the call is the
backward alone (every kernel it launches: preprocess, dK/dV, dQ's conversion), after one forward that
made its O and LSE; rows say pass bwd (fa3's backward: head dims up to 128).

Usage (on the GPU machine): python3 measure_flashlab.py LIB.so OUT.csv [--quick] [--kernel fa2|fa3] [--pass fwd|bwd]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "bench")]
from fa2_abi import Fa2, load  # noqa: E402
from measure_sdpa import HDIMS, SEQLENS, profile_with_ncu, run_marked, time_calls, write_rows  # noqa: E402


def configs(quick):
    for d in HDIMS:
        if pass_name() == "bwd" and kernel_name() == "fa3" and d > 128:
            continue
        for s in (SEQLENS[:2] if quick else SEQLENS):
            for causal in (False, True):
                yield s, d, causal


def kernel_name():
    return sys.argv[sys.argv.index("--kernel") + 1] if "--kernel" in sys.argv else "fa2"


def pass_name():
    return sys.argv[sys.argv.index("--pass") + 1] if "--pass" in sys.argv else "fwd"


def make_call(torch, lib, s, d, causal):
    batch, heads = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
    q, k, v = (torch.randn(batch, s, heads, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(batch, heads, s, device="cuda", dtype=torch.float32)
    if pass_name() == "fwd":
        return Fa2(torch, lib, q, k, v, o, lse, causal, kernel=kernel_name().encode()).forward, batch, heads
    do, dq, dk, dv = (torch.randn_like(q) for _ in range(4))
    f = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do, dq, dk, dv), kernel=kernel_name().encode())
    f.forward()
    return f.backward, batch, heads


def profile_worker(lib_path, quick):
    import torch
    lib = load(lib_path)
    run_marked(torch, [make_call(torch, lib, *c)[0] for c in configs(quick)])


def main():
    if sys.argv[1] == "profile-worker":
        profile_worker(sys.argv[2], "--quick" in sys.argv)
        return
    lib_path, out, quick = os.path.abspath(sys.argv[1]), sys.argv[2], "--quick" in sys.argv
    import torch
    lib = load(lib_path)
    cfgs = list(configs(quick))
    print(f"timing {len(cfgs)} calls on {torch.cuda.get_device_name()} with CUDA events", flush=True)
    times = time_calls(torch, cfgs, lambda c: make_call(torch, lib, *c),
                       lambda c: f"s={c[0]:5d} d={c[1]:3d} causal={int(c[2])}")
    worker = [__file__, "profile-worker", lib_path, "--kernel", kernel_name(), "--pass", pass_name()] + (
        ["--quick"] if quick else [])
    groups = profile_with_ncu(out, worker, len(cfgs))
    write_rows(out, torch, [("flashlab_" + kernel_name(), s, d, causal, t, g) for (s, d, causal), t, g in zip(cfgs, times, groups)],
               pass_name())


if __name__ == "__main__":
    main()
