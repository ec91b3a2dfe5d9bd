#!/usr/bin/env python3
"""Measure flashlab's own fa2 forward kernel on a real GPU, in the same rows as measure_sdpa.py.

The same sweep (bf16, batch * seqlen = 16384 tokens, heads * head_dim = 2048, forward), the same
two measurements (CUDA events through triton.testing.do_bench; ncu's dram__bytes_read.sum,
dram__bytes_write.sum, lts__t_bytes.sum and gpu__time_duration.sum with caches flushed), the
kernel called through flashlab's C ABI (libflashlab_gpu_c.so) on PyTorch tensors. Backend name in
the CSV: flashlab_fa2.

Usage (on the GPU machine): python3 measure_flashlab.py LIB.so OUT.csv [--quick]
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_sdpa import HDIMS, SEQLENS, profile_with_ncu, time_calls, write_rows  # noqa: E402


def configs(quick):
    for d in HDIMS:
        for s in (SEQLENS[:2] if quick else SEQLENS):
            for causal in (False, True):
                yield s, d, causal


def make_call(torch, lib, s, d, causal):
    batch, heads = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
    q, k, v = (torch.randn(batch, s, heads, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(batch, heads, s, device="cuda", dtype=torch.float32)
    err = ctypes.create_string_buffer(512)
    ptr = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, lse)]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def call():
        rc = lib.flashlab_forward(b"fa2", *ptr, batch, s, s, heads, heads, d, 2, ctypes.c_float(d ** -0.5), -1,
                                  0 if causal else -1, ctypes.c_float(0.0), stream, err, 512)
        if rc != 0:
            raise RuntimeError(err.value.decode())
    return call, batch, heads


def profile_worker(lib_path, quick):
    """Runs under ncu: every call once between profiler start/stop, separated by a marker kernel."""
    import torch
    lib = ctypes.CDLL(lib_path)
    calls = [make_call(torch, lib, *c)[0] for c in configs(quick)]
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for call in calls:
        torch.cuda._sleep(1000)  # 'spin_kernel' marks the start of the next call
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main():
    if sys.argv[1] == "profile-worker":
        profile_worker(sys.argv[2], "--quick" in sys.argv)
        return
    lib_path, out, quick = os.path.abspath(sys.argv[1]), sys.argv[2], "--quick" in sys.argv
    import torch
    lib = ctypes.CDLL(lib_path)
    cfgs = list(configs(quick))
    print(f"timing {len(cfgs)} calls on {torch.cuda.get_device_name()} with CUDA events", flush=True)
    times = time_calls(torch, cfgs, lambda c: make_call(torch, lib, *c),
                       lambda c: f"s={c[0]:5d} d={c[1]:3d} causal={int(c[2])}")
    worker = [__file__, "profile-worker", lib_path] + (["--quick"] if quick else [])
    groups = profile_with_ncu(out, worker, len(cfgs))
    write_rows(out, torch, [("flashlab_fa2", s, d, causal, t, g) for (s, d, causal), t, g in zip(cfgs, times, groups)])


if __name__ == "__main__":
    main()
