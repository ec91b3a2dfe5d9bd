"""flashlab attention as PyTorch custom ops (PyTorch >= 2.4: torch.library.custom_op).

  torch.ops.flashlab.fwd(q, k, v, ...) -> (out, softmax_lse)         the forward, any device
  torch.ops.flashlab.bwd(dout, q, k, v, out, softmax_lse, ...) -> (dq, dk, dv)

Each op is opaque to torch.compile: a fake implementation (register_fake) gives its output shapes, so
torch.compile(fullgraph=True) traces a model through it without a graph break, and register_autograd
makes bwd the forward's gradient (what loss.backward() runs). CUDA tensors run a GPU kernel on their
own memory and PyTorch's current stream (impl "fa2" unless told: "fa3", "standard"; the backward is
fa3's after an fa3 forward where it takes the problem, else fa2's); CPU tensors run a CPU implementation
("tiled-fa2" unless told).

A mask (flash_attn_func's mask=(kind, value)) travels as three arguments a schema can hold, the last of
each op's: mask_kind (flashlab_mask_kind: 1 prefix-lm, 2 document, 3 chunked, 4 dense), mask_values (the
prefix lengths, the document lengths, or [chunk]) and dense_mask (a bool tensor on q's device, copied to
the host per call: the C ABI reads the bits from host memory).

Two registrations of the same two ops (_cpp_ops.py picks one, FLASHLAB_TORCH_OPS overrides):
  C++     csrc/ops.cpp defines them (TORCH_LIBRARY) with their CUDA kernels and fwd's autograd; this module
          adds the CPU kernels (the Python bodies below) and the fake implementations. A call on CUDA
          tensors never enters Python.
  Python  torch.library.custom_op over the same bodies, fakes and autograd (the fallback where the C++
          ops cannot be built: no compiler, ninja or CUDA headers).
BACKEND says which is active ("cpp" or "python"), WHY_NOT_CPP why the C++ one is not.

Importing this module imports torch and registers the ops; flashlab.flash_attn_func imports it on the
first torch tensor it sees (under torch.compile the import runs eagerly, outside the traced graph).
"""
import contextlib
import ctypes
import functools
import inspect
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _abi, _checks, _cpp_ops
from ._problem import ProblemArgs

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"flashlab's torch ops need PyTorch >= 2.4 (torch.library.custom_op); this is torch "
                      f"{torch.__version__}. numpy arrays work without torch: flashlab.flash_attn_func(q_np, k_np, v_np)")

_PRECISION = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
# fa3-pack-gqa / fa3-no-pack-gqa: fa3 with PackGQA asked for or refused (flash_attn_func's pack_gqa)
FA3_KERNELS = ("fa3", "fa3-pack-gqa", "fa3-no-pack-gqa")
DEVICE_KERNELS = ("fa2", "standard") + FA3_KERNELS
DEFAULT_DEVICE_IMPL = "fa2"
DEFAULT_HOST_IMPL = "tiled-fa2"
HOST_BACKWARD = ("reference", "tiled-fa1", "tiled-fa2", "gpu-fa2", "gpu-fa2-deterministic")


# ---- the problem struct, cached: a call of the same shapes and options builds it once

@functools.lru_cache(maxsize=512)
def _problem(batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, head_dim_v, precision, causal, window_left,
             window_right, scale, softcap, slopes, dropout_p, seed, cu_q, cu_k, mask=None):
    return ProblemArgs(batch=batch, heads_q=heads_q, heads_kv=heads_kv, seqlen_q=seqlen_q, seqlen_k=seqlen_k,
                       head_dim=head_dim, head_dim_v=head_dim_v, dtype=precision, causal=causal,
                       window_size=(window_left, window_right), softmax_scale=scale or None, softcap=softcap,
                       alibi_slopes=slopes, dropout_p=dropout_p, seed=seed, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                       mask=mask)


_KIND_NAMES = {number: name for name, number in _abi.MASK_KINDS.items()}
_MASK_DENSE = _abi.MASK_KINDS["dense"]


def _mask_of(mask_kind, mask_values, dense_mask):
    """The op's three mask arguments back as ProblemArgs' (kind, value), or None without a mask."""
    if mask_kind == 0:
        return None
    if mask_kind not in _KIND_NAMES:
        raise ValueError(f"mask_kind {mask_kind}: expected 0 (none), 1 (prefix-lm), 2 (document), 3 (chunked) or "
                         "4 (dense)")
    kind, values = _KIND_NAMES[mask_kind], [int(x) for x in mask_values or ()]
    if kind == "dense":
        if dense_mask is None:
            raise ValueError("mask_kind 4 (dense) needs dense_mask, a bool tensor (sq, sk) or "
                             "(batch|1, heads|1, sq, sk)")
        return kind, dense_mask
    if kind == "chunked":
        if len(values) != 1:
            raise ValueError(f"mask_kind 3 (chunked) takes mask_values=[chunk size], got {values}")
        return kind, values[0]
    return kind, tuple(values)


def _problem_of(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, scale, causal, wl, wr, softcap, alibi, seed,
                mask_kind=0, mask_values=None, dense_mask=None):
    shapes = _checks.attention_shapes(q, k, v, cu_q, cu_k, max_q, max_k)
    cu_q_host = None if cu_q is None else tuple(cu_q.tolist())  # varlen: the offsets on the host (a sync on CUDA)
    cu_k_host = None if cu_k is None else tuple(cu_k.tolist())
    if shapes.varlen:  # the offsets must end at q's and k's rows, or a kernel would read past them
        _checks.check_offsets(cu_q_host, cu_k_host, shapes)
    slopes = None if alibi is None else tuple(float(x) for x in alibi.tolist())
    mask = _mask_of(mask_kind, mask_values, dense_mask)
    # a dense mask's bits are read fresh each call (not a cache key); everything else is cached
    build = _problem.__wrapped__ if mask is not None and mask[0] == "dense" else _problem
    problem = build(int(shapes.batch), int(shapes.heads_q), int(shapes.heads_kv), int(shapes.seqlen_q),
                    int(shapes.seqlen_k), int(shapes.head_dim), int(shapes.head_dim_v), _PRECISION[q.dtype],
                    causal, wl, wr, scale, softcap, slopes, dropout_p, seed, cu_q_host, cu_k_host, mask)
    return shapes, problem


def _call(entry, impl, problem, pointers, stream=None, cu_q=None, cu_k=None, deterministic=False):
    t = _abi.new_tensors()
    for name, ptr in pointers.items():
        setattr(t, name, ptr)
    if cu_q is not None:
        t.cu_seqlens_q_device, t.cu_seqlens_k_device = cu_q.data_ptr(), cu_k.data_ptr()
    t.stream = stream
    t.deterministic = int(deterministic)
    _abi.call(getattr(_abi.lib(), entry), impl.encode(), problem.ref, ctypes.byref(t))


def _stream(x):
    return torch.cuda.current_stream(x.device).cuda_stream


def _device_of(x):
    """The tensor's GPU made current for the call; a no-op (and no cost) when it already is."""
    if x.device.index is None or x.device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(x.device)


def _host_f32(x):
    return x.detach().to(torch.float32).contiguous()


# ---- the forward: the Python body (every device on the Python path, the CPU kernel on the C++ path)

# fwd's options come most used first, each with its default (flash-attn's), so that a caller passes only the
# few it sets: every argument not passed saves its conversion at the op's call (~0.2 us each; python/README.md).
# impl "" is the device's default: fa2 on CUDA tensors, tiled-fa2 on the CPU.
def _resolved_impl(impl, x):
    """impl "" (the op's default) as the implementation for x's device."""
    return impl or (DEFAULT_DEVICE_IMPL if x.is_cuda else DEFAULT_HOST_IMPL)


def _fwd_body(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, softmax_scale: float = 0.0,
              window_left: int = -1, window_right: int = -1, softcap: float = 0.0, dropout_p: float = 0.0,
              seed: int = 0, alibi_slopes: Optional[Tensor] = None, cu_seqlens_q: Optional[Tensor] = None,
              cu_seqlens_k: Optional[Tensor] = None, max_seqlen_q: int = 0, max_seqlen_k: int = 0, impl: str = "",
              deterministic: bool = False, mask_kind: int = 0, mask_values: Optional[List[int]] = None,
              dense_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    impl = _resolved_impl(impl, q)
    if not q.is_cuda:  # the op called directly on CPU tensors: the checks flash_attn_func makes first
        _check_tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, impl)
    shapes, problem = _problem_of(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                  softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, seed,
                                  mask_kind, mask_values, dense_mask)
    lse = torch.empty(shapes.lse_shape(), dtype=torch.float32, device=q.device)
    if q.is_cuda:
        out = q.new_empty(shapes.o_shape())
        with _device_of(q):
            _call("flashlab_forward_v1", impl, problem,
                  dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(), lse=lse.data_ptr()),
                  _stream(q), cu_seqlens_q, cu_seqlens_k)
        return out, lse
    qh, kh, vh = _host_f32(q), _host_f32(k), _host_f32(v)
    out = torch.empty(shapes.o_shape(), dtype=torch.float32)
    _call("flashlab_forward_v1", impl, problem,
          dict(q=qh.data_ptr(), k=kh.data_ptr(), v=vh.data_ptr(), o=out.data_ptr(), lse=lse.data_ptr()))
    return out.to(q.dtype), lse


def _fwd_fake(q, k, v, causal=False, softmax_scale=0.0, window_left=-1, window_right=-1, softcap=0.0, dropout_p=0.0,
              seed=0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, impl="",
              deterministic=False, mask_kind=0, mask_values=None, dense_mask=None):
    impl = _resolved_impl(impl, q)
    if cu_seqlens_q is None and cu_seqlens_k is None:
        # what flash_attn_func's fast path (C++ ops, CUDA, fixed length) leaves to the op, checked at trace time
        _check_tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, impl)
        _checks.attention_shapes(q, k, v)
    if cu_seqlens_q is None:  # (batch, seqlen_q, heads_q, headdim_v), LSE (batch, heads_q, seqlen_q)
        out_shape = (q.shape[0], q.shape[1], q.shape[2], v.shape[-1])
        lse_shape = (q.shape[0], q.shape[2], q.shape[1])
    else:                     # (total_q, heads_q, headdim_v), LSE (heads_q, total_q)
        out_shape = (q.shape[0], q.shape[1], v.shape[-1])
        lse_shape = (q.shape[1], q.shape[0])
    return q.new_empty(out_shape), q.new_empty(lse_shape, dtype=torch.float32)


# ---- the backward: the Python body, as the forward's

def _bwd_body(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, softmax_lse: Tensor,
              cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
              dropout_p: float, softmax_scale: float, causal: bool, window_left: int, window_right: int,
              softcap: float, alibi_slopes: Optional[Tensor], seed: int, impl: str,
              deterministic: bool, mask_kind: int = 0, mask_values: Optional[List[int]] = None,
              dense_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    _, problem = _problem_of(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                             softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, seed,
                             mask_kind, mask_values, dense_mask)
    if q.is_cuda:
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        with _device_of(q):
            _call("flashlab_backward_v1", impl, problem,
                  dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(), lse=softmax_lse.data_ptr(),
                       d_o=dout.data_ptr(), dq=dq.data_ptr(), dk=dk.data_ptr(), dv=dv.data_ptr()),
                  _stream(q), cu_seqlens_q, cu_seqlens_k, deterministic)
        return dq, dk, dv
    hosts = [_host_f32(x) for x in (q, k, v, out, softmax_lse, dout)]
    grads = [torch.empty(x.shape, dtype=torch.float32) for x in hosts[:3]]
    _call("flashlab_backward_v1", impl, problem,
          dict(zip(("q", "k", "v", "o", "lse", "d_o", "dq", "dk", "dv"), [x.data_ptr() for x in hosts + grads])))
    return tuple(g.to(q.dtype) for g in grads)


def _bwd_fake(dout, q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
              softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, seed, impl, deterministic,
              mask_kind=0, mask_values=None, dense_mask=None):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


# ---- autograd: the forward's inputs and outputs kept, bwd run on dout

def _backward_impl(impl, on_cuda, head_dim, dropout_p, alibi, mask_kind=0):
    if on_cuda:  # fa3's own where its backward takes the problem (head dims up to 256, no ALiBi, dropout or dense mask)
        fa3 = impl in FA3_KERNELS and head_dim <= 256 and dropout_p == 0 and alibi is None and mask_kind != _MASK_DENSE
        return "fa3" if fa3 else "fa2"  # standard has no backward: fa2's is the GPU backward
    return impl if impl in HOST_BACKWARD else DEFAULT_HOST_IMPL


def _setup_context(ctx, inputs, output):
    (q, k, v, causal, scale, wl, wr, softcap, dropout_p, seed, alibi, cu_q, cu_k, max_q, max_k, impl,
     deterministic, mask_kind, mask_values, dense_mask) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, alibi, dense_mask)
    ctx.options = (max_q, max_k, dropout_p, scale, causal, wl, wr, softcap)
    ctx.seed, ctx.deterministic = seed, deterministic
    ctx.mask_kind, ctx.mask_values = mask_kind, mask_values
    ctx.impl = _backward_impl(impl, q.is_cuda, q.shape[-1], dropout_p, alibi, mask_kind)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, alibi, dense_mask = ctx.saved_tensors
    max_q, max_k, dropout_p, scale, causal, wl, wr, softcap = ctx.options
    if dout is None:  # only the LSE was used downstream; its gradient is not propagated (as in flash-attn)
        dout = torch.zeros_like(out)
    dq, dk, dv = torch.ops.flashlab.bwd.default(dout.contiguous(), q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                                dropout_p, scale, causal, wl, wr, softcap, alibi, ctx.seed, ctx.impl,
                                                ctx.deterministic, ctx.mask_kind, ctx.mask_values, dense_mask)
    # one gradient per forward input: q, k, v, then none for the 17 options
    return (dq, dk, dv) + (None,) * 17


# ---- the registration: C++ when it builds (CPU kernels and fakes added here), else the Python custom ops

BACKEND, WHY_NOT_CPP = _cpp_ops.choose(torch)
if BACKEND == "cpp":
    torch.library.impl("flashlab::fwd", "CPU", _fwd_body)
    torch.library.impl("flashlab::bwd", "CPU", _bwd_body)
    torch.library.register_fake("flashlab::fwd", _fwd_fake)
    torch.library.register_fake("flashlab::bwd", _bwd_fake)
else:
    fwd = torch.library.custom_op("flashlab::fwd", _fwd_body, mutates_args=())
    fwd.register_fake(_fwd_fake)
    fwd.register_autograd(_backward, setup_context=_setup_context)
    bwd = torch.library.custom_op("flashlab::bwd", _bwd_body, mutates_args=())
    bwd.register_fake(_bwd_fake)
_fwd = torch.ops.flashlab.fwd.default  # what flash_attn_func calls, either way
# fwd's options after q, k, v and their defaults, in the schema's order (read off _fwd_body's signature)
_FWD_DEFAULTS = tuple(p.default for p in inspect.signature(_fwd_body).parameters.values())[3:]


def _without_trailing_defaults(options):
    """fwd's options with the trailing ones that equal their defaults left off (the op fills them in)."""
    n = len(options)
    while n and (options[n - 1] is None if _FWD_DEFAULTS[n - 1] is None else
                 type(options[n - 1]) is type(_FWD_DEFAULTS[n - 1]) and options[n - 1] == _FWD_DEFAULTS[n - 1]):
        n -= 1
    return options[:n]


# ---- flash-attn's signature over the op, with its checks (traced by torch.compile: plain Python on shapes)

def _check_tensors(q, k, v, cu_q, cu_k, impl):
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"q is a torch.Tensor but {name} is {type(x).__name__}: pass q, k, v as tensors")
        if x.device != q.device:
            raise ValueError(f"q is on {q.device} but {name} is on {x.device}: move q, k, v to one device")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"dtype {q.dtype} is not supported: cast q, k, v to torch.bfloat16, torch.float16 or "
                        "torch.float32 (e.g. q.to(torch.bfloat16))")
    if q.is_cuda:
        if impl not in DEVICE_KERNELS:
            raise ValueError(f"impl={impl!r} is a CPU implementation and q, k, v are CUDA tensors: use impl='fa2', "
                             "'fa3' or 'standard', or move the tensors with .cpu()")
        if impl != "standard" and q.dtype == torch.float32:
            raise TypeError(f"{impl} runs bf16 and fp16 on the GPU, and q is float32: cast q, k, v with "
                            ".to(torch.bfloat16) (or use impl='standard')")
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not x.is_contiguous():
                raise ValueError(f"{name} is not contiguous (shape {tuple(x.shape)}, strides {x.stride()}): the GPU "
                                 f"kernels read contiguous tensors; pass {name}.contiguous()")
        for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
            if cu is not None and (cu.dtype != torch.int32 or cu.device != q.device):
                raise TypeError(f"{name} is {cu.dtype} on {cu.device}: the kernels take int32 offsets on q's device "
                                f"({q.device}): pass {name}.to(device=q.device, dtype=torch.int32)")
    elif impl in DEVICE_KERNELS:
        raise ValueError(f"impl={impl!r} runs on CUDA tensors and q is on {q.device}: move q, k, v with .cuda(), or "
                         "use a CPU implementation (tiled-fa2, tiled-fa1, reference)")


def _mask_args(mask, q):
    """flash_attn_func's mask=(kind, value) as the op's (mask_kind, mask_values, dense_mask)."""
    if mask is None:
        return 0, None, None
    _checks.check_mask(mask)
    kind, value = mask
    if kind == "dense":
        dense = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        if len(dense.shape) not in (2, 4):
            raise ValueError(f"a dense mask has shape (sq, sk) or (batch|1, heads|1, sq, sk), got {tuple(dense.shape)}")
        return _abi.MASK_KINDS[kind], None, dense.to(device=q.device, dtype=torch.bool)
    values = list(value) if hasattr(value, "__len__") else [value]  # one prefix, or one per batch entry
    return _abi.MASK_KINDS[kind], [int(x) for x in values], None


def attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
              window_size, softcap, alibi_slopes, deterministic, return_attn_probs, impl, seed, mask=None):
    given_impl = impl or ""  # "" lets the op choose the device's default
    impl = _resolved_impl(impl, q)
    if BACKEND == "cpp" and q.is_cuda and cu_seqlens_q is None and cu_seqlens_k is None:
        # the fast path: the C++ op checks the tensors, their shapes and the slopes itself (csrc/ops.cpp, in
        # these words); what is left here are the tensors' types and the options it takes as plain numbers
        for name, x in (("k", k), ("v", v)):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"q is a torch.Tensor but {name} is {type(x).__name__}: pass q, k, v as tensors")
    else:  # the Python ops, CPU tensors and varlen (which syncs anyway): every check before the op
        _check_tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, impl)
        shapes = _checks.attention_shapes(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        _checks.check_alibi_shape(alibi_slopes, shapes)
    _checks.check_window(window_size)
    if softmax_scale is not None and not softmax_scale > 0:
        raise ValueError(f"softmax_scale must be a positive number or None (1/sqrt(headdim)), got {softmax_scale}")
    options = (bool(causal), float(softmax_scale or 0.0), int(window_size[0]), int(window_size[1]), float(softcap),
               float(dropout_p), int(seed), alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q or 0,
               max_seqlen_k or 0, given_impl, bool(deterministic)) + _mask_args(mask, q)
    out, lse = _fwd(q, k, v, *_without_trailing_defaults(options))
    return (out, lse, None) if return_attn_probs else out
