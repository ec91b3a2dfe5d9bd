"""An fp64 attention oracle in numpy, written from core/include/flashlab/problem.hpp's definitions and
independent of the C++ code under test: naive S and P per (batch, head), forward and backward.

  s = scale * q_i . k_j;  s = softcap * tanh(s / softcap);  s -= slope_h * |i + sk - sq - j|;  masked: -inf
  row i sees column j when  i + sk - sq - window_left <= j <= i + sk - sq + window_right  (causal: right = 0)
"""
import numpy as np


def sequences(q, k, cu_q=None, cu_k=None):
    """(b, q rows, k rows) per sequence: slices into the packed (varlen) or batched layout."""
    if cu_q is None:
        return [(b, q[b], k[b]) for b in range(q.shape[0])]
    return [(b, slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])) for b in range(len(cu_q) - 1)]


def visible(sq, sk, causal, window):
    left, right = window
    if causal:
        right = 0 if right < 0 else min(right, 0)
    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    ok = np.ones((sq, sk), bool)
    if left >= 0:
        ok &= j >= i - left
    if right >= 0:
        ok &= j <= i + right
    return ok


def _head(q, k, v, scale, causal, window, softcap, slope, allowed=None):
    """One head: q (sq, d), k (sk, d), v (sk, dv) in fp64 -> o, lse, and what the backward needs; `allowed`
    (sq, sk) bool, a mask function's answers, narrows the window's columns further."""
    sq, sk = q.shape[0], k.shape[0]
    raw = scale * q @ k.T
    s = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    if slope:
        s = s - slope * np.abs(np.arange(sq)[:, None] + sk - sq - np.arange(sk)[None, :])
    mask = visible(sq, sk, causal, window)
    if allowed is not None:
        mask = mask & allowed
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    empty = ~np.isfinite(m)
    m = np.where(empty, 0.0, m)
    e = np.exp(s - m)
    l = e.sum(axis=1, keepdims=True)
    p = np.where(empty, 0.0, e / np.where(l == 0, 1, l))
    lse = np.where(empty[:, 0], -np.inf, (m + np.log(np.where(l == 0, 1, l)))[:, 0])
    return p @ v, lse, p, raw


def _slopes(heads, alibi_slopes):
    if alibi_slopes is None:
        return [0.0] * heads
    return list(alibi_slopes)


def forward(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
            cu_seqlens_q=None, cu_seqlens_k=None, allowed=None):
    """o (like q, head dim of v) and lse ((batch, heads, sq) or varlen (heads, total_q)), fp64. allowed: a
    mask function's answers, (batch, heads, sq, sk) bool (fixed-length batches only)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    hq, hk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = softmax_scale or d ** -0.5
    slopes = _slopes(hq, alibi_slopes)
    o = np.zeros(q.shape[:-1] + (v.shape[-1],))
    varlen = cu_seqlens_q is not None
    lse = np.zeros((hq, q.shape[0]) if varlen else (q.shape[0], hq, q.shape[1]))
    for b, qi, ki in sequences(q, k, cu_seqlens_q, cu_seqlens_k):
        Q, K, V = (q[qi], k[ki], v[ki]) if varlen else (q[b], k[b], v[b])
        for h in range(hq):
            oh, lh, _, _ = _head(Q[:, h], K[:, h // (hq // hk)], V[:, h // (hq // hk)], scale, causal, window_size,
                                 softcap, slopes[h], None if allowed is None else allowed[b, h])
            if varlen:
                o[qi, h], lse[h, qi] = oh, lh
            else:
                o[b, :, h], lse[b, h] = oh, lh
    return o, lse


def backward(dout, q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
             cu_seqlens_q=None, cu_seqlens_k=None, allowed=None):
    """dq, dk, dv in fp64 (GQA: a kv head's gradients summed over its query heads)."""
    q, k, v, dout = (np.asarray(x, np.float64) for x in (q, k, v, dout))
    hq, hk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = softmax_scale or d ** -0.5
    slopes = _slopes(hq, alibi_slopes)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    varlen = cu_seqlens_q is not None
    for b, qi, ki in sequences(q, k, cu_seqlens_q, cu_seqlens_k):
        sel_q, sel_k = (qi, ki) if varlen else (b, b)
        Q, K, V, dO = q[sel_q], k[sel_k], v[sel_k], dout[sel_q]
        for h in range(hq):
            g = h // (hq // hk)
            _, _, p, raw = _head(Q[:, h], K[:, g], V[:, g], scale, causal, window_size, softcap, slopes[h],
                                 None if allowed is None else allowed[b, h])
            dp = dO[:, h] @ V[:, g].T
            ds = p * (dp - (p * dp).sum(axis=1, keepdims=True))       # dS = P o (dP - rowsum(P o dP))
            if softcap > 0:
                ds = ds * (1 - np.tanh(raw / softcap) ** 2)           # through s = c tanh(raw / c)
            gq, gk, gv = scale * ds @ K[:, g], scale * ds.T @ Q[:, h], p.T @ dO[:, h]
            if varlen:
                dq[qi, h] += gq
                dk[ki, g] += gk
                dv[ki, g] += gv
            else:
                dq[b, :, h] += gq
                dk[b, :, g] += gk
                dv[b, :, g] += gv
    return dq, dk, dv
