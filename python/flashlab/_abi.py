"""The C ABI of libflashlab.so (capi/include/flashlab.h) in ctypes: its structs, field for field (ABI 2:
the mask fields of flashlab_problem, the prepared device mask of flashlab_tensors; ABI 3: fa3's descales
and pack_gqa in flashlab_tensors), the library's entry
points with their argument types, and where the library is found.

The library is looked for, first found wins:
  1. $FLASHLAB_LIBRARY (a path to the .so);
  2. next to this file (flashlab/libflashlab.so, how `pip install ./python` ships a copied build);
  3. the build tree of the clone this package sits in (<repo>/build/capi/libflashlab.so).
"""
import ctypes
import os

ABI_VERSION = 3  # FLASHLAB_ABI_VERSION of the header these structs mirror
FP32, FP16, BF16 = 0, 1, 2
DTYPE_NAMES = {"fp32": FP32, "fp16": FP16, "bf16": BF16}
# enum flashlab_mask_kind, by core's names (core/include/flashlab/mask.hpp)
MASK_KINDS = {"none": 0, "prefix-lm": 1, "document": 2, "chunked": 3, "dense": 4}


class Problem(ctypes.Structure):
    """flashlab_problem: one attention call (core/include/flashlab/problem.hpp's fields)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("abi_version", ctypes.c_uint32),
        ("batch", ctypes.c_int64),
        ("heads_q", ctypes.c_int64),
        ("heads_kv", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_k", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("softcap", ctypes.c_double),
        ("alibi", ctypes.c_int32),
        ("pad0", ctypes.c_int32),
        ("alibi_slopes", ctypes.POINTER(ctypes.c_double)),
        ("dropout_p", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("cu_seqlens_q", ctypes.POINTER(ctypes.c_int32)),
        ("cu_seqlens_k", ctypes.POINTER(ctypes.c_int32)),
        # ABI 2: the mask
        ("mask_kind", ctypes.c_int32),
        ("pad1", ctypes.c_int32),
        ("mask_prefix", ctypes.POINTER(ctypes.c_int64)),
        ("mask_prefix_count", ctypes.c_int64),
        ("doc_lengths", ctypes.POINTER(ctypes.c_int64)),
        ("doc_lengths_count", ctypes.c_int64),
        ("chunk", ctypes.c_int64),
        ("dense_mask", ctypes.c_void_p),
        ("dense_shape", ctypes.c_int64 * 4),
        ("dense_ndim", ctypes.c_int32),
        ("pad2", ctypes.c_int32),
    ]


# ABI 1's struct size: the offset of the first field ABI 2 appended (the library still reads such structs).
PROBLEM_V1_SIZE = Problem.mask_kind.offset


class Tensors(ctypes.Structure):
    """flashlab_tensors: the pointers of one call (host or device memory, by implementation)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("abi_version", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("d_o", ctypes.c_void_p),
        ("dq", ctypes.c_void_p),
        ("dk", ctypes.c_void_p),
        ("dv", ctypes.c_void_p),
        ("cu_seqlens_q_device", ctypes.c_void_p),
        ("cu_seqlens_k_device", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        ("deterministic", ctypes.c_int32),
        ("pad0", ctypes.c_int32),
        ("mask", ctypes.c_void_p),  # ABI 2: a flashlab_device_mask* (flashlab_mask_prepare_v2), or NULL
        # ABI 3: fa3's options
        ("descale_q", ctypes.c_float),  # "fa3-fp8": x = e4m3 x descale (0: 1)
        ("descale_k", ctypes.c_float),
        ("descale_v", ctypes.c_float),
        ("pack_gqa", ctypes.c_int32),   # fa3's forward: 0 its rule, 1 packed, -1 not
    ]


TENSORS_V1_SIZE = Tensors.mask.offset
TENSORS_V2_SIZE = Tensors.descale_q.offset


class Decode(ctypes.Structure):
    """flashlab_decode: one KV-cache decoding call on the GPU (core/include/flashlab/decode_problem.hpp)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("abi_version", ctypes.c_uint32),
        ("batch", ctypes.c_int64),
        ("heads_q", ctypes.c_int64),
        ("heads_kv", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("q_len", ctypes.c_int64),
        ("cache_len", ctypes.c_int64),
        ("page_size", ctypes.c_int64),
        ("max_pages", ctypes.c_int64),
        ("new_len", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
        ("rotary", ctypes.c_int32),
        ("rotary_dim", ctypes.c_int32),
        ("num_splits", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("pad0", ctypes.c_int32),
        ("scale", ctypes.c_double),
        ("softcap", ctypes.c_double),
        ("q", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("cache_seqlens", ctypes.c_void_p),
        ("k_new", ctypes.c_void_p),
        ("v_new", ctypes.c_void_p),
        ("rotary_cos", ctypes.c_void_p),
        ("rotary_sin", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


def new_decode():
    return Decode(struct_size=ctypes.sizeof(Decode), abi_version=ABI_VERSION)


def new_problem():
    return Problem(struct_size=ctypes.sizeof(Problem), abi_version=ABI_VERSION)


def new_tensors():
    return Tensors(struct_size=ctypes.sizeof(Tensors), abi_version=ABI_VERSION)


def candidates():
    """The paths tried, in order (the module docstring gives the rule)."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.environ["FLASHLAB_LIBRARY"]] if os.environ.get("FLASHLAB_LIBRARY") else []
    return found + [os.path.join(here, "libflashlab.so"),
                    os.path.join(here, os.pardir, os.pardir, "build", "capi", "libflashlab.so")]


class FlashlabError(RuntimeError):
    """What libflashlab.so said was wrong with a call (its error buffer), raised by every entry point."""


_lib = None
ERROR_LEN = 1024


def lib():
    """The loaded library, its entry points typed; loaded on first use."""
    global _lib
    if _lib is not None:
        return _lib
    tried = candidates()
    path = next((p for p in tried if os.path.isfile(p)), None)
    if path is None:
        raise FlashlabError("libflashlab.so not found; tried " + ", ".join(tried) +
                            ". Build it with `cmake --build build --target flashlab_capi` (python/README.md), "
                            "or set FLASHLAB_LIBRARY to its path")
    _lib = load(path)
    return _lib


def load(path):
    """The library at `path`, its entry points typed, its ABI version checked. ctypes loads it RTLD_LOCAL,
    so a bench can hold a second build beside lib()'s (bench/mask_compare.py --other)."""
    if not os.path.isfile(path):
        raise FlashlabError(f"{path}: no such library file")
    try:
        handle = ctypes.CDLL(os.path.abspath(path))
    except OSError as e:
        raise FlashlabError(f"{path} could not be loaded: {e}") from None
    c = ctypes
    P, T = c.POINTER(Problem), c.POINTER(Tensors)
    text_out = c.POINTER(c.c_void_p)
    signatures = {
        "flashlab_abi_version": ([], c.c_int),
        "flashlab_has_cuda": ([], c.c_int),
        "flashlab_free": ([c.c_void_p], None),
        "flashlab_implementations": ([text_out, c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_forward_v1": ([c.c_char_p, P, T, c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_backward_v1": ([c.c_char_p, P, T, c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_estimate": ([P, c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, text_out, c.c_char_p, c.c_size_t],
                              c.c_int),
        "flashlab_walk": ([P, c.c_char_p, c.c_int64, c.c_int64, T, text_out, c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_check": ([c.c_char_p, P, c.c_char_p, text_out, c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_decode_v1": ([c.POINTER(Decode), c.POINTER(c.c_int32), c.c_char_p, c.c_size_t], c.c_int),
        "flashlab_mask_prepare_v2": ([c.c_char_p, P, c.c_void_p, c.POINTER(c.c_void_p), c.c_char_p, c.c_size_t],
                                     c.c_int),
        "flashlab_mask_free": ([c.c_void_p], None),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(handle, name)
        fn.argtypes, fn.restype = args, res
    version = handle.flashlab_abi_version()
    if version != ABI_VERSION:
        raise FlashlabError(f"{path} speaks ABI {version}, this package ABI {ABI_VERSION}: rebuild the library "
                            "from the same checkout as the package")
    handle.path = path
    return handle


def call(fn, *args):
    """Calls an entry point that ends in (error, error_len); raises FlashlabError with its message."""
    err = ctypes.create_string_buffer(ERROR_LEN)
    if fn(*args, err, ERROR_LEN) != 0:
        raise FlashlabError(err.value.decode(errors="replace"))


def call_text(fn, *args):
    """Calls an entry point that hands out text (char** before the error buffer); returns it as str."""
    out = ctypes.c_void_p()
    call(fn, *args, ctypes.byref(out))
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        lib().flashlab_free(out)
