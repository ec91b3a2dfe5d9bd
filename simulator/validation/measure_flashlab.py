#!/usr/bin/env python3
"""Measure flashlab's own fa2 (or fa3) kernels on a real GPU, in the same rows as measure_sdpa.py.

The same sweep (bf16, batch * seqlen = 16384 tokens, heads * head_dim = 2048, forward), the same
two measurements (CUDA events through triton.testing.do_bench; ncu's dram__bytes_read.sum,
dram__bytes_write.sum, lts__t_bytes.sum and gpu__time_duration.sum with caches flushed), the
kernel called through flashlab's C ABI (libflashlab_gpu_c.so) on PyTorch tensors. Backend name in
the CSV: flashlab_fa2 (flashlab_fa3 with --kernel fa3, on an H100/H200). With --pass bwd the call is the
backward alone (every kernel it launches: preprocess, dK/dV, dQ's conversion), after one forward that
made its O and LSE; rows say pass bwd (fa3's backward at d = 256 is its split kernel); --deterministic takes the
deterministic backward (fa2: preprocess, dK/dV, the Q-outer dQ kernel; fa3: dQ added in turns), backend
flashlab_fa2_det or flashlab_fa3_det. With --kernel fa3_fp8 the call
is fa3's FP8 forward (its V transpose and the kernel; head dims 128 and 256) on the bf16 inputs quantized
to e4m3 with a descale a tensor (bench/fp8_compare.py's quantize); rows say dtype fp8.

Usage (on the GPU machine): python3 measure_flashlab.py LIB.so OUT.csv [--quick] [--kernel fa2|fa3|fa3_fp8]
                                                       [--pass fwd|bwd [--deterministic]] [--hdims 64,128,256]
"""
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "bench")]
from fa2_abi import Fa2, load  # noqa: E402
from measure_sdpa import HDIMS, SEQLENS, profile_with_ncu, run_marked, time_calls, write_rows  # noqa: E402
from fp8_compare import quantize  # noqa: E402


def configs(quick):
    for d in hdims():
        if kernel_name() == "fa3_fp8" and d < 128:  # d = 64 would run padded to 128
            continue
        for s in (SEQLENS[:2] if quick else SEQLENS):
            for causal in (False, True):
                yield s, d, causal


def kernel_name():
    return sys.argv[sys.argv.index("--kernel") + 1] if "--kernel" in sys.argv else "fa2"


def hdims():
    return [int(x) for x in sys.argv[sys.argv.index("--hdims") + 1].split(",")] if "--hdims" in sys.argv else HDIMS


def pass_name():
    return sys.argv[sys.argv.index("--pass") + 1] if "--pass" in sys.argv else "fwd"


def deterministic():
    return "--deterministic" in sys.argv and pass_name() == "bwd"


def make_call(torch, lib, s, d, causal):
    batch, heads = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
    q, k, v = (torch.randn(batch, s, heads, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(batch, heads, s, device="cuda", dtype=torch.float32)
    if kernel_name() == "fa3_fp8":
        return fp8_call(torch, lib, q, k, v, o, lse, causal), batch, heads
    if pass_name() == "fwd":
        return Fa2(torch, lib, q, k, v, o, lse, causal, kernel=kernel_name().encode()).forward, batch, heads
    do, dq, dk, dv = (torch.randn_like(q) for _ in range(4))
    f = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do, dq, dk, dv), deterministic=deterministic(),
            kernel=kernel_name().encode())
    f.forward()
    return f.backward, batch, heads


def fp8_call(torch, lib, q, k, v, o, lse, causal):
    """fa3's FP8 forward on e4m3 copies of q, k, v (their descales a tensor each), o in bf16."""
    b, s, h, d = q.shape
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    err = ctypes.create_string_buffer(512)
    lib.flashlab_forward_fp8.restype = ctypes.c_int
    args = [ctypes.c_void_p(t.data_ptr()) for t in (q8, k8, v8, o, lse)]
    args += [b, s, s, h, h, d, ctypes.c_float(dq), ctypes.c_float(dk), ctypes.c_float(dv), ctypes.c_float(d ** -0.5),
             -1, 0 if causal else -1, ctypes.c_float(0.0),
             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), err, 512]
    keep = (q8, k8, v8)  # alive as long as the call

    def call():
        if lib.flashlab_forward_fp8(*args) != 0 or not keep:
            raise RuntimeError(err.value.decode())
    return call


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
    worker = [__file__, "profile-worker", lib_path, "--kernel", kernel_name(), "--pass", pass_name(),
              "--hdims", ",".join(map(str, hdims()))] + (["--quick"] if quick else []) + \
        (["--deterministic"] if deterministic() else [])
    groups = profile_with_ncu(out, worker, len(cfgs))
    backend = "flashlab_" + kernel_name() + ("_det" if deterministic() else "")
    write_rows(out, torch, [(backend, s, d, causal, t, g) for (s, d, causal), t, g in zip(cfgs, times, groups)],
               pass_name(), "fp8" if kernel_name() == "fa3_fp8" else "bf16")


if __name__ == "__main__":
    main()
