"""flash-attn's entry points with its names and conventions, on numpy arrays or torch tensors.

  flash_attn_func(q, k, v, ...)                                    q (batch, seqlen_q, nheads, headdim)
  flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ...) q (total_q, nheads, headdim)
  flash_attn_backward(dout, q, k, v, out, softmax_lse, ...)       numpy only; torch gets it from autograd

numpy arrays run a CPU implementation (impl="tiled-fa2" unless told: also "reference", "tiled-fa1", ...).
torch tensors go through the custom op torch.ops.flashlab.fwd (torch_ops.py; CUDA tensors run impl="fa2"
unless told: "fa3", "standard"; CPU tensors a CPU implementation). flashlab's own keyword arguments beyond
flash-attn's: impl, seed (dropout's), mask and pack_gqa. With return_attn_probs the third value is None:
flashlab never materializes the attention matrix.

pack_gqa (impl="fa3" on CUDA tensors, FA3's option): True packs the query heads that share a kv head into
one tile of fa3's forward (it raises where they cannot be), False never does, None (the default) lets
fa3 choose by FA3's rule. The backward is fa3's either way. FA3's FP8 forward is flash_attn_fp8_func
(fp8.py).

mask=(kind, value) adds a mask function to causal / window (core/include/flashlab/mask.hpp has the
definitions; diag(i) = i + seqlen_k - seqlen_q, bottom-right as for causal):
  ("prefix-lm", n)         j < n or j <= diag(i): full attention within the prefix, causal after; n an int,
                           or one per batch entry. Already causal: not with causal=True or a window.
  ("document", lengths)    doc(i) == doc(j): packed documents of these lengths (summing to seqlen_q ==
                           seqlen_k), each attending only to itself; with causal=True causal within it too.
  ("chunked", size)        local attention in chunks of `size` keys, causal within each; not with causal=True
                           or a window.
  ("dense", bits)          a boolean array (seqlen_q, seqlen_k) or (batch|1, heads|1, seqlen_q, seqlen_k), true
                           where a query may attend; with causal / window both must allow a key.
document and dense take fixed-length batches only (not flash_attn_varlen_func). On the GPU fa2 runs every
kind forward and backward, fa3 forward (its backward is then fa2's), both on fixed-length batches only. A
mask the library cannot take raises with its reason.
"""
from . import _checks
from ._problem import ProblemArgs

try:
    from numpy import ndarray as _ndarray
except ImportError:  # without numpy nothing is an ndarray, and torch tensors still work
    class _ndarray:
        pass

DEFAULT_HOST_IMPL = "tiled-fa2"


def _is_numpy(x):
    # isinstance against a class, which torch.compile's tracer evaluates for a tensor (False) without a break
    return isinstance(x, _ndarray)


def _numpy_only(name, *arrays):
    for label, x in arrays:
        if x is not None and not isinstance(x, _ndarray):
            raise TypeError(f"{name}: q is a numpy array but {label} is {type(x).__name__}: pass every tensor as "
                            "a numpy array, or every one as a torch tensor")


def _with_pack_gqa(impl, pack_gqa, numpy):
    """impl with PackGQA asked for (True) or refused (False): the device kernel names fa3-pack-gqa and
    fa3-no-pack-gqa; None leaves impl as it is."""
    if pack_gqa is None:
        return impl
    if numpy or impl != "fa3":
        raise ValueError(f"pack_gqa is fa3's option on CUDA tensors (impl='fa3'); this call runs "
                         f"{'numpy arrays' if numpy else 'impl=' + repr(impl)}: leave pack_gqa=None")
    return "fa3-pack-gqa" if pack_gqa else "fa3-no-pack-gqa"


def _problem(shapes, precision, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, seed,
             cu_seqlens_q=None, cu_seqlens_k=None, mask=None):
    _checks.check_window(window_size)
    _checks.check_mask(mask)
    _checks.check_mask_integers(mask)
    _checks.check_alibi_shape(alibi_slopes, shapes)
    slopes = None if alibi_slopes is None else [float(s) for s in alibi_slopes]
    return ProblemArgs(batch=shapes.batch, heads_q=shapes.heads_q, heads_kv=shapes.heads_kv,
                       seqlen_q=shapes.seqlen_q, seqlen_k=shapes.seqlen_k, head_dim=shapes.head_dim,
                       head_dim_v=shapes.head_dim_v, dtype=precision, causal=causal, window_size=window_size,
                       softmax_scale=softmax_scale, softcap=softcap, alibi_slopes=slopes, dropout_p=dropout_p,
                       seed=seed, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, mask=mask)


def _numpy_forward(name, q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal, window_size, softcap,
                   alibi_slopes, return_attn_probs, impl, seed, mask):
    from . import _host
    _numpy_only(name, ("k", k), ("v", v))
    shapes = _checks.attention_shapes(q, k, v, cu_q, cu_k, max_q, max_k)
    cu_q = None if cu_q is None else [int(x) for x in cu_q]
    cu_k = None if cu_k is None else [int(x) for x in cu_k]
    if shapes.varlen:
        _checks.check_offsets(cu_q, cu_k, shapes)
    problem = _problem(shapes, _host.precision_of(q), dropout_p, softmax_scale, causal, window_size, softcap,
                       alibi_slopes, seed, cu_q, cu_k, mask)
    out, lse = _host.forward(impl or DEFAULT_HOST_IMPL, problem, shapes, q, k, v)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False, *, impl=None, seed=0,
                    mask=None, pack_gqa=None):
    """Attention over q (batch, seqlen_q, nheads, headdim), k, v (batch, seqlen_k, nheads_k, headdim[_v]).
    Returns out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse (batch, nheads, seqlen_q), None)
    with return_attn_probs. mask=(kind, value): a mask function beyond causal / window, as the module
    docstring says: ("prefix-lm", n or [n per batch entry]), ("document", [lengths]), ("chunked", size),
    ("dense", bool array (seqlen_q, seqlen_k) or (batch|1, nheads|1, seqlen_q, seqlen_k))."""
    impl = _with_pack_gqa(impl, pack_gqa, _is_numpy(q))
    if _is_numpy(q):
        return _numpy_forward("flash_attn_func", q, k, v, None, None, None, None, dropout_p, softmax_scale, causal,
                              window_size, softcap, alibi_slopes, return_attn_probs, impl, seed, mask)
    from . import torch_ops
    return torch_ops.attention(q, k, v, None, None, None, None, dropout_p, softmax_scale, causal, window_size,
                               softcap, alibi_slopes, deterministic, return_attn_probs, impl, seed, mask)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, *, impl=None, seed=0, mask=None,
                           pack_gqa=None):
    """Attention over packed sequences: q (total_q, nheads, headdim), k, v (total_k, nheads_k, headdim[_v]),
    sequence b's tokens at rows cu_seqlens[b]:cu_seqlens[b+1] (int32, batch + 1 entries). Returns out
    (total_q, nheads, headdim_v), or (out, softmax_lse (nheads, total_q), None) with return_attn_probs.
    mask: as flash_attn_func's, applied to each sequence (diag(i) from its own lengths); prefix-lm and
    chunked only (document and dense masks describe fixed-length batches), and on the CPU only (the GPU
    kernels take masks on fixed-length batches)."""
    impl = _with_pack_gqa(impl, pack_gqa, _is_numpy(q))
    if _is_numpy(q):
        return _numpy_forward("flash_attn_varlen_func", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                              return_attn_probs, impl, seed, mask)
    from . import torch_ops
    return torch_ops.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                               softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                               return_attn_probs, impl, seed, mask)


def flash_attn_backward(dout, q, k, v, out, softmax_lse, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                        max_seqlen_k=None, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                        softcap=0.0, alibi_slopes=None, *, impl=None, seed=0, mask=None):
    """The backward on numpy arrays: (dq, dk, dv) shaped like q, k, v, from the forward's out and softmax_lse
    and the upstream gradient dout. The same options as the forward, mask included (varlen when cu_seqlens
    are given)."""
    from . import _host
    if not _is_numpy(q):
        raise TypeError("flash_attn_backward takes numpy arrays; with torch tensors call .backward() on the "
                        "output of flash_attn_func (the custom op has the backward registered)")
    _numpy_only("flash_attn_backward", ("k", k), ("v", v), ("out", out), ("softmax_lse", softmax_lse),
                ("dout", dout))
    shapes = _checks.attention_shapes(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    for name, x, want in (("out", out, shapes.o_shape()), ("dout", dout, shapes.o_shape()),
                          ("softmax_lse", softmax_lse, shapes.lse_shape())):
        if tuple(x.shape) != want:
            raise ValueError(f"{name} has shape {tuple(x.shape)}; expected {want} (as the forward returned it)")
    cu_q = None if cu_seqlens_q is None else [int(x) for x in cu_seqlens_q]
    cu_k = None if cu_seqlens_k is None else [int(x) for x in cu_seqlens_k]
    if shapes.varlen:
        _checks.check_offsets(cu_q, cu_k, shapes)
    problem = _problem(shapes, _host.precision_of(q), dropout_p, softmax_scale, causal, window_size, softcap,
                       alibi_slopes, seed, cu_q, cu_k, mask)
    return _host.backward(impl or DEFAULT_HOST_IMPL, problem, shapes, dout, q, k, v, out, softmax_lse)
