#!/usr/bin/env python3
"""Measure PyTorch SDPA's attention kernels on a real GPU for the simulator's validation.

For each configuration of the anchors' sweep (bf16, batch * seqlen = 16384 tokens,
heads * head_dim = 2048, forward) and each backend (flash = FlashAttention 2,
cudnn = cuDNN's fused attention, math = the unfused path, up to seqlen 4096):
  1. time the call with CUDA events (triton.testing.do_bench median, after warm-up);
  2. under Nsight Compute (ncu, --clock-control none, caches flushed before each
     kernel), read dram__bytes_read.sum, dram__bytes_write.sum, lts__t_bytes.sum and
     gpu__time_duration.sum of every kernel the call launches, summed per call.
Writes one CSV row per (backend, seqlen, head_dim, causal) with the device and date.

Usage (on the GPU machine): python3 measure_sdpa.py OUT.csv [--quick]
"""
import csv
import datetime
import subprocess
import sys

SEQLENS = [1024, 2048, 4096, 8192, 16384]
HDIMS = [64, 128, 256]
BACKENDS = ["flash", "cudnn", "math"]
MATH_MAX_SEQLEN = 4096
METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "gpu__time_duration.sum"]


def configs(quick):
    seqlens = SEQLENS[:2] if quick else SEQLENS
    for backend in BACKENDS:
        for d in HDIMS:
            for s in seqlens:
                if backend == "math" and s > MATH_MAX_SEQLEN:
                    continue
                for causal in (False, True):
                    yield backend, s, d, causal


def make_call(torch, backend, s, d, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    batch, heads = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
    q, k, v = (torch.randn(batch, heads, s, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[backend]

    def call():
        with sdpa_kernel(which):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return call, batch, heads


def run_marked(torch, calls):
    """Under ncu: every call once between profiler start/stop, each after a marker kernel (parse_ncu's
    groups), after a warm-up outside the profile (library handles, cuDNN plans, autotuning)."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for call in calls:
        torch.cuda._sleep(1000)  # 'spin_kernel' marks the start of the next call
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def profile_worker(quick):
    import torch
    run_marked(torch, [make_call(torch, *c)[0] for c in configs(quick)])


def parse_ncu(path):
    """Sums each metric over the kernels between consecutive marker kernels."""
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("==")]
    rows = list(csv.DictReader(lines))
    groups, current = [], None
    units = {}
    for row in rows:
        name = row.get("Kernel Name", "")
        if not row.get("ID", "").strip().isdigit():
            units = {m: row.get(m, "") for m in METRICS}  # the units row
            continue
        if "spin" in name:
            current = {m: 0.0 for m in METRICS} | {"kernels": 0, "names": []}
            groups.append(current)
            continue
        for m in METRICS:
            current[m] += float(row[m].replace(",", ""))
        current["kernels"] += 1
        current["names"].append(name.split("(")[0][:60])
    scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0, "second": 1.0}
    time_unit = units.get("gpu__time_duration.sum", "ns").strip()
    if time_unit not in scale:
        raise SystemExit(f"unexpected time unit '{time_unit}' in ncu output")
    for g in groups:
        g["time_s"] = g["gpu__time_duration.sum"] * scale[time_unit]
    for m in METRICS[:3]:
        if units.get(m, "byte").strip() not in ("byte", "B", ""):
            raise SystemExit(f"unexpected unit '{units[m]}' for {m}")
    return groups


FIELDS = ["device", "date", "torch", "backend", "pass", "batch", "heads", "seqlen", "hdim", "causal", "dtype",
          "dram_read_bytes", "dram_write_bytes", "l2_bytes", "ncu_time_s", "event_time_s", "kernels", "kernel_names"]


def time_calls(torch, cfgs, make, describe):
    """CUDA-event medians (triton.testing.do_bench) of make(cfg) -> (call, batch, heads), one cfg at a time."""
    import triton.testing
    times = []
    for n, c in enumerate(cfgs):
        call, batch, heads = make(c)
        ms = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
        times.append((batch, heads, ms * 1e-3))
        print(f"  [{n + 1}/{len(cfgs)}] {describe(c)}: {ms:.3f} ms", flush=True)
        del call
        torch.cuda.empty_cache()
    return times


def profile_with_ncu(out, worker_argv, n_calls):
    """Runs `python3 worker_argv...` (a profile_worker) under ncu with caches flushed before every kernel;
    returns parse_ncu's groups, one a call. The raw ncu CSV is kept beside OUT."""
    print("profiling with ncu", flush=True)
    log = out + ".ncu.csv"
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
           "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "all",
           "--target-processes", "all", "--log-file", log, sys.executable] + worker_argv
    subprocess.run(cmd, check=True)
    groups = parse_ncu(log)
    if len(groups) != n_calls:
        raise SystemExit(f"ncu gave {len(groups)} marked groups for {n_calls} calls; see {log}")
    return groups


def write_rows(out, torch, rows, pass_name="fwd", dtype="bf16"):
    """rows: (backend, seqlen, hdim, causal, (batch, heads, event_time_s), ncu group) of one pass; dtype: the
    inputs' (fp8: e4m3 Q, K, V)."""
    device, date = torch.cuda.get_device_name(), datetime.date.today().isoformat()
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for backend, s, d, causal, (batch, heads, t), g in rows:
            w.writerow([device, date, torch.__version__, backend, pass_name, batch, heads, s, d, int(causal), dtype,
                        int(g["dram__bytes_read.sum"]), int(g["dram__bytes_write.sum"]), int(g["lts__t_bytes.sum"]),
                        g["time_s"], t, g["kernels"], ";".join(g["names"])])
    print(f"wrote {out}: {len(rows)} rows", flush=True)


def main():
    if sys.argv[1] == "profile-worker":
        profile_worker("--quick" in sys.argv)
        return
    out, quick = sys.argv[1], "--quick" in sys.argv
    import torch
    cfgs = list(configs(quick))
    print(f"timing {len(cfgs)} calls on {torch.cuda.get_device_name()} with CUDA events", flush=True)
    times = time_calls(torch, cfgs, lambda c: make_call(torch, *c),
                       lambda c: f"{c[0]:5s} s={c[1]:5d} d={c[2]:3d} causal={int(c[3])}")
    groups = profile_with_ncu(out, [__file__, "profile-worker"] + (["--quick"] if quick else []), len(cfgs))
    write_rows(out, torch, [(*c, t, g) for c, t, g in zip(cfgs, times, groups)])


if __name__ == "__main__":
    main()
