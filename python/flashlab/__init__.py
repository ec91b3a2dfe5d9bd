"""flashlab: FlashAttention as a toolkit, from Python.

    import flashlab
    out = flashlab.flash_attn_func(q, k, v, causal=True)            # numpy: a CPU implementation
    flashlab.estimate(seqlen=8192, hdim=128, gpu="h100-sxm")        # the simulator's records
    for event in flashlab.walk(seqlen=128, causal=True): ...        # the tiled executor's events
    flashlab.check("tiled-fa2", seqlen=200, causal=True)            # against the fp64 oracle

On CUDA torch tensors flash_attn_func is the custom op torch.ops.flashlab.fwd (torch_ops.py), with a
backward and a fake implementation for torch.compile; torch is imported only then. Everything runs on
libflashlab.so (capi/), found as _abi.py says. python/README.md walks through it all.
"""
from ._abi import FlashlabError
from .attention import flash_attn_backward, flash_attn_func, flash_attn_varlen_func
from .check import check, implementations
from .estimate import estimate
from .fp8 import flash_attn_fp8_func, quantize_fp8
from .kvcache import flash_attn_with_kvcache
from .walk import walk

__all__ = ["FlashlabError", "check", "estimate", "flash_attn_backward", "flash_attn_fp8_func", "flash_attn_func",
           "flash_attn_varlen_func", "flash_attn_with_kvcache", "implementations", "library_path", "quantize_fp8",
           "walk"]


# torch already loaded (imported before flashlab): register the custom ops now, outside any code
# torch.compile may trace. Otherwise the first torch tensor imports torch_ops; flashlab never imports torch.
if "torch" in __import__("sys").modules:
    try:
        from . import torch_ops  # noqa: F401
    except ImportError:  # torch older than 2.4: numpy arrays still work, torch tensors say what to upgrade
        pass


def library_path():
    """The libflashlab.so this package loaded (loading it if needed)."""
    from . import _abi
    return _abi.lib().path
