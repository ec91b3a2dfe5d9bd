"""FA3's FP8 forward (gpu/fa3, impl "fa3-fp8") on torch tensors: float8 e4m3 q, k, v with one descale a
tensor, a bf16 output, on an sm_90 GPU (H100, H200).

    q8, q_descale = flashlab.quantize_fp8(q)     # e4m3(q / descale), descale = max|q| / 448
    k8, k_descale = flashlab.quantize_fp8(k)
    v8, v_descale = flashlab.quantize_fp8(v)
    out = flashlab.flash_attn_fp8_func(q8, k8, v8, q_descale, k_descale, v_descale, causal=True)

The kernel computes on x = e4m3 x descale, with P in e4m3 for its second GEMM, as FA3's FP8 kernel does;
its error is judged on the dequantized inputs (gpu-fa3-fp8 in the harness, bench/fp8_compare.py). It is a
forward only: FA3's FP8 kernel serves inference and has no backward, so nothing here records a graph.
Descales are Python floats or one-element tensors (a tensor is read back to the host: a synchronization).
Not taken: varlen, masks beyond causal / window, ALiBi, dropout (the library says which).
"""
import ctypes
import math

from . import _abi
from ._problem import ProblemArgs


def quantize_fp8(x):
    """(e4m3 tensor, descale) with descale = max|x| / 448 (1 for an all-zero x): core's fp8.hpp rule, so
    that x's largest magnitude lands on e4m3's largest finite value. Rounding is torch's (to nearest)."""
    import torch

    amax = x.detach().abs().max().float().item()
    descale = amax / 448.0 if amax > 0 else 1.0
    return (x.float() / descale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), descale


def _descale(value, name):
    if hasattr(value, "numel"):
        if value.numel() != 1:
            raise ValueError(f"{name} has {value.numel()} elements: the FP8 forward takes one descale a tensor")
        value = value.item()
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite scale (x = e4m3 x descale), got {value}")
    return value


def flash_attn_fp8_func(q, k, v, q_descale=1.0, k_descale=1.0, v_descale=1.0, softmax_scale=None, causal=False,
                        window_size=(-1, -1), softcap=0.0, return_softmax_lse=False):
    """q (batch, seqlen_q, heads_q, headdim), k and v (batch, seqlen_k, heads_kv, headdim), each a contiguous
    CUDA tensor of torch.float8_e4m3fn; headdim a multiple of 16 up to 256 (run at 128 or 256, zero-padded).
    Returns out (bf16, q's shape), and with return_softmax_lse (out, lse), lse fp32 (batch, heads_q, seqlen_q)."""
    for name, x in (("q", q), ("k", k), ("v", v)):  # before torch is imported: a numpy array is told here
        if not getattr(x, "is_cuda", False):
            raise ValueError(f"{name} must be a CUDA torch tensor (float8_e4m3fn): the FP8 forward runs on an sm_90 "
                             "GPU (gpu-fa3-fp8 in `flashlab check` quantizes host inputs for it)")
    import torch

    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name} is {x.dtype}: the FP8 forward takes torch.float8_e4m3fn "
                            "(flashlab.quantize_fp8(x) gives it and its descale)")
        if x.dim() != 4:
            raise ValueError(f"{name} has shape {tuple(x.shape)}: expected (batch, seqlen, heads, headdim)")
        if not x.is_contiguous():
            raise ValueError(f"{name} is not contiguous: pass {name}.contiguous()")
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not fit: k and v one "
                         "shape, and batch and headdim as q's")
    if q.device != k.device or q.device != v.device:
        raise ValueError("q, k and v must be on one GPU")
    descales = [_descale(x, name) for x, name in ((q_descale, "q_descale"), (k_descale, "k_descale"),
                                                  (v_descale, "v_descale"))]
    batch, seqlen_q, heads_q, head_dim = q.shape
    problem = ProblemArgs(batch=batch, heads_q=heads_q, heads_kv=k.shape[2], seqlen_q=seqlen_q, seqlen_k=k.shape[1],
                          head_dim=head_dim, dtype="bf16", causal=causal, window_size=window_size,
                          softmax_scale=softmax_scale, softcap=softcap)
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr()
    t.descale_q, t.descale_k, t.descale_v = descales
    with torch.cuda.device(q.device):
        t.stream = torch.cuda.current_stream(q.device).cuda_stream
        _abi.call(_abi.lib().flashlab_forward_v1, b"fa3-fp8", problem.ref, ctypes.byref(t))
    return (out, lse) if return_softmax_lse else out
