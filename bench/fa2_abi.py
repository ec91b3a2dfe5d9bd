"""flashlab's fa2 through its C ABI (libflashlab_gpu_c.so) on PyTorch tensors, for the GPU scripts.

gpu_compare.py, ab_libs.py, ncu_kernels.py and simulator/validation/measure_flashlab.py all call the
kernels this way: contiguous (batch, seqlen, heads, head_dim) bf16 tensors, LSE as (batch, heads,
seqlen) fp32, scale 1/sqrt(head_dim), causal (bottom-right) or no mask, no softcap, on PyTorch's
current stream.
"""
import ctypes


def load(path):
    """The library, its two entry points returning int. ctypes loads it RTLD_LOCAL, so two builds of it
    can be loaded side by side (ab_libs.py)."""
    lib = ctypes.CDLL(path)
    lib.flashlab_forward.restype = lib.flashlab_backward.restype = ctypes.c_int
    return lib


class Fa2:
    """fa2's forward (q, k, v -> o, lse) and backward (+ do -> dq, dk, dv) on one set of tensors; with
    kernel=b"fa3", fa3's (Hopper only)."""

    def __init__(self, torch, lib, q, k, v, o, lse, causal, grads=None, deterministic=False, kernel=b"fa2"):
        b, s, h, d = q.shape
        self.lib, self.deterministic, self.kernel = lib, int(deterministic), kernel
        self.err = ctypes.create_string_buffer(512)
        self.stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.shape = (b, s, s, h, h, d, 2, ctypes.c_float(d ** -0.5), -1, 0 if causal else -1, ctypes.c_float(0.0))
        self.fwd_ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, lse)]
        self.grad_ptrs = [ctypes.c_void_p(t.data_ptr()) for t in grads] if grads else None  # do, dq, dk, dv

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def forward(self):
        self._check(self.lib.flashlab_forward(self.kernel, *self.fwd_ptrs, *self.shape, self.stream, self.err, 512))

    def backward(self):
        self._check(self.lib.flashlab_backward(self.kernel, *self.fwd_ptrs, *self.grad_ptrs, *self.shape,
                                               self.deterministic, self.stream, self.err, 512))

    def forward_backward(self):
        self.forward()
        self.backward()
