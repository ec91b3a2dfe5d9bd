"""Input checks shared by the numpy path and the torch op: shapes in flash-attn's layout, one dtype and
one device for q, k, v, GQA divisibility, varlen offsets. Every error says what was passed and what to
change. Works on anything with .shape and .dtype (numpy arrays, torch tensors, fake tensors under
torch.compile), so the checks run before any memory is touched."""
import numbers
from typing import NamedTuple

from ._abi import MASK_KINDS


# A named tuple rather than a dataclass: torch.compile's tracer builds and reads it without a graph break.
class Shapes(NamedTuple):
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    head_dim_v: int
    total_q: int
    total_k: int
    varlen: bool

    def o_shape(self):
        if self.varlen:
            return (self.total_q, self.heads_q, self.head_dim_v)
        return (self.batch, self.seqlen_q, self.heads_q, self.head_dim_v)

    def lse_shape(self):
        return (self.heads_q, self.total_q) if self.varlen else (self.batch, self.heads_q, self.seqlen_q)


def _shape(x):
    # no int(): under torch.compile the sizes may be symbolic, and int() would pin them
    return tuple(x.shape) if hasattr(x, "shape") else (len(x),)


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def attention_shapes(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """Checks q, k, v (and the varlen offsets) against each other; returns their Shapes."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise ValueError("flash_attn_varlen_func needs both cu_seqlens_q and cu_seqlens_k")
    rank = 3 if varlen else 4
    layout = "(total_tokens, nheads, headdim)" if varlen else "(batch, seqlen, nheads, headdim)"
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(x.shape) != rank:
            raise ValueError(f"{name} has shape {_shape(x)}; {'flash_attn_varlen_func' if varlen else 'flash_attn_func'} "
                             f"takes {layout}" + ("" if varlen else
                             " (for packed sequences use flash_attn_varlen_func)"))
        if any(n == 0 for n in x.shape):
            raise ValueError(f"{name} has shape {_shape(x)}: every dimension must be at least 1")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}: cast them to one "
                        "(e.g. all float16)")
    qs, ks, vs = _shape(q), _shape(k), _shape(v)
    if ks[:-1] != vs[:-1]:
        raise ValueError(f"k {ks} and v {vs} must agree in every dimension but the last (headdim)")
    if qs[-1] != ks[-1]:
        raise ValueError(f"q's headdim {qs[-1]} differs from k's {ks[-1]}: q and k must have the same headdim")
    heads_q, heads_kv = qs[-2], ks[-2]
    if heads_q % heads_kv != 0:
        raise ValueError(f"q has {heads_q} heads and k, v have {heads_kv}: the query heads must be a multiple of the "
                         f"key/value heads (GQA/MQA); k, v could have {_divisors(heads_q)} heads")
    if not varlen:
        if qs[0] != ks[0]:
            raise ValueError(f"q has batch {qs[0]} but k has {ks[0]}: they must match")
        return Shapes(qs[0], qs[1], ks[1], heads_q, heads_kv, qs[-1], vs[-1], qs[0] * qs[1], ks[0] * ks[1], False)
    batch = len(cu_seqlens_q) - 1
    if len(cu_seqlens_k) - 1 != batch or batch < 1:
        raise ValueError(f"cu_seqlens_q has {len(cu_seqlens_q)} entries and cu_seqlens_k {len(cu_seqlens_k)}: both "
                         "must have batch + 1 entries (batch >= 1)")
    if max_seqlen_q is None or max_seqlen_k is None:
        raise ValueError("flash_attn_varlen_func needs max_seqlen_q and max_seqlen_k (the longest sequence of each)")
    return Shapes(batch, int(max_seqlen_q), int(max_seqlen_k), heads_q, heads_kv, qs[-1], vs[-1], qs[0], ks[0], True)


def check_offsets(cu_q, cu_k, shapes):
    """Varlen offsets (lists of ints) against the packed tensors: they must end at the token counts."""
    for name, cu, total, tensor in (("cu_seqlens_q", cu_q, shapes.total_q, "q"),
                                    ("cu_seqlens_k", cu_k, shapes.total_k, "k")):
        if cu[0] != 0 or cu[-1] != total:
            raise ValueError(f"{name} = {list(cu)[:8]}{'...' if len(cu) > 8 else ''} must start at 0 and end at the "
                             f"{tensor}'s token count {total}")


def check_window(window_size):
    if len(window_size) != 2:
        raise ValueError(f"window_size must be (left, right), got {window_size!r}")
    for side in window_size:
        if int(side) < -1:
            raise ValueError(f"window_size {tuple(window_size)}: each side is -1 (unbounded) or >= 0")


def check_alibi_shape(alibi_slopes, shapes):
    if alibi_slopes is None:
        return
    shape = _shape(alibi_slopes)
    if shape != (shapes.heads_q,):
        raise ValueError(f"alibi_slopes has shape {shape}; flashlab takes one slope per query head: "
                         f"({shapes.heads_q},) (per-batch slopes (batch, nheads) are not supported)")


def check_mask(mask):
    """mask=(kind, value) as flash_attn_func takes it: the pair's form is checked here, its values (lengths
    against seqlen, the dense shape, what it combines with) by the library, whose message says what is wrong."""
    if mask is None:
        return
    if not isinstance(mask, (tuple, list)) or len(mask) != 2:
        raise ValueError(f"mask must be a (kind, value) pair, e.g. ('chunked', 64) or ('document', [300, 724]), "
                         f"got a {type(mask).__name__}")
    kind, value = mask
    kinds = [name for name in MASK_KINDS if name != "none"]
    if kind not in kinds:
        raise ValueError(f"mask kind {kind!r}: expected one of {', '.join(kinds)}")
    if kind == "dense":
        if not hasattr(value, "shape"):
            raise TypeError(f"a dense mask is a boolean array (sq, sk) or (batch|1, heads|1, sq, sk), got a "
                            f"{type(value).__name__}: pass a numpy array (or a torch tensor with torch tensors)")


def check_mask_integers(mask):
    """The numpy path's check that a built-in kind's values are integers (a float chunk size would be cut
    silently). Not on the torch path, where torch.compile may hand over its integers as SymInts."""
    if mask is None or mask[0] == "dense":
        return
    kind, value = mask
    values = list(value) if hasattr(value, "__len__") else [value]
    if not values or not all(isinstance(x, numbers.Integral) for x in values):
        what = {"prefix-lm": "a prefix length, or one per batch entry", "document": "the document lengths",
                "chunked": "the chunk size"}[kind]
        raise TypeError(f"mask ({kind!r}, {value!r}): {kind} takes integers, {what}")
