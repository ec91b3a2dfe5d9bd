"""flashlab.walk: the tiled executor's events, one dict each, exactly the lines of `flashlab trace`.

    for ev in flashlab.walk(seqlen=128, causal=True, order="fa2", br=64, bc=64):
        ...   # {"event": "transfer" | "tile_begin" | "tile_skipped" | "row_stats", "b", "h", "order", "step", ...}

With no tensors the inputs are the random ones the CLI walks (seeded by seed); pass q, k, v (and dout for
a backward order: "bwd", "fa1-bwd", or the deterministic backward's "bwd-dkdv" and "bwd-dq") as numpy
arrays in flash_attn_func's layout to walk your own numbers."""
import json

from . import _abi
from ._spec import problem_from_flags


def walk(seqlen=128, *, order="fa2", br=64, bc=64, q=None, k=None, v=None, dout=None, **flags):
    """Yields the events of one walk (tiled_cpu/events.hpp) as dicts; `flags` are the problem's
    command-line names (batch, heads, kv_heads, hdim, causal, window, softcap, alibi, dropout, seed, dtype)."""
    problem = problem_from_flags(seqlen, **flags)
    tensors, keep = None, []
    if q is not None or k is not None or v is not None:
        import numpy as np
        if q is None or k is None or v is None:
            raise ValueError("walk: pass q, k and v together (or none of them for the random inputs)")
        tensors = _abi.new_tensors()
        for name, x in (("q", q), ("k", k), ("v", v), ("d_o", dout)):
            if x is None:
                continue
            host = np.ascontiguousarray(x, dtype=np.float32)
            keep.append(host)
            setattr(tensors, name, host.ctypes.data)
        expect = {"q": (problem.struct.batch, problem.struct.seqlen_q, problem.struct.heads_q, problem.struct.head_dim)}
        if tuple(q.shape) != expect["q"]:
            raise ValueError(f"walk: q has shape {tuple(q.shape)}, the problem's is {expect['q']}: give seqlen, "
                             "batch, heads and hdim that match the arrays")
    text = _abi.call_text(_abi.lib().flashlab_walk, problem.ref, order.encode(), br, bc, tensors)
    for line in text.splitlines():
        yield json.loads(line)
