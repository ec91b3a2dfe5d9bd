"""One attention problem as the C struct (flashlab_problem), from flash-attn's keyword arguments.

Needs no numpy: the estimate and the walk run from plain Python numbers."""
import ctypes
import math

from . import _abi


def _dense_bytes(value):
    """A dense mask's bits, one byte each in C order (nonzero = may attend): a numpy array, or a torch tensor
    on any device (copied to the host; this module imports neither library)."""
    if hasattr(value, "data_ptr"):  # a torch tensor
        bits = (value.cpu() != 0).byte().contiguous()
        return ctypes.string_at(bits.data_ptr(), bits.numel())
    return (value != 0).astype("uint8").tobytes()


class ProblemArgs:
    """A filled flashlab_problem and the ctypes arrays its pointers point into (kept alive with it)."""

    def __init__(self, *, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, head_dim_v=0, dtype="fp32",
                 causal=False, window_size=(-1, -1), softmax_scale=None, softcap=0.0, alibi=False,
                 alibi_slopes=None, dropout_p=0.0, seed=0, cu_seqlens_q=None, cu_seqlens_k=None, mask=None):
        """mask: None, or (kind, value) with core's kinds (core/include/flashlab/mask.hpp):
        ("prefix-lm", n or [n per batch entry]), ("document", [lengths]), ("chunked", keys per chunk),
        ("dense", a boolean numpy array or torch tensor of shape (sq, sk) or (batch|1, heads|1, sq, sk)).
        The library judges it (Problem::validate)."""
        if dtype not in _abi.DTYPE_NAMES:
            raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(_abi.DTYPE_NAMES)}")
        left, right = window_size
        if softmax_scale is not None and not (softmax_scale > 0 and math.isfinite(softmax_scale)):
            raise ValueError(f"softmax_scale must be a positive number or None (1/sqrt(headdim)), got {softmax_scale}")
        p = _abi.new_problem()
        p.batch, p.heads_q, p.heads_kv = int(batch), int(heads_q), int(heads_kv)
        p.seqlen_q, p.seqlen_k = int(seqlen_q), int(seqlen_k)
        p.head_dim, p.head_dim_v = int(head_dim), int(head_dim_v)
        p.dtype = _abi.DTYPE_NAMES[dtype]
        p.causal = int(bool(causal))
        p.window_left, p.window_right = int(left), int(right)
        p.scale = float(softmax_scale or 0.0)
        p.softcap = float(softcap)
        p.dropout_p = float(dropout_p)
        p.seed = int(seed)
        self.keep = []
        if alibi or alibi_slopes is not None:
            p.alibi = 1
            if alibi_slopes is not None:
                slopes = (ctypes.c_double * len(alibi_slopes))(*[float(s) for s in alibi_slopes])
                self.keep.append(slopes)
                p.alibi_slopes = ctypes.cast(slopes, ctypes.POINTER(ctypes.c_double))
        if (cu_seqlens_q is None) != (cu_seqlens_k is None):
            raise ValueError("varlen needs both cu_seqlens_q and cu_seqlens_k")
        if cu_seqlens_q is not None:
            for name, cu, field in (("cu_seqlens_q", cu_seqlens_q, "cu_seqlens_q"),
                                    ("cu_seqlens_k", cu_seqlens_k, "cu_seqlens_k")):
                values = [int(x) for x in cu]
                if len(values) != p.batch + 1:
                    raise ValueError(f"{name} has {len(values)} entries; expected batch + 1 = {p.batch + 1}")
                array = (ctypes.c_int32 * len(values))(*values)
                self.keep.append(array)
                setattr(p, field, ctypes.cast(array, ctypes.POINTER(ctypes.c_int32)))
        if mask is not None:
            self._set_mask(p, *mask)
        self.struct = p

    def _set_mask(self, p, kind, value):
        if kind not in _abi.MASK_KINDS:
            raise ValueError(f"mask kind {kind!r}: expected one of {', '.join(_abi.MASK_KINDS)}")
        p.mask_kind = _abi.MASK_KINDS[kind]
        if kind == "prefix-lm":
            p.mask_prefix, p.mask_prefix_count = self._int64s(value if hasattr(value, "__len__") else [value])
        elif kind == "document":
            p.doc_lengths, p.doc_lengths_count = self._int64s(value)
        elif kind == "chunked":
            p.chunk = int(value)
        elif kind == "dense":
            shape = tuple(int(n) for n in value.shape)
            if len(shape) not in (2, 4):
                raise ValueError(f"a dense mask has shape (sq, sk) or (batch|1, heads|1, sq, sk), got {shape}")
            data = _dense_bytes(value)
            buf = ctypes.create_string_buffer(data, len(data))
            self.keep.append(buf)
            p.dense_mask = ctypes.addressof(buf)
            p.dense_ndim = len(shape)
            for n, size in enumerate(shape):
                p.dense_shape[n] = size

    def _int64s(self, values):
        values = [int(x) for x in values]
        array = (ctypes.c_int64 * max(len(values), 1))(*values)
        self.keep.append(array)
        return ctypes.cast(array, ctypes.POINTER(ctypes.c_int64)), len(values)

    @property
    def ref(self):
        return ctypes.byref(self.struct)
