"""Attention on numpy arrays: the harness's CPU implementations (reference, tiled-fa1, tiled-fa2, ...)
through libflashlab.so. Arrays of any strides are copied into contiguous float32 (the ABI's host
layout, values rounded to the problem's dtype by the library); outputs come back in the input dtype,
LSE in float32."""
import numpy as np

from . import _abi
from ._problem import ProblemArgs

# numpy dtype -> the precision the CPU implementations emulate (numpy has no bfloat16)
_DTYPES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16"}


def precision_of(array):
    try:
        return _DTYPES[array.dtype]
    except KeyError:
        raise TypeError(f"dtype {array.dtype} is not supported on the CPU path: pass float32 or float16 arrays "
                        f"(e.g. q.astype(np.float32)); flashlab computes in fp32, fp16 or bf16") from None


def _host(array):
    return np.ascontiguousarray(array, dtype=np.float32)


def _ptr(array):
    return array.ctypes.data


DEVICE_KERNELS = ("fa2", "fa3", "fa3-pack-gqa", "fa3-no-pack-gqa", "fa3-fp8", "standard")


def _host_impl(impl):
    if impl in DEVICE_KERNELS:
        harness = "gpu-" + ("fa3" if "pack-gqa" in impl else impl)  # the harness's copy-to-the-GPU name
        raise ValueError(f"impl={impl!r} runs on device memory (CUDA torch tensors); on numpy arrays use a CPU "
                         f"implementation (tiled-fa2, tiled-fa1, reference) or {harness} (copies to the GPU)")
    return impl.encode()


def forward(impl, problem: ProblemArgs, shapes, q, k, v):
    qh, kh, vh = _host(q), _host(k), _host(v)
    o = np.empty(shapes.o_shape(), np.float32)
    lse = np.empty(shapes.lse_shape(), np.float32)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = _ptr(qh), _ptr(kh), _ptr(vh), _ptr(o), _ptr(lse)
    _abi.call(_abi.lib().flashlab_forward_v1, _host_impl(impl), problem.ref, t)
    return o.astype(q.dtype, copy=False), lse


def backward(impl, problem: ProblemArgs, shapes, dout, q, k, v, out, lse):
    inputs = [_host(x) for x in (q, k, v, out, dout)]
    lse_h = _host(lse)
    grads = [np.empty(x.shape, np.float32) for x in inputs[:3]]
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.d_o = (_ptr(x) for x in inputs)
    t.lse = _ptr(lse_h)
    t.dq, t.dk, t.dv = (_ptr(g) for g in grads)
    _abi.call(_abi.lib().flashlab_backward_v1, _host_impl(impl), problem.ref, t)
    return tuple(g.astype(q.dtype, copy=False) for g in grads)
