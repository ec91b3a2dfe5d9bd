#!/usr/bin/env python3
"""Measure flashlab's own fa2 forward kernel on a real GPU, in the same rows as measure_sdpa.py.

The same sweep (bf16, batch * seqlen = 16384 tokens, heads * head_dim = 2048, forward), the same
two measurements (CUDA events through triton.testing.do_bench; ncu's dram__bytes_read.sum,
dram__bytes_write.sum, lts__t_bytes.sum and gpu__time_duration.sum with caches flushed), the
kernel called through flashlab's C ABI (libflashlab_gpu_c.so) on PyTorch tensors. Backend name in
the CSV: flashlab_fa2.

Usage (on the GPU machine): python3 measure_flashlab.py LIB.so OUT.csv [--quick]
"""
import csv
import ctypes
import datetime
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_sdpa import HDIMS, METRICS, SEQLENS, parse_ncu  # noqa: E402


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
    import triton.testing
    lib = ctypes.CDLL(lib_path)
    device = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    cfgs = list(configs(quick))

    print(f"timing {len(cfgs)} calls on {device} with CUDA events", flush=True)
    times = []
    for n, c in enumerate(cfgs):
        call, batch, heads = make_call(torch, lib, *c)
        ms = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
        times.append((batch, heads, ms * 1e-3))
        print(f"  [{n + 1}/{len(cfgs)}] s={c[0]:5d} d={c[1]:3d} causal={int(c[2])}: {ms:.3f} ms", flush=True)
        del call
        torch.cuda.empty_cache()

    print("profiling with ncu", flush=True)
    log = out + ".ncu.csv"
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
           "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "all",
           "--target-processes", "all", "--log-file", log, sys.executable, __file__, "profile-worker", lib_path]
    if quick:
        cmd.append("--quick")
    subprocess.run(cmd, check=True)
    groups = parse_ncu(log)
    if len(groups) != len(cfgs):
        raise SystemExit(f"ncu gave {len(groups)} marked groups for {len(cfgs)} calls; see {log}")

    fields = ["device", "date", "torch", "backend", "pass", "batch", "heads", "seqlen", "hdim", "causal", "dtype",
              "dram_read_bytes", "dram_write_bytes", "l2_bytes", "ncu_time_s", "event_time_s", "kernels", "kernel_names"]
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for (s, d, causal), (batch, heads, t), g in zip(cfgs, times, groups):
            w.writerow([device, date, torch.__version__, "flashlab_fa2", "fwd", batch, heads, s, d, int(causal), "bf16",
                        int(g["dram__bytes_read.sum"]), int(g["dram__bytes_write.sum"]), int(g["lts__t_bytes.sum"]),
                        g["time_s"], t, g["kernels"], ";".join(g["names"])])
    print(f"wrote {out}: {len(cfgs)} rows", flush=True)


if __name__ == "__main__":
    main()
