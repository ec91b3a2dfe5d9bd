"""flashlab's decode kernel (gpu/decode/) over a sweep of decode shapes, for ncu and for the layers clock,
and the two joined into the validation rows of `flashlab estimate --decode --impl flashlab`.

1. Under ncu (each configuration's kernels once, in launch order; caches flushed, clocks left alone):
     ncu --csv --cache-control all --clock-control none \
         --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
         -k regex:"split_kernel|combine_kernel" python3 measure_decode.py > ncu.txt
   Each configuration prints `config batch=.. cache_len=.. heads_q=.. heads_kv=.. hdim=.. splits=..` after
   its call, so the ncu rows can be matched to it.
2. Without ncu: `python3 measure_decode.py --layers layers.txt` times each configuration on
   bench/decode_compare.py's layers clock (calls over distinct caches, at least four L2s, back to back in a
   CUDA graph: what a decode step pays a layer) and writes one line a configuration.
3. Anywhere: `python3 measure_decode.py --rows ncu.txt layers.txt OUT.csv` joins them, a row a configuration.

Shapes: q_len 1, bf16, contiguous caches, every entry full (cache_seqlens = cache_len)."""
import argparse
import csv
import datetime
import os
import re
import sys

CONFIGS = ([(1, s, 32, 8, 128) for s in (1024, 8192, 16384, 65536, 131072)]
           + [(8, s, 32, 8, 128) for s in (1024, 8192, 16384, 65536)]
           + [(64, s, 32, 8, 128) for s in (1024, 8192)]
           + [(1, 65536, 32, 8, 64), (8, 8192, 32, 8, 256), (4, 16384, 16, 2, 128)])
CONFIG = re.compile(r"config batch=(\d+) cache_len=(\d+) heads_q=(\d+) heads_kv=(\d+) hdim=(\d+) splits=(\d+)")


def inputs(torch, batch, cache_len, hq, hk, d):
    q = torch.randn(batch, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(batch, cache_len, hk, d, device="cuda", dtype=torch.bfloat16)
    return q, kc, torch.randn_like(kc), torch.full((batch,), cache_len, dtype=torch.int32, device="cuda")


def run_configs(layers_out=None):
    import torch

    import flashlab
    if layers_out:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
        from decode_compare import layers_s
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        out = open(layers_out, "w")
    for batch, cache_len, hq, hk, d in CONFIGS:
        q, kc, vc, lens = inputs(torch, batch, cache_len, hq, hk, d)
        torch.cuda.synchronize()
        flashlab.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        torch.cuda.synchronize()
        line = (f"config batch={batch} cache_len={cache_len} heads_q={hq} heads_kv={hk} hdim={d} "
                f"splits={flashlab.flash_attn_with_kvcache.last_num_splits}")
        if layers_out:
            copies = max(2, -(-4 * l2 // (2 * kc.numel() * kc.element_size())))
            caches = [(q, kc, vc)] + [inputs(torch, batch, cache_len, hq, hk, d)[:3] for _ in range(copies - 1)]
            t, how = layers_s([lambda c=c: flashlab.flash_attn_with_kvcache(*c, cache_seqlens=lens) for c in caches])
            line += f" layers_s={t:.6e} how={how} device={torch.cuda.get_device_name()!r}"
            print(line, file=out, flush=True)
            del caches
            torch.cuda.empty_cache()
        print(line, flush=True)
    if layers_out:
        out.close()
    return 0


def ncu_kernels(path):
    """The profiled kernels in launch order: (name, {metric: value})."""
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    if not lines:
        sys.exit(f"{path}: no ncu CSV rows (was it run under ncu --csv?)")
    kernels = {}
    for r in csv.DictReader(lines):
        k = kernels.setdefault(int(r["ID"]), (r["Kernel Name"], {}))
        k[1][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [kernels[i] for i in sorted(kernels)]


def join(ncu_path, layers_path, out_path):
    kernels = ncu_kernels(ncu_path)
    configs = [m.groups() for m in map(CONFIG.search, open(ncu_path)) if m]
    layers = {}
    device = ""
    for line in open(layers_path):
        if m := CONFIG.search(line):
            layers[m.groups()] = float(re.search(r"layers_s=(\S+)", line).group(1))
            device = re.search(r"device='([^']*)'", line).group(1)
    rows, at = [], 0
    for cfg in configs:
        batch, cache_len, hq, hk, d, splits = map(int, cfg)
        row = {"device": device, "date": datetime.date.today().isoformat(), "batch": batch, "cache_len": cache_len,
               "heads_q": hq, "heads_kv": hk, "hdim": d, "q_len": 1, "dtype": "bf16", "splits": splits}
        for role in ("split", "combine") if splits > 1 else ("split",):
            if at >= len(kernels) or role not in kernels[at][0]:
                sys.exit(f"{ncu_path}: expected a {role} kernel for {cfg} as ncu row {at}, found "
                         f"{kernels[at][0] if at < len(kernels) else 'none'}")
            m = kernels[at][1]
            row[f"{role}_dram_read_bytes"] = m["dram__bytes_read.sum"]
            row[f"{role}_dram_write_bytes"] = m["dram__bytes_write.sum"]
            row[f"{role}_time_s"] = m["gpu__time_duration.sum"] * 1e-9  # ncu reports ns
            at += 1
        for role in ("combine",) if splits == 1 else ():
            row.update({f"{role}_dram_read_bytes": 0, f"{role}_dram_write_bytes": 0, f"{role}_time_s": 0})
        if cfg not in layers:
            sys.exit(f"{layers_path}: no layers-clock line for {cfg}")
        row["layers_s"] = layers[cfg]
        rows.append(row)
    if at != len(kernels):
        sys.exit(f"{ncu_path}: {len(kernels) - at} profiled kernels left over after {len(configs)} configurations")
    tmp = out_path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out_path)
    print(f"{out_path}: {len(rows)} rows")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", metavar="OUT", help="time each configuration on the layers clock into OUT")
    ap.add_argument("--rows", nargs=3, metavar=("NCU", "LAYERS", "OUT"), help="join ncu's and the layers' output")
    args = ap.parse_args()
    if args.rows:
        return join(*args.rows)
    return run_configs(args.layers)


if __name__ == "__main__":
    sys.exit(main())
