"""Masks through the C ABI (ABI 2's flashlab_problem mask fields, python's ProblemArgs(mask=...)): the CPU
implementations with each mask kind against the numpy fp64 oracle given the same mask as a boolean array
written here from core/include/flashlab/mask.hpp's definitions, by the harness's rule; a version-1 struct
still accepted; bad mask descriptions refused with their message; the prepared device mask's entry points;
the public API's mask= (flash_attn_func, flash_attn_varlen_func, flash_attn_backward) on the same cases."""
import ctypes

import numpy as np
import pytest

import oracle
import flashlab
from flashlab import _abi, _checks, _host
from flashlab._problem import ProblemArgs
from test_attention import assert_within_rule, max_err

IMPLS = ["reference", "tiled-fa1", "tiled-fa2"]


def allowed(kind, value, b, h, sq, sk, causal=False):
    """The mask function's answers, (b, h, sq, sk) bool, with diag(i) = i + sk - sq (mask.hpp)."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    diag = i + sk - sq
    out = np.zeros((b, h, sq, sk), bool)
    for e in range(b):
        if kind == "prefix-lm":
            prefix = value if isinstance(value, int) else value[e]
            rows = (j < prefix) | (j <= diag)
        elif kind == "document":
            doc = np.repeat(np.arange(len(value)), value)  # doc(t): the document holding token t
            rows = doc[i] == doc[j]
            if causal:
                rows &= j <= i
        elif kind == "chunked":
            rows = (np.floor_divide(diag, value) == j // value) & (j <= diag)
        else:  # dense
            bits = value if value.ndim == 2 else value[min(e, value.shape[0] - 1)]
            rows = np.broadcast_to(bits, (h, sq, sk))
        out[e] = rows
    return out


# name: (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, mask, causal)
rng = np.random.default_rng(5)
DENSE_2D = rng.random((23, 41)) < 0.6
DENSE_2D[4] = False  # a row that sees nothing: O = 0, LSE = -inf
DENSE_4D = rng.random((2, 1, 23, 41)) < 0.4
CASES = {
    "prefix-lm": (1, 40, 40, 2, 2, 16, ("prefix-lm", 13), False),
    "prefix-lm-per-entry-sq<sk": (2, 37, 53, 2, 1, 16, ("prefix-lm", [10, 41]), False),
    "document": (2, 70, 70, 2, 2, 8, ("document", [13, 30, 1, 26]), False),
    "document-causal": (1, 70, 70, 3, 1, 24, ("document", [13, 30, 1, 26]), True),
    "chunked-sq<sk": (1, 45, 80, 2, 2, 16, ("chunked", 16), False),
    "dense-2d": (2, 23, 41, 2, 2, 8, ("dense", DENSE_2D), False),
    "dense-4d": (2, 23, 41, 2, 1, 8, ("dense", DENSE_4D), False),
}


def run(case, impl, backward=False, mask=None):
    b, sq, sk, hq, hk, d, case_mask, causal = CASES[case]
    mask = mask or case_mask
    r = np.random.default_rng(1)
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d)))
    shapes = _checks.attention_shapes(q, k, v)
    problem = ProblemArgs(batch=b, heads_q=hq, heads_kv=hk, seqlen_q=sq, seqlen_k=sk, head_dim=d, causal=causal,
                          mask=mask)
    o, lse = _host.forward(impl, problem, shapes, q, k, v)
    if not backward:
        return (q, k, v), (o, lse)
    dout = r.standard_normal(o.shape).astype(np.float32)
    return (q, k, v, dout), _host.backward(impl, problem, shapes, dout, q, k, v, o, lse)


def oracle_allowed(case):
    b, sq, sk, hq, _, _, (kind, value), causal = CASES[case]
    return allowed(kind, value, b, hq, sq, sk, causal), causal


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", list(CASES))
def test_forward_with_mask_matches_fp64_oracle(impl, case):
    mask, causal = oracle_allowed(case)
    (q, k, v), (o, lse) = run(case, impl)
    o_ref, lse_ref = oracle.forward(q, k, v, causal=causal, allowed=mask)
    _, (o_base, lse_base) = run(case, "reference")
    assert max_err(o_base, o_ref) < 1e-4 and max_err(lse_base, lse_ref) < 1e-4  # fp32 reference: near fp64
    assert_within_rule("O", o, o_base, o_ref)
    assert_within_rule("LSE", lse, lse_base, lse_ref)
    unmasked, _ = oracle.forward(q, k, v, causal=causal)
    assert max_err(o, unmasked) > 0.05  # the mask changed the answer: the comparison is not vacuous


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["prefix-lm-per-entry-sq<sk", "document-causal", "chunked-sq<sk", "dense-4d"])
def test_backward_with_mask_matches_fp64_oracle(impl, case):
    mask, causal = oracle_allowed(case)
    (q, k, v, dout), grads = run(case, impl, backward=True)
    _, base = run(case, "reference", backward=True)
    ref = oracle.backward(dout, q, k, v, causal=causal, allowed=mask)
    for name, g, gb, r in zip(("dQ", "dK", "dV"), grads, base, ref):
        assert_within_rule(name, g, gb, r)


@pytest.mark.parametrize("case", ["prefix-lm-per-entry-sq<sk", "document-causal", "chunked-sq<sk"])
def test_interval_mask_equals_its_dense_bits(case):
    """A built-in kind and the same mask as dense bits (read bit by bit, block mask with holes) agree."""
    mask, _ = oracle_allowed(case)
    _, (o, lse) = run(case, "tiled-fa2")
    _, (o_dense, lse_dense) = run(case, "tiled-fa2", mask=("dense", mask[:, :1]))
    assert max_err(o, o_dense) < 1e-5 and max_err(lse, lse_dense) < 1e-5


# ---- the struct: version 1 still read; bad mask descriptions refused with the reason

def raw_forward(problem, tensors, impl=b"reference"):
    err = ctypes.create_string_buffer(512)
    rc = _abi.lib().flashlab_forward_v1(impl, problem, tensors, err, 512)
    return rc, err.value.decode()


def small(mask=None, b=1, s=16, causal=False):
    q, k, v = (np.random.default_rng(2).standard_normal((b, s, 1, 8)).astype(np.float32) for _ in range(3))
    o, lse = np.zeros_like(q), np.zeros((b, 1, s), np.float32)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = (x.ctypes.data for x in (q, k, v, o, lse))
    problem = ProblemArgs(batch=b, heads_q=1, heads_kv=1, seqlen_q=s, seqlen_k=s, head_dim=8, causal=causal,
                          mask=mask)
    return problem, t, (q, k, v, o, lse)


def test_version_1_structs_are_still_read():
    problem, t, (q, k, v, o, lse) = small(causal=True)
    assert raw_forward(problem.ref, ctypes.byref(t)) == (0, "")
    o2 = o.copy()
    # The same call as a version-1 caller makes it: the v1 sizes, exactly that many bytes.
    p1 = ctypes.create_string_buffer(bytes(problem.struct)[:_abi.PROBLEM_V1_SIZE], _abi.PROBLEM_V1_SIZE)
    t1 = ctypes.create_string_buffer(bytes(t)[:_abi.TENSORS_V1_SIZE], _abi.TENSORS_V1_SIZE)
    for buf, size in ((p1, _abi.PROBLEM_V1_SIZE), (t1, _abi.TENSORS_V1_SIZE)):
        ctypes.memmove(buf, ctypes.byref(ctypes.c_uint32(size)), 4)
        ctypes.memmove(ctypes.addressof(buf) + 4, ctypes.byref(ctypes.c_uint32(1)), 4)
    p1_ptr, t1_ptr = ctypes.cast(p1, ctypes.POINTER(_abi.Problem)), ctypes.cast(t1, ctypes.POINTER(_abi.Tensors))
    o[:] = np.nan
    assert raw_forward(p1_ptr, t1_ptr) == (0, "")
    np.testing.assert_array_equal(o, o2)
    # A version-1 size with version 2 (or the reverse) is no struct the library knows.
    ctypes.memmove(ctypes.addressof(p1) + 4, ctypes.byref(ctypes.c_uint32(2)), 4)
    rc, msg = raw_forward(p1_ptr, t1_ptr)
    assert rc != 0 and f"struct_size {_abi.PROBLEM_V1_SIZE} and abi_version 2" in msg
    assert f"reads {_abi.PROBLEM_V1_SIZE} bytes with version 1, {ctypes.sizeof(_abi.Problem)} bytes with version 2" in msg


def test_bad_mask_descriptions_say_what_is_wrong():
    def message(mask=None, mutate=None, causal=False):
        problem, t, _ = small(mask, causal=causal)
        if mutate:
            mutate(problem.struct)
        rc, msg = raw_forward(problem.ref, ctypes.byref(t))
        assert rc != 0
        return msg

    def kind(n):
        return lambda p: setattr(p, "mask_kind", n)

    assert message(mutate=kind(7)) == ("invalid problem: mask_kind must be 0 (none), 1 (prefix-lm), 2 (document), "
                                       "3 (chunked) or 4 (dense), got 7")
    assert message(mutate=kind(-1)).endswith("got -1")
    assert ("document lengths 3,4 sum to 7, but seqlen is 16; they must cover the packed sequence exactly"
            in message(("document", [3, 4])))
    assert "prefix-lm needs one prefix length, or one per batch entry (1); got 2" in message(("prefix-lm", [1, 2]))
    assert "prefix 17 of batch entry 0 must be in [0, seqlen_k = 16]" in message(("prefix-lm", 17))
    assert "prefix-lm is already causal after the prefix" in message(("prefix-lm", 4), causal=True)
    assert "chunked attention needs a positive chunk size" in message(("chunked", 0))
    assert ("the dense mask (C ABI) has shape (16, 15); expected (seqlen_q, seqlen_k) = (16, 16)"
            in message(("dense", np.ones((16, 15), bool))))
    assert "has shape (1, 2, 16, 16)" in message(("dense", np.ones((1, 2, 16, 16), bool)))  # 1 head, not 2

    def null_docs(p):
        p.mask_kind, p.doc_lengths_count = 2, 3
    assert message(mutate=null_docs) == ("invalid problem: doc_lengths is NULL but doc_lengths_count is 3: pass the "
                                         "host array, or count 0")

    def null_prefix(p):
        p.mask_kind, p.mask_prefix_count = 1, 1
    assert "mask_prefix is NULL but mask_prefix_count is 1" in message(mutate=null_prefix)
    assert "a dense mask needs dense_mask" in message(mutate=kind(4))

    def three_dims(p):
        p.dense_ndim = 3
    assert "dense_ndim must be 2 ((seqlen_q, seqlen_k)) or 4" in message(("dense", np.ones((16, 16), bool)),
                                                                        mutate=three_dims)

    def docs_but_no_kind(p):
        p.mask_kind = 0
    assert "document lengths were given but the mask is none" in message(("document", [8, 8]), mutate=docs_but_no_kind)


def test_prepared_mask_entry_points():
    problem, _, _ = small(("document", [8, 8]))
    lib = _abi.lib()
    out = ctypes.c_void_p(1)
    err = ctypes.create_string_buffer(512)
    assert lib.flashlab_mask_prepare_v2(b"tiled-fa2", problem.ref, None, ctypes.byref(out), err, 512) != 0
    assert err.value.decode().startswith("unknown kernel 'tiled-fa2': a device mask is made for a GPU kernel")
    assert out.value is None  # nothing handed out on failure
    assert lib.flashlab_mask_prepare_v2(b"fa2", problem.ref, None, None, err, 512) != 0
    assert err.value.decode().startswith("out is NULL")
    lib.flashlab_mask_free(None)  # freeing nothing is allowed
    if not lib.flashlab_has_cuda():
        assert lib.flashlab_mask_prepare_v2(b"fa2", problem.ref, None, ctypes.byref(out), err, 512) != 0
        assert "built without CUDA" in err.value.decode()


# ---- the public API: flash_attn_func / flash_attn_varlen_func / flash_attn_backward with mask=(kind, value)

def public(case, impl, backward=False):
    """The case through flash_attn_func (and flash_attn_backward), as a user calls them."""
    b, sq, sk, hq, hk, d, mask, causal = CASES[case]
    r = np.random.default_rng(1)
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d)))
    o, lse, _ = flashlab.flash_attn_func(q, k, v, causal=causal, mask=mask, impl=impl, return_attn_probs=True)
    if not backward:
        return (q, k, v), (o, lse)
    dout = r.standard_normal(o.shape).astype(np.float32)
    return (q, k, v, dout), flashlab.flash_attn_backward(dout, q, k, v, o, lse, causal=causal, mask=mask, impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", list(CASES))
def test_flash_attn_func_mask_matches_fp64_oracle(impl, case):
    mask, causal = oracle_allowed(case)
    (q, k, v), (o, lse) = public(case, impl)
    o_ref, lse_ref = oracle.forward(q, k, v, causal=causal, allowed=mask)
    _, (o_base, lse_base) = public(case, "reference")
    assert_within_rule("O", o, o_base, o_ref)
    assert_within_rule("LSE", lse, lse_base, lse_ref)
    unmasked, _ = oracle.forward(q, k, v, causal=causal)
    assert max_err(o, unmasked) > 0.05  # the mask reached the library: without it the answer differs


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["prefix-lm-per-entry-sq<sk", "document-causal", "chunked-sq<sk", "dense-4d"])
def test_flash_attn_backward_mask_matches_fp64_oracle(impl, case):
    mask, causal = oracle_allowed(case)
    (q, k, v, dout), grads = public(case, impl, backward=True)
    _, base = public(case, "reference", backward=True)
    ref = oracle.backward(dout, q, k, v, causal=causal, allowed=mask)
    for name, g, gb, r in zip(("dQ", "dK", "dV"), grads, base, ref):
        assert_within_rule(name, g, gb, r)


VARLEN_LENS = ([5, 40, 17], [30, 40, 51])  # per sequence: seqlen_q, seqlen_k (sq < sk, sq = sk, sq < sk)


def varlen_oracle(q, k, v, cu_q, cu_k, kind, value, dout=None):
    """The fp64 oracle per sequence, each a batch of one with its own diag(i) = i + sk_b - sq_b."""
    outs = []
    for e in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[e], cu_q[e + 1]), slice(cu_k[e], cu_k[e + 1])
        sq, sk = qs.stop - qs.start, ks.stop - ks.start
        per_entry = value if isinstance(value, int) or kind == "chunked" else value[e]
        allow = allowed(kind, per_entry, 1, q.shape[1], sq, sk)
        args = (q[None, qs], k[None, ks], v[None, ks])
        if dout is None:
            o, lse = oracle.forward(*args, allowed=allow)
            outs.append((o[0], lse[0]))
        else:
            outs.append(tuple(g[0] for g in oracle.backward(dout[None, qs], *args, allowed=allow)))
    if dout is None:
        return np.concatenate([o for o, _ in outs]), np.concatenate([lse for _, lse in outs], axis=1)
    return tuple(np.concatenate([g[n] for g in outs]) for n in range(3))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mask", [("prefix-lm", [3, 25, 9]), ("chunked", 8)], ids=["prefix-lm", "chunked"])
def test_flash_attn_varlen_func_mask_matches_fp64_oracle(impl, mask):
    lens_q, lens_k = VARLEN_LENS
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    r = np.random.default_rng(4)
    q = r.standard_normal((cu_q[-1], 2, 16)).astype(np.float32)
    k, v = (r.standard_normal((cu_k[-1], 1, 16)).astype(np.float32) for _ in range(2))
    common = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                  mask=mask)
    o_ref, lse_ref = varlen_oracle(q, k, v, cu_q, cu_k, *mask)
    o_base, lse_base, _ = flashlab.flash_attn_varlen_func(q, k, v, impl="reference", return_attn_probs=True, **common)
    o, lse, _ = flashlab.flash_attn_varlen_func(q, k, v, impl=impl, return_attn_probs=True, **common)
    assert_within_rule("O", o, o_base, o_ref)
    assert_within_rule("LSE", lse, lse_base, lse_ref)
    dout = r.standard_normal(o.shape).astype(np.float32)
    ref = varlen_oracle(q, k, v, cu_q, cu_k, *mask, dout=dout)
    base = flashlab.flash_attn_backward(dout, q, k, v, o_base, lse_base, impl="reference", **common)
    grads = flashlab.flash_attn_backward(dout, q, k, v, o, lse, impl=impl, **common)
    for name, g, gb, gr in zip(("dQ", "dK", "dV"), grads, base, ref):
        assert max_err(g, gr) <= 3 * max_err(gb, gr) + 1e-5, name  # varlen gradients: the harness's factor 3


def test_public_bad_masks_raise_the_library_message():
    q = np.random.default_rng(2).standard_normal((1, 16, 1, 8)).astype(np.float32)

    def error(mask, exc=flashlab.FlashlabError, **kw):
        with pytest.raises(exc) as info:
            flashlab.flash_attn_func(q, q, q, mask=mask, **kw)
        return str(info.value)

    assert error(("sliding", 4), ValueError) == ("mask kind 'sliding': expected one of prefix-lm, document, "
                                                 "chunked, dense")
    assert error("chunked", ValueError).startswith("mask must be a (kind, value) pair, e.g. ('chunked', 64)")
    assert error(("dense", [[True] * 16] * 16), TypeError).startswith("a dense mask is a boolean array")
    assert error(("chunked", 2.5), TypeError) == "mask ('chunked', 2.5): chunked takes integers, the chunk size"
    assert error(("document", []), TypeError).endswith("document takes integers, the document lengths")
    assert ("document lengths 3,4 sum to 7, but seqlen is 16; they must cover the packed sequence exactly"
            in error(("document", [3, 4])))
    assert ("the dense mask (C ABI) has shape (16, 15); expected (seqlen_q, seqlen_k) = (16, 16)"
            in error(("dense", np.ones((16, 15), bool))))
    assert "dense mask has shape (sq, sk) or (batch|1, heads|1, sq, sk), got (16,)" in error(
        ("dense", np.ones(16, bool)), ValueError)
    assert "prefix-lm is already causal after the prefix" in error(("prefix-lm", 4), causal=True)
    assert "chunked attention is already causal within each chunk" in error(("chunked", 4), window_size=(8, 0))
    dout = np.ones_like(q)
    with pytest.raises(flashlab.FlashlabError, match="chunked attention needs a positive chunk size"):
        flashlab.flash_attn_backward(dout, q, q, q, q, np.zeros((1, 1, 16), np.float32), mask=("chunked", 0))
    cu = np.array([0, 8, 16], np.int32)
    with pytest.raises(flashlab.FlashlabError, match="document masking packs sequences itself"):
        flashlab.flash_attn_varlen_func(q[0], q[0], q[0], cu, cu, 8, 8, mask=("document", [8]))
