"""Plots of the simulator's records with matplotlib, where it is installed (python3-matplotlib):

  roofline(records, gpu="h100-sxm")          each record's achieved FLOP/s over its arithmetic intensity
                                             (FLOPs per HBM byte), under the GPU's roofs from presets/
  speedup_over_seqlen(records)               speedup_vs_standard per algorithm along a seqlen sweep
  measured_vs_predicted(measured, records)   a kernel's measured time beside the model's, per seqlen

Each returns the matplotlib Axes (drawn into `ax` when given), so a notebook shows it and a script saves it
with ax.figure.savefig(...)."""
import json
import os

PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "presets")


def _pyplot():
    try:
        import matplotlib
        if not os.environ.get("DISPLAY") and "ipykernel" not in __import__("sys").modules:
            matplotlib.use("Agg")  # a script without a display writes files
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("flashlab's plots need matplotlib (apt-get install python3-matplotlib); the records "
                          "themselves need nothing") from None
    return plt


def _axes(ax):
    if ax is not None:
        return ax
    return _pyplot().subplots(figsize=(6.4, 4.2))[1]


def _by_algo(records):
    groups = {}
    for r in records:
        groups.setdefault(r["algo"], []).append(r)
    return groups


def roofline(records, gpu="h100-sxm", dtype="bf16", ax=None):
    """Points at (FLOPs / HBM bytes, FLOPs / time) per record, with the compute and bandwidth roofs of the
    preset presets/GPU.json when it is found (a clone's layout)."""
    ax = _axes(ax)
    _pyplot()
    for algo, rows in _by_algo(records).items():
        x = [r["flops"] / (r["hbm_read_bytes"] + r["hbm_write_bytes"]) for r in rows]
        y = [r["flops"] / r["time_s"] for r in rows]
        ax.scatter(x, y, label=algo)
    path = os.path.join(PRESETS, gpu + ".json")
    if os.path.isfile(path):
        spec = json.load(open(path))
        peak = spec["tensor_flops_per_s"][dtype]["value"]
        bandwidth = spec["hbm_bandwidth_bytes_per_s"]["value"]
        xs = [1, peak / bandwidth, 1e5]
        ax.plot(xs, [min(peak, x * bandwidth) for x in xs], "k--", lw=1, label=f"{gpu} roofs ({dtype})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / HBM byte)")
    ax.set_ylabel("FLOP/s (predicted)")
    ax.legend()
    return ax


def speedup_over_seqlen(records, ax=None):
    """speedup_vs_standard over seqlen, one line per algorithm (records of a sweep: estimate(seqlen=[...]))."""
    ax = _axes(ax)
    for algo, rows in _by_algo(records).items():
        rows = sorted(rows, key=lambda r: r["seqlen"])
        ax.plot([r["seqlen"] for r in rows], [r["speedup_vs_standard"] for r in rows], marker="o", label=algo)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("seqlen")
    ax.set_ylabel("speedup over standard attention (predicted)")
    ax.legend()
    return ax


def measured_vs_predicted(measured, records, algo=None, ax=None):
    """measured: [{"seqlen": N, "time_s": t}, ...] from a real kernel (e.g. timed with torch.cuda.Event);
    records: the estimate of the same problems. One line each, over seqlen."""
    ax = _axes(ax)
    rows = [r for r in records if algo is None or r["algo"] == algo]
    rows = sorted(rows, key=lambda r: r["seqlen"])
    ax.plot([r["seqlen"] for r in rows], [r["time_s"] * 1e3 for r in rows], marker="o",
            label=f"predicted ({rows[0]['algo'] if rows else algo})")
    m = sorted(measured, key=lambda r: r["seqlen"])
    ax.plot([r["seqlen"] for r in m], [r["time_s"] * 1e3 for r in m], marker="s", label="measured")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("seqlen")
    ax.set_ylabel("time (ms)")
    ax.legend()
    return ax
