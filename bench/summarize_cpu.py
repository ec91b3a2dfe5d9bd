#!/usr/bin/env python3
"""Turns flashlab_bench_cpu's JSON into the markdown summary bench/run_cpu.sh commits.

    python3 bench/summarize_cpu.py RESULTS.json [--background-cores X] > summary.md

Every number in the summary comes from the JSON (and --background-cores,
which run_cpu.sh measures); the acceptance lines are computed, not typed.
Standard library only.
"""
import argparse
import json
import sys

# The acceptance criteria for tiled FA2 forward (default tiling).
MIN_N_FOR_REFERENCE_CHECK = 2048    # tiled >= reference for N >= this
MIN_FRACTION_OF_CEILING = 0.5       # tiled >= this x the best Eigen GEMM
CONTENDED_CORES = 0.25              # a case during which others used more cores than this is marked


def parse_name(name):
    """'forward/tiled_fa2/Br:64/Bc:128/N:1024/d:64/process_time/real_time'
    -> ('forward/tiled_fa2', {'Br': 64, 'Bc': 128, 'N': 1024, 'd': 64})"""
    case, params = [], {}
    for part in name.split("/"):
        if ":" in part:
            key, value = part.split(":", 1)
            params[key] = int(value)
        elif part not in ("process_time", "real_time"):
            case.append(part)
    return "/".join(case), params


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        # A repeated case reports aggregates only: its median stands for it.
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        case, params = parse_name(b.get("run_name", b["name"]))
        row = {"case": case, **params, "error": b.get("error_message") if b.get("error_occurred") else None,
               "repetitions": b.get("repetitions", 1) if b.get("run_type") == "aggregate" else 1}
        if not row["error"]:
            to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            row.update(gflops=b["GFLOP/s"], peak_mib=b["peak_MiB"], ms=b["real_time"] * to_ms,
                       cores_busy=b["cpu_time"] / b["real_time"], others=b.get("others_cores"))
        rows.append(row)
    return data["context"], rows


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def describe_caches(caches):
    """Google Benchmark's cache list -> 'L1d 48 KiB, L1i 64 KiB, L2 2048 KiB, L3 491520 KiB'."""
    kind = {"Data": "d", "Instruction": "i"}
    return ", ".join(f"L{c['level']}{kind.get(c['type'], '')} {c['size'] // 1024} KiB" for c in caches)


def mark(row):
    """' *' after a number measured while other processes used the cores."""
    return " *" if row.get("others") is not None and row["others"] > CONTENDED_CORES else ""


def short_error(message):
    # The reference's refusal names the bytes it would need; keep the MiB part.
    if "would need" in message and "MiB" in message:
        need = message.split("(", 1)[1].split(")", 1)[0]
        return f"skipped: reference would need {need} (over its 4 GiB budget)"
    return "skipped: " + message


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--background-cores", type=float, default=None,
                    help="cores other processes used during the run (run_cpu.sh measures it)")
    ap.add_argument("--source", default=None, help="the commit measured (run_cpu.sh passes it)")
    args = ap.parse_args()
    ctx, rows = load(args.json)
    ok = [r for r in rows if not r["error"]]

    def find(case_prefix, **params):
        for r in ok:
            if r["case"].startswith(case_prefix) and all(r.get(k) == v for k, v in params.items()):
                return r
        return None

    gemms = [r for r in ok if r["case"] == "ceiling/eigen_gemm"]
    tile_gemms = [r for r in ok if r["case"] == "ceiling/eigen_tile_gemm"]
    if not gemms:
        sys.exit("summarize_cpu: the JSON has no ceiling/eigen_gemm results; run without a filter that drops them")
    ceiling = max(gemms, key=lambda r: r["gflops"])
    fwd = [r for r in ok if r["case"] == "forward/tiled_fa2"]
    default_tiling = f"{fwd[0]['Br']}x{fwd[0]['Bc']}" if fwd else "?"
    out = []
    w = out.append

    # ---- header: when, where, how loaded
    w(f"# CPU benchmark, {ctx.get('date', '?')[:10]}")
    w("")
    w(f"- Machine: {ctx.get('cpu_model', '?')}, {ctx.get('num_cpus', '?')} cores at "
      f"{ctx.get('mhz_per_cpu', '?')} MHz; caches: {describe_caches(ctx.get('caches', []))}")
    if args.source:
        w(f"- Code measured: {args.source}")
    w(f"- Threads: {ctx.get('omp_threads', '?')} OpenMP threads (all cores) for every case; "
      f"Eigen GEMM threads {ctx.get('eigen_threads', '?')}; Eigen SIMD: {ctx.get('eigen_simd', '?')}")
    load_avg = ", ".join(f"{x:.2f}" for x in ctx.get("load_avg", []))
    bg = "not measured" if args.background_cores is None else f"{args.background_cores:.2f} cores on average"
    w(f"- Other processes during the run: {bg} (load average at start: {load_avg})")
    repeated = sorted({r["case"] for r in ok if r["repetitions"] > 1})
    if repeated:
        w(f"- Median of {max(r['repetitions'] for r in ok)} repetitions: {', '.join(repeated)}; "
          f"the other cases ran once.")
    contended = [r for r in ok if mark(r)]
    w(f"- Cases measured while other processes used more than {CONTENDED_CORES} cores: {len(contended)} of "
      f"{len(ok)}" + (" (marked * below; their numbers are low)" if contended else ""))
    w(f"- FLOPs: {ctx.get('flops_convention', '?')}; GFLOP/s over wall time. Peak MiB: growth of the "
      f"process's peak RSS during the timed calls, over the inputs. Cores busy: process CPU time / wall time.")
    if ctx.get("library_build_type") == "debug":
        w("- Google Benchmark reports its own library as a debug build (Debian's package); it only times, "
          "the measured code is Release with -march=native.")
    w(f"- Ceiling: the best Eigen GEMM below, {ceiling['gflops']:.1f} GFLOP/s "
      f"(M={ceiling['M']} K={ceiling['K']} N={ceiling['N']}).")
    w("")

    # ---- acceptance, computed
    w(f"## Acceptance (tiled FA2 forward, default tiling {default_tiling})")
    w("")
    vs_ref = []
    for r in fwd:
        ref = find("forward/reference", N=r["N"], d=r["d"])
        if r["N"] >= MIN_N_FOR_REFERENCE_CHECK and ref:
            vs_ref.append((r, ref))
    slower = [f"N={t['N']} d={t['d']}" for t, ref in vs_ref if t["gflops"] < ref["gflops"]]
    verdict = "NOT MEASURED" if not vs_ref else ("FAIL" if slower else "PASS")
    w(f"- At least as fast as the naive reference for N >= {MIN_N_FOR_REFERENCE_CHECK} "
      f"(sizes where the reference runs): **{verdict}**"
      + (f" (slower at {', '.join(slower)})" if slower else ""))
    fractions = [(r, r["gflops"] / ceiling["gflops"]) for r in fwd]
    passing = [f"N={r['N']} d={r['d']}" for r, frac in fractions if frac >= MIN_FRACTION_OF_CEILING]
    verdict = "PASS" if len(passing) == len(fractions) else ("PARTIAL" if passing else "FAIL")
    if fractions:
        low, high = min(f for _, f in fractions), max(f for _, f in fractions)
        w(f"- At least {MIN_FRACTION_OF_CEILING:.0%} of the Eigen GEMM ceiling ({ceiling['gflops']:.1f} GFLOP/s): "
          f"**{verdict}**: {low:.0%} to {high:.0%} over the {len(fractions)} sizes"
          + (f"; reached at {', '.join(passing)}" if passing and verdict != "PASS" else ""))
    sweep = [r for r in ok if r["case"].startswith("sweep/")]
    for d in sorted({r["d"] for r in sweep}):
        at_d = [r for r in sweep if r["d"] == d]
        top = max(at_d, key=lambda r: r["gflops"])
        base = find("sweep/", Br=fwd[0]["Br"], Bc=fwd[0]["Bc"], d=d) if fwd else None
        gain = f", {top['gflops'] / base['gflops']:.2f}x the default {default_tiling}" if base else ""
        w(f"- Best tiling in the sweep at N={top['N']} d={d}: Br={top['Br']} Bc={top['Bc']}, "
          f"{top['gflops']:.1f} GFLOP/s = {top['gflops'] / ceiling['gflops']:.0%} of the ceiling{gain}")
    w("")

    # ---- tiled forward against its two baselines
    w("## Tiled FA2 forward against the ceiling and the reference")
    w("")
    w("| N | d | tiled GFLOP/s | reference GFLOP/s | tiled / reference | tiled / GEMM ceiling | tiled / tile-GEMM (same d) |")
    w("|---:|---:|---:|---:|---:|---:|---:|")
    for r in fwd:
        ref = find("forward/reference", N=r["N"], d=r["d"])
        tile = next((t for t in tile_gemms if t["d"] == r["d"]), None)
        of_tile = f"{r['gflops'] / tile['gflops']:.0%}" if tile else "-"
        w(f"| {r['N']} | {r['d']} | {r['gflops']:.1f}{mark(r)} | {fmt(ref and ref['gflops'])}{mark(ref or {})} | "
          f"{fmt(ref and r['gflops'] / ref['gflops'], 2)} | {r['gflops'] / ceiling['gflops']:.0%} | {of_tile} |")
    w("")

    # ---- every attention case
    w("## All attention cases")
    w("")
    w("| case | N | d | GFLOP/s | peak MiB | cores busy | others' cores | ms / call |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if not (r["case"].startswith("forward/") or r["case"].startswith("backward/")):
            continue
        if r["error"]:
            w(f"| {r['case']} | {r['N']} | {r['d']} | {short_error(r['error'])} | | | | |")
        else:
            w(f"| {r['case']} | {r['N']} | {r['d']} | {r['gflops']:.1f}{mark(r)} | {r['peak_mib']:.1f} | "
              f"{r['cores_busy']:.2f} | {fmt(r['others'], 2)} | {r['ms']:.1f} |")
    w("")

    # ---- ceiling
    w("## Ceiling: Eigen GEMM, fp32, row-major")
    w("")
    w("| case | shape | GFLOP/s | cores busy |")
    w("|---|---|---:|---:|")
    for r in gemms:
        w(f"| eigen_gemm, all cores | M={r['M']} K={r['K']} N={r['N']} | {r['gflops']:.1f}{mark(r)} | {r['cores_busy']:.2f} |")
    for r in tile_gemms:
        w(f"| eigen_tile_gemm, one per core | S=QK^T and O+=PV at Br={r['Br']} Bc={r['Bc']} d={r['d']} | "
          f"{r['gflops']:.1f}{mark(r)} | {r['cores_busy']:.2f} |")
    w("")

    # ---- tiling sweep
    if sweep:
        w(f"## Tiling sweep: tiled FA2 forward, N = {sweep[0]['N']}")
        w("")
        w("| Br x Bc | d | GFLOP/s | vs default | of ceiling |")
        w("|---|---:|---:|---:|---:|")
        for r in sorted(sweep, key=lambda r: (r["d"], r["Br"], r["Bc"])):
            base = find("sweep/", Br=fwd[0]["Br"], Bc=fwd[0]["Bc"], d=r["d"]) if fwd else None
            w(f"| {r['Br']} x {r['Bc']} | {r['d']} | {r['gflops']:.1f}{mark(r)} | "
              f"{fmt(base and r['gflops'] / base['gflops'], 2)} | {r['gflops'] / ceiling['gflops']:.0%} |")
        w("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
