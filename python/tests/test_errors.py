"""Bad input is refused with a message that says what was wrong and what to do, never a crash: the
Python checks before the call, and the library's own checks (Problem::validate, the ABI's struct header,
NULL pointers) through the raw ctypes entry points."""
import ctypes

import numpy as np
import pytest

import flashlab
from flashlab import _abi


def arrays(b=1, sq=16, sk=16, hq=2, hk=2, d=8, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d))]


@pytest.mark.parametrize("mutate,message", [
    (lambda q, k, v: (q[0], k, v), r"q has shape \(16, 2, 8\); flash_attn_func takes \(batch, seqlen, nheads, headdim\)"),
    (lambda q, k, v: (q, k, v[:, :, :, :4].copy()), None),  # headdim_v != headdim is allowed
    (lambda q, k, v: (q, k[:, :8], v), r"k \(1, 8, 2, 8\) and v \(1, 16, 2, 8\) must agree"),
    (lambda q, k, v: (q[..., :4], k, v), r"q's headdim 4 differs from k's 8"),
    (lambda q, k, v: (np.concatenate([q, q[:, :, :1]], axis=2), k, v),
     r"q has 3 heads and k, v have 2: the query heads must be a multiple .* could have \[1, 3\] heads"),
    (lambda q, k, v: (q, k.astype(np.float16), v), r"q, k, v must share one dtype"),
    (lambda q, k, v: (q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)),
     r"dtype float64 is not supported .* q.astype\(np.float32\)"),
    (lambda q, k, v: (q, k.tolist(), v), r"q is a numpy array but k is list"),
    (lambda q, k, v: (np.concatenate([q, q]), k, v), r"q has batch 2 but k has 1"),
])
def test_bad_shapes_and_dtypes(mutate, message):
    q, k, v = mutate(*arrays())
    if message is None:
        assert flashlab.flash_attn_func(q, k, v).shape == (1, 16, 2, 4)
        return
    with pytest.raises((ValueError, TypeError), match=message):
        flashlab.flash_attn_func(q, k, v)


def test_unknown_implementation_lists_the_names():
    with pytest.raises(flashlab.FlashlabError, match=r"unknown implementation 'fa9'.*tiled-fa2"):
        flashlab.flash_attn_func(*arrays(), impl="fa9")


def test_gpu_kernel_on_numpy_arrays_says_why():
    with pytest.raises(ValueError, match=r"impl='fa2' runs on device memory .* gpu-fa2"):
        flashlab.flash_attn_func(*arrays(dtype=np.float16), impl="fa2")
    # the library refuses it too, before any launch: host pointers (or, without CUDA, no kernels at all)
    q, k, v = arrays(dtype=np.float32)
    o, lse = np.empty_like(q), np.empty((1, 2, 16), np.float32)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = (x.ctypes.data for x in (q, k, v, o, lse))
    p = small_problem()
    p.dtype = _abi.FP16
    rc, msg = raw_forward(p, t, impl=b"fa2")
    assert rc != 0 and ("is not device memory" in msg or msg.startswith("fa2 cannot run this problem: skipped") or
                        "built without CUDA" in msg), msg


@pytest.mark.parametrize("kwargs,message", [
    (dict(window_size=(-2, 0)), r"each side is -1 \(unbounded\) or >= 0"),
    (dict(softmax_scale=-1.0), r"softmax_scale must be a positive number"),
    (dict(alibi_slopes=[0.5]), r"alibi_slopes has shape \(1,\); .* \(2,\)"),
    (dict(dropout_p=1.5), r"dropout"),
    (dict(softcap=-1.0), r"softcap"),
])
def test_bad_options(kwargs, message):
    with pytest.raises((ValueError, flashlab.FlashlabError), match=message):
        flashlab.flash_attn_func(*arrays(), **kwargs)


def test_bad_varlen_offsets():
    q, k, v = (x[0] for x in arrays())
    good = np.array([0, 10, 16], np.int32)
    with pytest.raises(ValueError, match=r"must start at 0 and end at the q's token count 16"):
        flashlab.flash_attn_varlen_func(q, k, v, np.array([0, 10, 15], np.int32), good, 10, 10)
    with pytest.raises(flashlab.FlashlabError, match=r"cu_seqlens_q: sequence 0 has length 10 > max seqlen_q = 8"):
        flashlab.flash_attn_varlen_func(q, k, v, good, good, 8, 10)
    with pytest.raises(flashlab.FlashlabError, match=r"cu_seqlens_k must be non-decreasing"):
        flashlab.flash_attn_varlen_func(q, k, v, good, np.array([0, 17, 16], np.int32), 10, 17)
    with pytest.raises(ValueError, match=r"needs max_seqlen_q and max_seqlen_k"):
        flashlab.flash_attn_varlen_func(q, k, v, good, good, None, None)


def test_backward_checks_the_forward_outputs():
    q, k, v = arrays()
    o, lse, _ = flashlab.flash_attn_func(q, k, v, return_attn_probs=True)
    with pytest.raises(ValueError, match=r"softmax_lse has shape \(1, 16, 2\); expected \(1, 2, 16\)"):
        flashlab.flash_attn_backward(o, q, k, v, o, lse.transpose(0, 2, 1))


def test_estimate_and_walk_errors():
    with pytest.raises(flashlab.FlashlabError, match=r"h200-pcie"):
        flashlab.estimate(seqlen=1024, gpu="h200-pcie")
    with pytest.raises(flashlab.FlashlabError, match=r"algo|standard"):
        flashlab.estimate(seqlen=1024, algo="fa9")
    with pytest.raises(flashlab.FlashlabError, match=r"fwd \| bwd \| fwd\+bwd|pass"):
        flashlab.estimate(seqlen=1024, pass_="sideways")
    with pytest.raises(flashlab.FlashlabError, match=r"order"):
        list(flashlab.walk(64, order="diagonal"))
    with pytest.raises(flashlab.FlashlabError, match=r"tile Br x Bc must be positive, got 0 x 64"):
        list(flashlab.walk(64, br=0))
    with pytest.raises(flashlab.FlashlabError, match=r"invalid problem: .*head"):
        flashlab.estimate(seqlen=1024, heads=6, kv_heads=4)
    with pytest.raises(flashlab.FlashlabError, match=r"seqlen_k must be positive, got 0"):
        flashlab.estimate(seqlen=1024, seqlen_k=0)  # a 0 given is the caller's, not "use seqlen"


# ---- the library's own checks, through the raw entry points (what a C caller or another binding sees)

def raw_forward(problem, tensors, impl=b"tiled-fa2"):
    err = ctypes.create_string_buffer(256)
    rc = _abi.lib().flashlab_forward_v1(impl, ctypes.byref(problem) if problem is not None else None,
                                        ctypes.byref(tensors) if tensors is not None else None, err, 256)
    return rc, err.value.decode()


def small_problem():
    p = _abi.new_problem()
    p.batch = p.heads_q = p.heads_kv = 1
    p.seqlen_q = p.seqlen_k = 4
    p.head_dim = 8
    p.window_left = p.window_right = -1
    return p


def test_abi_refuses_a_struct_of_another_version():
    p = small_problem()
    p.struct_size -= 8
    rc, msg = raw_forward(p, _abi.new_tensors())
    assert rc != 0 and "flashlab_problem: the caller's struct has struct_size" in msg and "flashlab.h" in msg
    p = small_problem()
    p.abi_version = _abi.ABI_VERSION + 1
    assert f"abi_version {_abi.ABI_VERSION + 1}" in raw_forward(p, _abi.new_tensors())[1]


def test_abi_refuses_null_pointers():
    rc, msg = raw_forward(None, _abi.new_tensors())
    assert rc != 0 and msg == "problem is NULL: pass a flashlab_problem"
    rc, msg = raw_forward(small_problem(), None)
    assert rc != 0 and msg == "tensors is NULL: pass a flashlab_tensors"
    rc, msg = raw_forward(small_problem(), _abi.new_tensors())
    assert rc != 0 and msg.startswith("tensors->q is NULL: the forward needs host arrays for q, k, v, o and lse")
    rc, msg = raw_forward(small_problem(), _abi.new_tensors(), impl=None)
    assert rc != 0 and msg == "impl is NULL"


def test_abi_bad_dtype_and_truncated_error_buffer():
    p = small_problem()
    p.dtype = 7
    rc, msg = raw_forward(p, _abi.new_tensors())
    assert rc != 0 and "dtype must be 0 (fp32), 1 (fp16) or 2 (bf16), got 7" in msg
    err = ctypes.create_string_buffer(b"x" * 16)
    assert _abi.lib().flashlab_forward_v1(b"nope", ctypes.byref(small_problem()), ctypes.byref(_abi.new_tensors()),
                                          err, 16) != 0
    assert err.value == b"unknown impleme"  # cut to the buffer, NUL-terminated


def test_fa3_options_say_where_they_apply():
    # pack_gqa is fa3's, on CUDA tensors; the FP8 forward takes CUDA e4m3 tensors: both say so on numpy arrays
    with pytest.raises(ValueError, match=r"pack_gqa is fa3's option on CUDA tensors .* numpy arrays"):
        flashlab.flash_attn_func(*arrays(), pack_gqa=True)
    with pytest.raises(ValueError, match=r"q must be a CUDA torch tensor \(float8_e4m3fn\)"):
        flashlab.flash_attn_fp8_func(*arrays())
    with pytest.raises(ValueError, match=r"impl='fa3-fp8' runs on device memory .* gpu-fa3-fp8"):
        flashlab.flash_attn_func(*arrays(dtype=np.float16), impl="fa3-fp8")
    # through the ABI: the descales and pack_gqa are refused where they do not apply, before any launch
    q, k, v = arrays(dtype=np.float32)
    o, lse = np.empty_like(q), np.empty((1, 2, 16), np.float32)
    p = small_problem()
    p.heads_q = p.heads_kv = 2
    p.seqlen_q = p.seqlen_k = 16
    p.dtype = _abi.FP16

    def refused(impl, **fields):
        t = _abi.new_tensors()
        t.q, t.k, t.v, t.o, t.lse = (x.ctypes.data for x in (q, k, v, o, lse))
        for name, value in fields.items():
            setattr(t, name, value)
        rc, msg = raw_forward(p, t, impl=impl)
        assert rc != 0
        return msg

    no_cuda = "built without CUDA"
    msg = refused(b"fa2", descale_q=0.5)
    assert "tensors->descale_q is for fa3-fp8's e4m3 inputs" in msg or no_cuda in msg, msg
    msg = refused(b"fa2", pack_gqa=1)
    assert "tensors->pack_gqa applies to fa3's forward" in msg or no_cuda in msg, msg
    p.dtype = _abi.BF16
    msg = refused(b"fa3-fp8", descale_k=-1.0)
    p.dtype = _abi.FP16
    assert "descale_k must be a positive finite scale" in msg or no_cuda in msg, msg
    msg = refused(b"fa3-fp8")  # fp16: its output is bf16
    assert "set the problem's dtype to bf16" in msg or no_cuda in msg, msg


def test_version_2_tensors_are_still_read():
    # a version-2 caller's flashlab_tensors (no descales, no pack_gqa) runs as before
    q, k, v = arrays(sq=4, sk=4, hq=1, hk=1)
    o, lse = np.empty_like(q), np.empty((1, 1, 4), np.float32)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = (x.ctypes.data for x in (q, k, v, o, lse))
    assert raw_forward(small_problem(), t) == (0, "")
    o2 = o.copy()
    t2 = ctypes.create_string_buffer(bytes(t)[:_abi.TENSORS_V2_SIZE], _abi.TENSORS_V2_SIZE)
    ctypes.memmove(t2, ctypes.byref(ctypes.c_uint32(_abi.TENSORS_V2_SIZE)), 4)
    ctypes.memmove(ctypes.addressof(t2) + 4, ctypes.byref(ctypes.c_uint32(2)), 4)
    o[:] = np.nan
    assert raw_forward(small_problem(), ctypes.cast(t2, ctypes.POINTER(_abi.Tensors)).contents) == (0, "")
    np.testing.assert_array_equal(o, o2)
