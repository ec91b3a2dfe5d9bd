"""One cell of the anchors' sweep (ANCHORS.md: bf16, batch x seqlen = 16k, heads x d = 2048) as calls of
flashlab's fa3 (through the C ABI, bench/fa2_abi.py) and of SDPA's cuDNN backend on the same tensors, for the
probes that time the two side by side (power_clocks.py, l2_regimes.py).

A cell is written pass:head_dim:seqlen:causal, e.g. fwd+bwd:128:1024:0.
"""
import csv
import sys

from fa2_abi import Fa2


def parse(spec):
    """(pass, head_dim, seqlen, causal) of a cell, or ValueError saying what is wrong with it."""
    parts = spec.split(":")
    if len(parts) != 4 or not all(x.isdigit() for x in parts[1:]):
        raise ValueError(f"cell {spec!r}: write pass:head_dim:seqlen:causal, e.g. fwd+bwd:128:1024:0")
    pas, d, s, causal = parts
    if pas not in ("fwd", "fwd+bwd"):
        raise ValueError(f"cell {spec}: the pass is fwd or fwd+bwd")
    d, s = int(d), int(s)
    if s <= 0 or 16384 % s or d <= 0 or 2048 % d:
        raise ValueError(f"cell {spec}: seqlen must divide 16384 and head_dim 2048")
    return pas, d, s, causal == "1"


def cells_or_exit(specs, prog):
    """The comma-separated cells, every one checked before any runs: a bad one exits with its message."""
    try:
        for spec in specs.split(","):
            parse(spec)
    except ValueError as e:
        sys.exit(f"{prog}: {e}")
    return specs.split(",")


def write_csv(path, rows):
    """The probes' rows, one a line, the first row's keys as the header."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


class Cell:
    """The tensors of one cell, `flops` by ANCHORS.md's count (forward + backward 3.5x the forward), `calls`
    ({"fa3": fn, "cudnn": fn}) and `reset()`, which clears the autograd leaves' gradients between cuDNN's
    forward + backward calls (host work only; callers keep it outside what they time)."""

    def __init__(self, torch, lib, spec):
        pas, d, s, causal = parse(spec)
        self.pas, self.d, self.s, self.causal = pas, d, s, causal
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        b, h = 16384 // s, 2048 // d
        gen = torch.Generator(device="cuda").manual_seed(s + d)
        q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
        o, lse = torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        fa3 = Fa2(torch, lib, q, k, v, o, lse, causal, grads=(do,) + tuple(torch.empty_like(q) for _ in range(3)),
                  kernel=b"fa3")
        self.leaves = [x.transpose(1, 2).detach().requires_grad_(pas != "fwd") for x in (q, k, v)]
        qt, kt, vt = self.leaves
        dot = do.transpose(1, 2)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                if pas != "fwd":
                    out.backward(dot)

        self.flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0) * (1.0 if pas == "fwd" else 3.5)
        self.calls = {"fa3": fa3.forward if pas == "fwd" else fa3.forward_backward, "cudnn": cudnn}

    def reset(self):
        for x in self.leaves:
            x.grad = None
