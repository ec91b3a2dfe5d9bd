#!/usr/bin/env python3
"""Issue 17's bench: masked attention on one GPU, one process. flashlab's fa2 (or, with --kernel fa3, its
Hopper kernels) with a document mask and a prefix-LM mask (through the C ABI v2, a prepared device mask)
against the same kernel without a mask and against PyTorch SDPA given the same mask as a dense boolean
attn_mask.

    FLASHLAB_LIBRARY=build/capi/libflashlab.so PYTHONPATH=python python3 bench/mask_compare.py \\
        --out bench/results/masks-h100-$(date +%F).csv          # --seqlens --hdims --masks --passes
    ... bench/mask_compare.py --kernel fa3                      # fa3 forward and backward (-fa3.csv by default)
    python3 bench/mask_compare.py --self-check                  # CPU only: masks and densities, no torch
    ... bench/mask_compare.py --other OTHER.so                  # a second build timed beside it (an A/B)

The tiles come from `flashlab shapes` (FLASHLAB_CLI, else build/cli/flashlab), the one owner of them.
Shapes: bf16, batch x seqlen = 16384, 16 heads, head_dim 128 (and 64), seqlen 4k, 8k, 16k.
Masks (core/include/flashlab/mask.hpp's definitions; every batch entry has the same one):
  document         --docs documents per 16384 tokens (8: at seqlen s each sequence holds 8 s / 16384; or
                   --docs-per-seq N at every seqlen), of uneven lengths drawn once per seqlen from a seeded
                   RNG (printed), full attention inside a document; document-causal adds causal
  prefix-lm        the first --prefix-frac of the keys (25%) seen by every query, causal after them
Timed (median of triton.testing.do_bench, warm-up 25 ms, 100 ms of repetitions; CUDA events when triton is
missing), per row:
  nomask_ms        the kernel without a mask (flashlab_forward_v1, the same tensors)
  mask_ms          the kernel with the mask, the device mask prepared once (flashlab_mask_prepare_v2) and
                   passed in flashlab_tensors.mask, so each call's host work is only the struct's checks
  sdpa_<backend>   F.scaled_dot_product_attention with attn_mask = the mask as (1, 1, s, s) bool, under each of
                   EFFICIENT_ATTENTION and CUDNN_ATTENTION alone (and MATH at s <= 4096); a backend that
                   refuses is recorded empty with its reason printed
fwd+bwd rows time the forward then the backward (SDPA: out.backward(dO), the grads reset untimed).
Columns derived:
  density          the block mask's density at the kernel's forward tile (`flashlab shapes`: fa2 128 x 64 at
                   d = 128, 128 x 128 at d = 64), computed here as core's tiled_cpu/block_mask.cpp does (each
                   Q block's K/V blocks from its first row's begin and its last row's end, weighted by tile
                   area); --self-check compares it with `flashlab estimate`
  mask_vs_density  mask_ms / (density x nomask_ms): 1 means the mask saves exactly the skipped tiles
                   (issue 17 asks <= 1.2 at s >= 4k); fwd+bwd uses the forward tile's density
  sdpa_best_vs_kernel the fastest SDPA backend's time / mask_ms (issue 17 asks >= 3 for document masking)
With --other OTHER.so (a second build of the library, say the one before a change) the same kernel of that
build is timed in the same process, right after this build's (other_nomask_ms, other_mask_ms,
other_mask_vs_density, mask_speedup_vs_other = other_mask_ms / mask_ms), and its masked O must match this
build's to the check's tolerance (max_abs_diff_o_vs_other): an A/B without the drift between processes.
Checked: the kernel's masked O (and dQ, dK, dV) against an fp32 reference with the same mask (O on 256 rows
of batch entry 0 and every head; gradients on head 0 of batch entry 0), by the project's rule: its error at
most 2x that of the SDPA backends that ran (at least the bf16 rounding of the reference); the max
|ours - SDPA| is printed too. A failed check stops the run with the numbers, and no CSV is written.
(CSVs written before 2026-11-23's --kernel call the two times fa2_nomask_ms and fa2_mask_ms, and the ratio
sdpa_best_vs_fa2.)
"""
import argparse
import csv
import datetime
import functools
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

TOKENS = 16384  # batch x seqlen


# ---- masks as each row's key interval [begin, end) (Problem::col_begin / col_end), and their density

def cli_path():
    """The flashlab CLI: FLASHLAB_CLI, else the build's."""
    return os.environ.get("FLASHLAB_CLI") or os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                                          "build", "cli", "flashlab")


@functools.lru_cache(maxsize=None)
def forward_tile(kernel, d, pass_="fwd"):
    """The (Br, Bc) the kernel's forward (pass_ "bwd": its backward's first kernel, fa2's dK/dV) launches at
    head_dim d, as `flashlab shapes` reads it from gpu/shapes.hpp (the one owner of the tile shapes)."""
    cmd = [cli_path(), "shapes", "--algo", kernel, "--hdim", str(d), "--pass", pass_, "--json"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"`{' '.join(cmd)}` could not run ({e}): build the CLI or set FLASHLAB_CLI")
    if out.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed:\n{out.stdout}{out.stderr}")
    shape = json.loads(out.stdout)[0]
    return shape["block_m"], shape["block_n"]


def document_lengths(s, docs, seed):
    """`docs` uneven positive lengths summing to s, the same for a given (s, docs, seed)."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.25, 1.75, docs)
    lengths = np.maximum(1, np.floor(weights / weights.sum() * s).astype(np.int64))
    lengths[-1] += s - lengths.sum()
    assert lengths.min() >= 1 and lengths.sum() == s, lengths
    return [int(x) for x in lengths]


def intervals(kind, value, s, causal=False):
    """begin, end (s,) int64: the keys row i sees are [begin[i], end[i]); seqlen_q == seqlen_k = s, no window."""
    i = np.arange(s, dtype=np.int64)
    if kind == "prefix-lm":
        return np.zeros(s, np.int64), np.maximum(value, i + 1)
    ends = np.cumsum(value)
    doc = np.repeat(np.arange(len(value)), value)
    begin, end = ends[doc] - np.asarray(value)[doc], ends[doc]
    return begin, (np.minimum(end, i + 1) if causal else end)


def density(begin, end, br, bc):
    """The block mask's density (tiled_cpu/block_mask.cpp, interval masks): Q block i computes K/V blocks
    [begin(first row) // Bc, ceil(end(last row) / Bc)), each weighted by its area, over s x s."""
    s = len(begin)
    computed = 0
    for r0 in range(0, s, br):
        r1 = min(s, r0 + br)
        if begin[r1 - 1] >= end[r1 - 1]:
            continue
        j0, j1 = begin[r0] // bc, -(-end[r1 - 1] // bc)
        cols = sum(min(bc, s - j * bc) for j in range(j0, j1))
        computed += (r1 - r0) * cols
    return computed / (s * s)


def document_tiles(docs, br, bc):
    """(whole, partial) tiles of Br query rows x Bc keys that a document mask's rows see (one head, documents
    of these lengths packed in order): whole where every row of the tile sees every key, partial where some
    row sees some key (validation/partial_tiles.py, mask_step_costs.py)."""
    ends, start = [], 0
    for length in docs:
        ends += [(start, start + length)] * length
        start += length
    whole = partial = 0
    for i in range(0, len(ends), br):
        rows = ends[i:i + br]
        lo, hi = min(r[0] for r in rows), max(r[1] for r in rows)
        for j in range(lo // bc, (hi - 1) // bc + 1):
            c0, c1 = j * bc, (j + 1) * bc
            if all(r[0] <= c0 and c1 <= r[1] for r in rows):
                whole += 1
            elif any(r[0] < c1 and c0 < r[1] for r in rows):
                partial += 1
    return whole, partial


def mask_cases(s, args):
    """(name, kind, value, causal, description) of each mask asked for at seqlen s."""
    cases = []
    for name in args.masks.split(","):
        if name in ("document", "document-causal"):
            docs = args.docs_per_seq or max(1, round(args.docs * s / TOKENS))
            lengths = document_lengths(s, docs, args.seed + s)
            cases.append((name, "document", lengths, name == "document-causal", "docs " + " ".join(map(str, lengths))))
        elif name == "prefix-lm":
            prefix = int(round(args.prefix_frac * s))
            cases.append((name, "prefix-lm", prefix, False, f"prefix {prefix}"))
        else:
            sys.exit(f"--masks: unknown mask '{name}'; expected document, document-causal or prefix-lm")
    return cases


def self_check(args):
    """The CPU parts: the intervals against mask.hpp's definitions bit by bit, the density against a direct
    count of non-empty tiles and against `flashlab estimate` (FLASHLAB_CLI, else build/cli/flashlab)."""
    cli = cli_path()
    if not os.path.isfile(cli):
        sys.exit(f"no flashlab CLI at {cli}: the tiles and densities come from it; build it or set FLASHLAB_CLI")
    for s in (3000, 8192):  # one not a multiple of the tiles; one with several documents
        for name, kind, value, causal, text in mask_cases(s, args):
            begin, end = intervals(kind, value, s, causal)
            i, j = np.arange(s)[:, None], np.arange(s)[None, :]
            if kind == "prefix-lm":
                want = (j < value) | (j <= i)
            else:
                doc = np.repeat(np.arange(len(value)), value)
                want = (doc[i] == doc[j]) & ((j <= i) if causal else True)
            got = (j >= begin[:, None]) & (j < end[:, None])
            assert (got == want).all(), f"{name} at s={s}: the intervals are not the mask"
            for d in (64, 128):
                br, bc = forward_tile("fa2", d)
                rho = density(begin, end, br, bc)
                tr, tc = -(-s // br), -(-s // bc)
                padded = np.zeros((tr * br, tc * bc), bool)
                padded[:s, :s] = want
                seen = padded.reshape(tr, br, tc, bc).any(axis=(1, 3))
                rows = np.minimum(br, s - np.arange(tr) * br)[:, None]
                cols = np.minimum(bc, s - np.arange(tc) * bc)[None, :]
                direct = (seen * rows * cols).sum() / (s * s)
                assert abs(rho - direct) < 1e-12, f"{name} s={s} d={d}: density {rho} != tile count {direct}"
                line = f"{name:15s} s={s:5d} d={d:3d} tile {br}x{bc}: density {rho:.4f}"
                core = core_density(cli, s, d, kind, value, causal, br, bc)
                assert abs(core - rho) < 1e-4, f"{name} s={s} d={d}: core says {core}, here {rho}"
                line += f" (flashlab estimate: {core:.4f})"
                print(line + f"  [{text[:60]}]")
    print("self-check passed")


def core_density(cli, s, d, kind, value, causal, br, bc):
    """The density `flashlab estimate` prints for fa2 at the tile (br, bc)."""
    cmd = [cli, "estimate", "--seqlen", str(s), "--heads", "16", "--hdim", str(d), "--algo", "fa2", "--impl", "flashlab",
           "--mask", kind]
    cmd += ["--doc-lengths", ",".join(map(str, value))] if kind == "document" else ["--prefix", str(value)]
    cmd += ["--causal"] if causal else []
    out = subprocess.run(cmd, capture_output=True, text=True)
    found = re.findall(r"block mask density ([0-9.]+) at (\d+)x(\d+) tiles", out.stdout + out.stderr)
    for rho, m, n in found:
        if (int(m), int(n)) == (br, bc):
            return float(rho)
    sys.exit(f"`{' '.join(cmd)}` printed no density at {br}x{bc} tiles:\n{out.stdout}{out.stderr}")


# ---- the GPU part

def device_short_name(name):
    """'NVIDIA H100 80GB HBM3' -> 'h100' (for the CSV's default name)."""
    m = re.search(r"\b([A-Z]+\d+[A-Za-z]*)\b", name.replace("NVIDIA", ""))
    return (m.group(1) if m else name.split()[-1]).lower()


class Timer:
    def __init__(self, torch):
        self.torch = torch
        try:
            import triton.testing
            self.do_bench = triton.testing.do_bench
        except ImportError:
            self.do_bench = None

    def median_ms(self, fn, grad_to_none=None):
        if self.do_bench:
            return self.do_bench(fn, warmup=25, rep=100, return_mode="median", grad_to_none=grad_to_none)
        torch = self.torch
        for _ in range(5):
            fn()
        times = []
        for _ in range(30):
            for x in grad_to_none or []:
                x.grad = None
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop))
        return float(np.median(times))


class Kernel:
    """A flashlab kernel ("fa2" or "fa3") through the C ABI v2 (python/flashlab/_abi.py) on PyTorch tensors:
    one flashlab_problem and one flashlab_tensors made once, the mask prepared on the device once; each call
    is one ctypes call."""

    def __init__(self, name, torch, q, k, v, o, lse, grads, mask=None, causal=False, lib=None):
        import ctypes
        from flashlab import _abi
        from flashlab._problem import ProblemArgs
        b, s, h, d = q.shape
        self.name, self.ctypes, self.lib = name.encode(), ctypes, lib or _abi.lib()
        self.problem = ProblemArgs(batch=b, heads_q=h, heads_kv=h, seqlen_q=s, seqlen_k=s, head_dim=d, dtype="bf16",
                                   causal=causal, mask=mask)
        self.t = _abi.new_tensors()
        self.t.q, self.t.k, self.t.v, self.t.o, self.t.lse = (x.data_ptr() for x in (q, k, v, o, lse))
        self.t.d_o, self.t.dq, self.t.dk, self.t.dv = (x.data_ptr() for x in grads)
        self.t.stream = torch.cuda.current_stream().cuda_stream
        self.err = ctypes.create_string_buffer(1024)
        self.handle = ctypes.c_void_p()
        if mask is not None:
            self._check(self.lib.flashlab_mask_prepare_v2(self.name, self.problem.ref, self.t.stream,
                                                          ctypes.byref(self.handle), self.err, 1024))
            self.t.mask = self.handle.value

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError("flashlab: " + self.err.value.decode())

    def forward(self):
        self._check(self.lib.flashlab_forward_v1(self.name, self.problem.ref, self.ctypes.byref(self.t), self.err, 1024))

    def forward_backward(self):
        self.forward()
        self._check(self.lib.flashlab_backward_v1(self.name, self.problem.ref, self.ctypes.byref(self.t), self.err, 1024))

    def close(self):
        if self.handle.value:
            self.lib.flashlab_mask_free(self.handle)
            self.handle = self.ctypes.c_void_p()


def sdpa_backends(s):
    from torch.nn.attention import SDPBackend
    backends = {"sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
    if s <= 4096:
        backends["sdpa_math"] = SDPBackend.MATH
    return backends


BACKEND_NAMES = ("sdpa_efficient", "sdpa_cudnn", "sdpa_math")


def check_rows(kind, value, begin):
    """The rows O is checked on: 256 spread over the sequence, and those on either side of each document's
    start or of the prefix's end."""
    s = len(begin)
    edges = np.flatnonzero(np.diff(begin)) + 1 if kind == "document" else np.array([value], np.int64)
    rows = np.concatenate([np.linspace(0, s - 1, 256).astype(np.int64), edges - 1, edges])
    return np.unique(np.clip(rows, 0, s - 1))


def reference_rows(torch, q, k, v, allowed, rows):
    """fp32 O of batch entry 0 at `rows`, every head: (len(rows), heads, d)."""
    qr = q[0, rows].float().transpose(0, 1)                      # (h, R, d)
    kf, vf = k[0].float().transpose(0, 1), v[0].float().transpose(0, 1)  # (h, s, d)
    scores = qr @ kf.transpose(1, 2) * q.shape[-1] ** -0.5        # (h, R, s)
    scores.masked_fill_(~allowed[rows][None], float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vf).transpose(0, 1)   # (R, h, d)


def reference_grads(torch, q, k, v, do, allowed):
    """fp32 dQ, dK, dV of batch entry 0, head 0: (s, d) each."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qh, kh, vh = (x[0, :, 0].float()[None, None].requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allowed[None, None])
    out.backward(do[0, :, 0].float()[None, None])
    return [x.grad[0, 0] for x in (qh, kh, vh)]


def measure(torch, timer, device, pas, d, s, cases, args, other=None):
    import warnings
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    b, h = TOKENS // s, args.heads
    kernel = args.kernel
    br, bc = forward_tile(kernel, d)
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    grads = [do] + [torch.full_like(q, float("nan")) for _ in range(3)]  # do, dq, dk, dv
    backward = pas == "fwd+bwd"

    plain = Kernel(kernel, torch, q, k, v, o, lse, grads)
    t_plain = timer.median_ms(plain.forward_backward if backward else plain.forward)
    if other:
        plain_other = Kernel(kernel, torch, q, k, v, o, lse, grads, lib=other)
        t_plain_other = timer.median_ms(plain_other.forward_backward if backward else plain_other.forward)
        plain_other.close()
    rows = []
    for name, kind, value, causal, text in cases:
        begin, end = intervals(kind, value, s, causal)
        rho = density(begin, end, br, bc)
        j = torch.arange(s, device="cuda")
        allowed = (j[None] >= torch.from_numpy(begin).cuda()[:, None]) & (j[None] < torch.from_numpy(end).cuda()[:, None])
        attn_mask = allowed[None, None]                            # (1, 1, s, s) bool, broadcast over (b, h)

        masked = Kernel(kernel, torch, q, k, v, o, lse, grads, mask=(kind, value), causal=causal)
        ours = masked.forward_backward if backward else masked.forward
        ours()
        torch.cuda.synchronize()
        o_ours = o.clone()
        g_ours = [g[0, :, 0].float().clone() for g in grads[1:]] if backward else None
        t_mask = timer.median_ms(ours)
        masked.close()
        if other:  # the second build right after, on the same tensors; its O checked against ours
            masked_other = Kernel(kernel, torch, q, k, v, o, lse, grads, mask=(kind, value), causal=causal, lib=other)
            theirs = masked_other.forward_backward if backward else masked_other.forward
            o.fill_(float("nan"))
            theirs()
            torch.cuda.synchronize()
            diff_other = (o.float() - o_ours.float()).abs().max().item()
            t_mask_other = timer.median_ms(theirs)
            masked_other.close()

        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(backward) for x in (q, k, v))
        dot = do.transpose(1, 2)

        def sdpa(backend):
            def call():
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=attn_mask)
                    if backward:
                        out.backward(dot)
                return out
            return call

        times, outs, sdpa_grads, reasons = {}, {}, {}, {}
        for bname, backend in sdpa_backends(s).items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    for x in (qt, kt, vt):
                        x.grad = None
                    outs[bname] = sdpa(backend)().detach().transpose(1, 2)
                    if backward:
                        sdpa_grads[bname] = [x.grad.transpose(1, 2)[0, :, 0].float().clone() for x in (qt, kt, vt)]
                    times[bname] = timer.median_ms(sdpa(backend), grad_to_none=[qt, kt, vt] if backward else None)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                    notes = "; ".join(str(w.message).splitlines()[0] for w in caught)
                    reasons[bname] = (str(e).splitlines()[0] + (" (" + notes + ")" if notes else ""))[:300]
                    print(f"  {pas} d={d} s={s} {name}: {bname} refused: {reasons[bname]}", flush=True)
                    torch.cuda.empty_cache()

        # The check: fa2's error against the fp32 reference at most 2x the SDPA backends' (or bf16 rounding's).
        sample = torch.from_numpy(check_rows(kind, value, begin)).cuda()
        ref = reference_rows(torch, q, k, v, allowed, sample)
        checks = [("o", o_ours[0, sample].float(), ref, [x[0, sample].float() for x in outs.values()])]
        if backward:
            ref_g = reference_grads(torch, q, k, v, do, allowed)
            for n, name_g in enumerate(("dq", "dk", "dv")):
                checks.append((name_g, g_ours[n], ref_g[n], [g[n] for g in sdpa_grads.values()]))
        row = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
               "kernel": kernel, "pass": pas, "mask": name, "mask_args": text, "hdim": d, "seqlen": s, "batch": b,
               "heads": h, "tile_br": br, "tile_bc": bc, "density": rho, "nomask_ms": t_plain, "mask_ms": t_mask}
        for bname in BACKEND_NAMES:
            row[bname + "_ms"] = times.get(bname, "")
        row["sdpa_refused"] = "; ".join(f"{n}: {r}" for n, r in reasons.items())
        row["mask_vs_density"] = t_mask / (rho * t_plain)
        if other:
            row["other_nomask_ms"], row["other_mask_ms"] = t_plain_other, t_mask_other
            row["other_mask_vs_density"] = t_mask_other / (rho * t_plain_other)
            row["mask_speedup_vs_other"] = t_mask_other / t_mask
            row["max_abs_diff_o_vs_other"] = diff_other
        best = min(times, key=times.get) if times else ""
        row["sdpa_best"] = best
        row["sdpa_best_vs_kernel"] = times[best] / t_mask if best else ""
        failed = []
        for field, mine, want, theirs in checks:
            err = (mine - want).abs().max().item()
            base = max([(t - want).abs().max().item() for t in theirs] + [(want.bfloat16().float() - want).abs().max().item()])
            row[f"err_{field}"], row[f"tol_{field}"] = err, 2 * base
            row[f"max_abs_diff_{field}_vs_sdpa"] = max([(mine - t).abs().max().item() for t in theirs], default="")
            if not err <= 2 * base:
                failed.append(f"{field}: {kernel}'s error {err:.3e} > 2 x {base:.3e}")
        if other and not diff_other <= 2 * row["tol_o"]:
            failed.append(f"o: the other build's output differs from this one's by {diff_other:.3e}")
        print(f"{pas:7s} d={d:3d} s={s:5d} {name:15s} rho {rho:.3f}  {kernel} {t_plain:7.3f} -> {t_mask:7.3f} ms "
              f"(x{row['mask_vs_density']:.2f} of rho)  "
              + "  ".join(f"{n[5:]} {times[n]:7.3f}" for n in times)
              + (f"  best SDPA / {kernel} {row['sdpa_best_vs_kernel']:.1f}x" if best else "")
              + "  err " + " ".join(f"{c[0]} {row['err_' + c[0]]:.1e}" for c in checks)
              + (f"  other {t_plain_other:7.3f} -> {t_mask_other:7.3f} ms (x{row['other_mask_vs_density']:.2f} of rho), "
                 f"ours {row['mask_speedup_vs_other']:.3f}x it" if other else ""), flush=True)
        if failed:
            sys.exit(f"{pas} d={d} s={s} {name}: {kernel}'s masked output is wrong: " + "; ".join(failed))
        rows.append(row)
        outs.clear()
        sdpa_grads.clear()
        torch.cuda.empty_cache()
    plain.close()
    return rows


def table(rows):
    head = (f"{'kernel':6s} {'pass':7s} {'d':>3s} {'s':>5s} {'mask':15s} {'rho':>6s} {'nomask':>8s} {'mask':>8s} {'t/(rho t0)':>10s} "
            f"{'efficient':>9s} {'cudnn':>8s} {'math':>8s} {'SDPA/ours':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = lambda key: f"{r[key]:8.3f}" if r[key] != "" else f"{'-':>8s}"  # noqa: E731
        best = f"{r['sdpa_best_vs_kernel']:9.1f}" if r["sdpa_best_vs_kernel"] != "" else f"{'-':>9s}"
        lines.append(f"{r['kernel']:6s} {r['pass']:7s} {r['hdim']:3d} {r['seqlen']:5d} {r['mask']:15s} {r['density']:6.3f} "
                     f"{r['nomask_ms']:8.3f} {r['mask_ms']:8.3f} {r['mask_vs_density']:10.2f} "
                     f"{ms('sdpa_efficient_ms'):>9s} {ms('sdpa_cudnn_ms')} {ms('sdpa_math_ms')} {best}")
    return "\n".join(lines) + "\n(times in ms; issue 17: t/(rho t0) <= 1.2 at s >= 4k, SDPA/fa2 >= 3 for document)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="CSV path (default bench/results/masks-<gpu>-<date>.csv)")
    ap.add_argument("--seqlens", default="4096,8192,16384")
    ap.add_argument("--hdims", default="128,64")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kernel", default="fa2", choices=["fa2", "fa3"], help="flashlab's kernel")
    ap.add_argument("--passes", default="fwd,fwd+bwd", help="fwd,fwd+bwd")
    ap.add_argument("--masks", default="document,prefix-lm", help="document, document-causal, prefix-lm")
    ap.add_argument("--docs", type=int, default=8, help="documents per 16384 tokens")
    ap.add_argument("--docs-per-seq", type=int, default=0, help="documents per sequence at every seqlen (0: --docs)")
    ap.add_argument("--prefix-frac", type=float, default=0.25, help="prefix-lm: the prefix's share of the keys")
    ap.add_argument("--seed", type=int, default=17, help="the document lengths' RNG (seeded with seed + seqlen)")
    ap.add_argument("--self-check", action="store_true", help="check the masks and densities on the CPU and exit")
    ap.add_argument("--other", help="a second build of the library, its kernel timed beside this one's (an A/B)")
    args = ap.parse_args()
    if args.self_check:
        self_check(args)
        return 0

    import torch
    from flashlab import _abi
    lib = _abi.lib()
    if not lib.flashlab_has_cuda():
        sys.exit(f"{lib.path} was built without CUDA: build where nvcc is installed, or set FLASHLAB_LIBRARY")
    device = torch.cuda.get_device_name()
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"masks-{device_short_name(device)}-{datetime.date.today().isoformat()}"
                                   f"{'' if args.kernel == 'fa2' else '-' + args.kernel}.csv")
    try:
        other = _abi.load(args.other) if args.other else None
    except _abi.FlashlabError as e:
        sys.exit(f"--other: {e}")
    print(f"{device}, torch {torch.__version__}, {lib.path}" + (f", other {other.path}" if other else ""), flush=True)
    timer = Timer(torch)
    rows = []
    for pas in args.passes.split(","):
        for d in map(int, args.hdims.split(",")):
            for s in map(int, args.seqlens.split(",")):
                cases = mask_cases(s, args)
                if pas == args.passes.split(",")[0] and d == int(args.hdims.split(",")[0]):
                    for name, _, _, _, text in cases:
                        print(f"  s={s} {name}: {text}", flush=True)
                rows += measure(torch, timer, device, pas, d, s, cases, args, other)
                torch.cuda.empty_cache()
    fields = list(dict.fromkeys(key for r in rows for key in r))
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    print()
    print(table(rows))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
