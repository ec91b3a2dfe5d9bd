#!/usr/bin/env python3
"""Profile flashlab's fa2 kernels beside SDPA flash's (FlashAttention 2), or its fa3 kernels beside SDPA's
cuDNN backend (--kernel fa3), with Nsight Compute, one shape.

Runs on the GPU machine. Both run forward+backward (or the forward alone: --pass fwd) once, after a
warm-up, on the same bf16 tensors of
the anchors' setup (batch * seqlen = 16384 tokens, heads * head_dim = 2048); ncu collects the
SpeedOfLight, Occupancy, LaunchStats, WarpStateStats, ComputeWorkloadAnalysis and InstructionStats
sections (raw metrics) of every kernel whose name matches --kernels, and this script prints, per kernel,
the figures a kernel author compares first: time, registers, shared memory, achieved occupancy, issue
activity, tensor pipe activity, executed instructions and the leading warp stall reasons (average
cycles per issued instruction). The full ncu CSV is kept.

Usage: python3 bench/ncu_kernels.py LIB.so OUT.csv --hdim 128 --seqlen 4096 [--causal]
                                    [--kernels REGEX] [--kernel fa2|fa3] [--pass fwd|fwd+bwd]
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa2_abi import Fa2, load  # noqa: E402

WANTED = [  # (label, ncu raw metric, divisor)
    ("time us", "gpu__time_duration.sum", 1e3),
    ("grid", "launch__grid_size", 1),
    ("threads", "launch__block_size", 1),
    ("regs", "launch__registers_per_thread", 1),
    ("smem KB", "launch__shared_mem_per_block_dynamic", 1024),
    ("occ %", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("issue %", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1),
    ("tensor %", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 1),
    ("insts M", "smsp__inst_executed.sum", 1e6),
    ("dram %", "dram__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("smem ld M", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1e6),
    ("bank cf M", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 1e6),
    ("smem %", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed", 1),
    ("l1 %", "l1tex__throughput.avg.pct_of_peak_sustained_active", 1),
    ("l2 %", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 1),
]
STALL = "smsp__average_warps_issue_stalled_"  # ..._<reason>_per_issue_active.ratio


def worker(lib_path, d, s, causal, kernel, pas):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h = 16384 // s, 2048 // d
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    fa = Fa2(torch, load(lib_path), q, k, v, o, lse, causal, grads=(do, dq, dk, dv), kernel=kernel.encode())
    ours = fa.forward if pas == "fwd" else fa.forward_backward
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(pas != "fwd") for x in (q, k, v))
    backend = SDPBackend.CUDNN_ATTENTION if kernel == "fa3" else SDPBackend.FLASH_ATTENTION

    def anchor():
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            if pas != "fwd":
                out.backward(do.transpose(1, 2))

    for fn in (ours, anchor):
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    ours()
    anchor()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def report(log):
    """Per kernel launch: the WANTED figures and the three largest stall reasons (cycles per issue)."""
    with open(log) as f:
        lines = f.readlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.DictReader(lines[start:]))[1:]  # the first row after the header holds the units
    print(f"{'kernel':44s} " + " ".join(f"{label:>8s}" for label, _, _ in WANTED) + "  top stalls (cycles per issue)")
    for row in rows:
        cells = []
        for _, metric, div in WANTED:
            x = number(row.get(metric, ""))
            cells.append(f"{x / div:8.1f}" if x is not None else f"{'-':>8s}")
        stalls = [(number(v), k[len(STALL):].replace("_per_issue_active.ratio", "")) for k, v in row.items()
                  if k.startswith(STALL) and k.endswith("_per_issue_active.ratio") and number(v) is not None]
        stalls.sort(reverse=True)
        top = ", ".join(f"{n} {x:.1f}" for x, n in stalls[:4])
        print(f"{row['Kernel Name'][:44]:44s} " + " ".join(cells) + "  " + top)


def main():
    if sys.argv[1] == "worker":
        # worker LIB HDIM SEQLEN CAUSAL [KERNEL [PASS]]: fa2 and forward+backward unless named
        extra = sys.argv[6:] + ["fa2", "fwd+bwd"][len(sys.argv[6:]):]
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", extra[0], extra[1])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--kernels", default="regex:dkdv|bwd|fa2_forward|fa3_|fwd|sdpa|preprocess|convert")
    ap.add_argument("--kernel", default="fa2", choices=["fa2", "fa3"])
    ap.add_argument("--pass", dest="pas", default="fwd+bwd", choices=["fwd", "fwd+bwd"])
    args = ap.parse_args()
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--profile-from-start", "off",
           "--clock-control", "none", "--target-processes", "all", "--kernel-name", args.kernels, "--log-file", args.out]
    for section in ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "ComputeWorkloadAnalysis",
                    "InstructionStats"):
        cmd += ["--section", section]
    cmd += ["--metrics", ",".join(metric for _, metric, _ in WANTED)]
    cmd += [sys.executable, os.path.abspath(__file__), "worker", os.path.abspath(args.lib), str(args.hdim),
            str(args.seqlen), "1" if args.causal else "0", args.kernel, args.pas]
    subprocess.run(cmd, check=True)
    print(f"d={args.hdim} s={args.seqlen} causal={int(args.causal)} (ncu CSV: {args.out})")
    report(args.out)


if __name__ == "__main__":
    main()
