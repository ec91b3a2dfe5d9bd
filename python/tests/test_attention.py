"""The CPU implementations through Python against the numpy fp64 oracle (oracle.py), by the harness's
rule: max|out - oracle| <= 2 x max|naive reference in the same precision - oracle| + 1e-5, every element.
Random inputs, awkward shapes (lengths and head dims that divide no tile), GQA/MQA, causal with
seqlen_q != seqlen_k, windows, softcap, ALiBi, varlen, fp16."""
import numpy as np
import pytest

import flashlab
import oracle

IMPLS = ["reference", "tiled-fa1", "tiled-fa2"]

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, options)
CASES = {
    "plain": (2, 67, 67, 3, 3, 40, {}),
    "causal-sq<sk": (1, 33, 130, 2, 2, 24, {"causal": True}),
    "causal-sq>sk": (2, 150, 61, 2, 1, 16, {"causal": True}),
    "gqa-window": (1, 129, 97, 8, 2, 72, {"window_size": (31, 5)}),
    "mqa-softcap": (2, 45, 203, 4, 1, 32, {"softcap": 7.5, "softmax_scale": 0.3}),
    "alibi-causal": (1, 90, 90, 4, 4, 8, {"causal": True, "alibi_slopes": [0.5, 0.25, 0.125, 0.0625]}),
    "d1-one-row": (3, 1, 257, 2, 2, 1, {}),
}


def inputs(shape, dtype=np.float32, seed=0):
    b, sq, sk, hq, hk, d, _ = shape
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d))]


def max_err(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    both_inf = np.isinf(out) & np.isinf(ref) & (np.sign(out) == np.sign(ref))
    with np.errstate(invalid="ignore"):  # -inf - -inf (rows that see no column) counts as 0 via both_inf
        diff = np.where(both_inf, 0.0, np.abs(out - ref))
    return np.inf if np.isnan(diff).any() else diff.max()


def assert_within_rule(name, out, baseline, ref):
    tol = 2 * max_err(baseline, ref) + 1e-5
    err = max_err(out, ref)
    assert err <= tol, f"{name}: max error {err:.3e} > tolerance {tol:.3e}"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_forward_matches_fp64_oracle(impl, case, dtype):
    shape = CASES[case]
    opts = shape[-1]
    q, k, v = inputs(shape, dtype)
    o_ref, lse_ref = oracle.forward(q, k, v, **opts)
    o_base, lse_base, _ = flashlab.flash_attn_func(q, k, v, impl="reference", return_attn_probs=True, **opts)
    o, lse, probs = flashlab.flash_attn_func(q, k, v, impl=impl, return_attn_probs=True, **opts)
    assert o.dtype == dtype and o.shape == q.shape[:-1] + (v.shape[-1],) and probs is None
    assert lse.dtype == np.float32 and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    assert_within_rule("O", o, o_base, o_ref)
    assert_within_rule("LSE", lse, lse_base, lse_ref)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["plain", "causal-sq>sk", "gqa-window", "mqa-softcap", "alibi-causal"])
def test_backward_matches_fp64_oracle(impl, case):
    shape = CASES[case]
    opts = shape[-1]
    q, k, v = inputs(shape)
    dout = np.random.default_rng(1).standard_normal(q.shape[:-1] + (v.shape[-1],)).astype(np.float32)
    grads_ref = oracle.backward(dout, q, k, v, **opts)
    o, lse, _ = flashlab.flash_attn_func(q, k, v, impl=impl, return_attn_probs=True, **opts)
    base = flashlab.flash_attn_backward(dout, q, k, v, o, lse, impl="reference", **opts)
    grads = flashlab.flash_attn_backward(dout, q, k, v, o, lse, impl=impl, **opts)
    for name, g, b, r, x in zip(("dQ", "dK", "dV"), grads, base, grads_ref, (q, k, v)):
        assert g.shape == x.shape
        assert_within_rule(name, g, b, r)


@pytest.mark.parametrize("impl", IMPLS)
def test_varlen_matches_fp64_oracle(impl):
    lens_q, lens_k = [5, 70, 1, 33], [64, 3, 90, 33]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((cu_q[-1], 4, 24)).astype(np.float32)
    k = rng.standard_normal((cu_k[-1], 2, 24)).astype(np.float32)
    v = rng.standard_normal((cu_k[-1], 2, 24)).astype(np.float32)
    args = (q, k, v, cu_q, cu_k, max(lens_q), max(lens_k))
    o_ref, lse_ref = oracle.forward(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    o_base, lse_base, _ = flashlab.flash_attn_varlen_func(*args, causal=True, impl="reference", return_attn_probs=True)
    o, lse, _ = flashlab.flash_attn_varlen_func(*args, causal=True, impl=impl, return_attn_probs=True)
    assert lse.shape == (4, cu_q[-1])
    assert_within_rule("O", o, o_base, o_ref)
    assert_within_rule("LSE", lse, lse_base, lse_ref)
    dout = rng.standard_normal(o.shape).astype(np.float32)
    ref = oracle.backward(dout, q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    common = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                  causal=True)
    base = flashlab.flash_attn_backward(dout, q, k, v, o, lse, impl="reference", **common)
    grads = flashlab.flash_attn_backward(dout, q, k, v, o, lse, impl=impl, **common)
    for name, g, b, r in zip(("dQ", "dK", "dV"), grads, base, ref):
        # varlen gradients: the harness's factor 3 (harness/check.hpp)
        tol = 3 * max_err(b, r) + 1e-5
        assert max_err(g, r) <= tol, name


def test_rule_catches_a_wrong_answer():
    """The comparison is not vacuous: a slightly different scale fails it."""
    q, k, v = inputs(CASES["plain"])
    o_ref, _ = oracle.forward(q, k, v)
    o_base = flashlab.flash_attn_func(q, k, v, impl="reference")
    wrong = flashlab.flash_attn_func(q, k, v, softmax_scale=40 ** -0.5 * 1.01)
    with pytest.raises(AssertionError):
        assert_within_rule("O", wrong, o_base, o_ref)


def test_strided_inputs_are_read_correctly():
    """A transposed view (non-contiguous) gives the same answer as its contiguous copy."""
    q, k, v = inputs(CASES["plain"])
    qt = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # same values, other strides
    assert not qt.flags.c_contiguous
    np.testing.assert_array_equal(flashlab.flash_attn_func(qt, k, v), flashlab.flash_attn_func(q, k, v))


def test_dropout_is_the_same_mask_in_every_implementation():
    q, k, v = inputs(CASES["plain"])
    plain = flashlab.flash_attn_func(q, k, v)
    outs = [flashlab.flash_attn_func(q, k, v, dropout_p=0.25, seed=7, impl=i) for i in IMPLS]
    assert max_err(outs[0], plain) > 0.05  # dropout changed the answer
    for o in outs[1:]:
        assert max_err(o, outs[0]) < 1e-4
    other_seed = flashlab.flash_attn_func(q, k, v, dropout_p=0.25, seed=8)
    assert max_err(other_seed, outs[0]) > 0.05


def test_check_runs_the_harness_rule():
    r = flashlab.check("tiled-fa1", seqlen=77, heads=4, kv_heads=2, causal=True, pass_="fwd+bwd")
    assert r["pass"] and r["skipped"] == ""
    assert [f["field"] for f in r["fields"]] == ["O", "LSE", "dQ", "dK", "dV"]
    assert all(0 <= f["error"] <= f["tolerance"] for f in r["fields"])


def test_implementations_lists_the_registry():
    names = [i["name"] for i in flashlab.implementations()]
    assert {"reference", "tiled-fa1", "tiled-fa2"} <= set(names)
