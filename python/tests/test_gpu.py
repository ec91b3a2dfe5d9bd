"""The custom op on a CUDA GPU (PyTorch >= 2.4; written for 2.11 on an H100) against PyTorch's SDPA:
forward and backward on awkward shapes, GQA, varlen, windows, and under torch.compile(fullgraph=True)
with no graph break. Skipped, with the reason shown (pytest -rs), where torch or a GPU is missing.

The op is registered in C++ where csrc/ops.cpp builds, else as the Python custom_op (torch_ops.py; one
per process). This process runs whichever FLASHLAB_TORCH_OPS picks; with the C++ ops active,
test_python_ops_in_a_subprocess runs the op's tests again on the Python ones.

Run on the GPU machine (python/README.md, "On a GPU"):
    FLASHLAB_LIBRARY=build/capi/libflashlab.so python3 -m pytest -rs python/tests/test_gpu.py

The tolerance is the harness's rule: flashlab's error at
most 2x (3x for gradients) that of SDPA run in the same low precision, plus 1e-5 (harness/check.hpp's
rule, with SDPA in fp64 as the oracle)."""
import ctypes
import inspect
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="no torch here: the GPU tests need PyTorch >= 2.4 with CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the GPU tests run on the GPU machine", allow_module_level=True)
if not hasattr(torch.library, "custom_op"):
    pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import flashlab  # noqa: E402
from flashlab import _abi, torch_ops  # noqa: E402
from flashlab._problem import ProblemArgs  # noqa: E402

DEVICE = "cuda"


def sdpa(q, k, v, causal=False, window=(-1, -1), scale=None, upcast=False, alibi=None):
    """SDPA on flash-attn's layout (batch, seqlen, heads, dim), GQA by repeating k, v, masks as flashlab
    defines them (bottom-right causal, windows) through an explicit boolean mask."""
    dtype = q.dtype
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kt = kt.repeat_interleave(hq // hk, dim=1)
    vt = vt.repeat_interleave(hq // hk, dim=1)
    mask = None
    left, right = window
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if left >= 0 or right >= 0:
        i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        j = torch.arange(sk, device=q.device)[None, :]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
        if left >= 0:
            mask &= j >= i - left
        if right >= 0:
            mask &= j <= i + right
    if alibi is not None:  # ALiBi as a float bias: -slope_h |i + sk - sq - j|, the boolean mask as -inf
        i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        j = torch.arange(sk, device=q.device)[None, :]
        bias = -alibi.to(qt.dtype)[:, None, None] * (i - j).abs().to(qt.dtype)[None]
        if mask is not None:
            bias = bias.masked_fill(~mask, float("-inf"))
        mask = bias
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    out = out.transpose(1, 2)
    if mask is not None:  # rows that see no column: flashlab (and flash-attn) give 0, SDPA NaN
        out = torch.nan_to_num(out, nan=0.0)
    return out.to(dtype) if not upcast else out


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item()


def rand(*shape, dtype=torch.bfloat16, grad=True):
    return torch.randn(*shape, device=DEVICE, dtype=dtype).requires_grad_(grad)


# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, options)
CASES = {
    "plain-d64": (2, 256, 256, 4, 4, 64, {}),
    "awkward-causal": (3, 77, 203, 6, 6, 128, {"causal": True}),
    "gqa-odd-lengths": (2, 333, 129, 8, 2, 64, {}),
    "mqa-causal-d96": (1, 1000, 1000, 4, 1, 96, {"causal": True}),
    "window": (2, 300, 300, 4, 4, 128, {"window_size": (64, 8)}),
    "d256": (1, 130, 257, 2, 2, 256, {"causal": True}),
}


def check_against_sdpa(case, impl, dtype, backward):
    b, sq, sk, hq, hk, d, opts = CASES[case]
    torch.manual_seed(0)
    q, k, v = rand(b, sq, hq, d, dtype=dtype), rand(b, sk, hk, d, dtype=dtype), rand(b, sk, hk, d, dtype=dtype)
    causal, window = opts.get("causal", False), opts.get("window_size", (-1, -1))
    out = flashlab.flash_attn_func(q, k, v, impl=impl, **opts)
    ref = sdpa(q, k, v, causal, window, upcast=True)      # fp64 oracle
    low = sdpa(q, k, v, causal, window)                   # SDPA in the same precision: sets the tolerance
    assert out.shape == q.shape and out.dtype == dtype
    tol = 2 * max_err(low, ref) + 1e-5
    assert max_err(out, ref) <= tol, f"O: {max_err(out, ref):.3e} > {tol:.3e}"
    if not backward:
        return
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_ref = torch.autograd.grad(ref, (q, k, v), dout.double())
    grads_low = torch.autograd.grad(low, (q, k, v), dout)
    for name, g, r, lo in zip(("dQ", "dK", "dV"), grads, grads_ref, grads_low):
        tol = 3 * max_err(lo, r) + 1e-5
        assert max_err(g, r) <= tol, f"{name}: {max_err(g, r):.3e} > {tol:.3e}"


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fa2_forward_backward_against_sdpa(case, dtype):
    check_against_sdpa(case, "fa2", dtype, backward=True)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fa3_forward_backward_against_sdpa(case, dtype):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3 needs an sm_90 GPU (H100/H200)")
    check_against_sdpa(case, "fa3", dtype, backward=True)  # its backward is fa3's, the split kernel at d = 256


def test_varlen_against_sdpa_per_sequence():
    torch.manual_seed(1)
    lens_q, lens_k = [17, 300, 1, 128], [200, 33, 64, 128]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    q, k, v = rand(sum(lens_q), 8, 64), rand(sum(lens_k), 2, 64), rand(sum(lens_k), 2, 64)
    out = flashlab.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    for bi in range(len(lens_q)):
        qs, ks = slice(cu_q[bi], cu_q[bi + 1]), slice(cu_k[bi], cu_k[bi + 1])
        qb, kb, vb = (x.detach()[s].unsqueeze(0).requires_grad_() for x, s in ((q, qs), (k, ks), (v, ks)))
        ref = sdpa(qb, kb, vb, causal=True, upcast=True)
        low = sdpa(qb, kb, vb, causal=True)
        assert max_err(out[qs].unsqueeze(0), ref) <= 2 * max_err(low, ref) + 1e-5, f"O of sequence {bi}"
        g_ref = torch.autograd.grad(ref, (qb, kb, vb), dout[qs].unsqueeze(0).double())
        g_low = torch.autograd.grad(low, (qb, kb, vb), dout[qs].unsqueeze(0))
        for name, g, r, lo in zip(("dQ", "dK", "dV"), (dq[qs], dk[ks], dv[ks]), g_ref, g_low):
            assert max_err(g.unsqueeze(0), r) <= 3 * max_err(lo, r) + 1e-5, f"{name} of sequence {bi}"


class Block(torch.nn.Module):
    """A small attention block: projections, flashlab's attention, an output projection."""

    def __init__(self, dim=256, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, dim // heads
        self.q = torch.nn.Linear(dim, dim)
        self.kv = torch.nn.Linear(dim, 2 * kv_heads * self.d)
        self.o = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.d)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.d).unbind(2)
        y = flashlab.flash_attn_func(q, k.contiguous(), v.contiguous(), causal=True)
        return self.o(y.reshape(b, s, -1))


def test_compile_fullgraph_matches_eager_and_sdpa():
    torch.manual_seed(2)
    model = Block().to(DEVICE, torch.bfloat16)
    x = torch.randn(2, 300, 256, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True)
    y = compiled(x)
    torch.testing.assert_close(y, eager)  # bf16 tolerances: inductor may fuse the projections differently
    y.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_compile_has_no_graph_breaks():
    model = Block().to(DEVICE, torch.bfloat16)
    x = torch.randn(2, 128, 256, device=DEVICE, dtype=torch.bfloat16)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_compile_first_in_a_fresh_process():
    """torch imported after flashlab and no eager call before compiling: the op registers at trace time."""
    code = ("import flashlab, torch\n"
            "q = torch.randn(1, 64, 2, 64, device='cuda', dtype=torch.bfloat16)\n"
            "f = torch.compile(lambda q: flashlab.flash_attn_func(q, q, q, causal=True), fullgraph=True)\n"
            "print(float(f(q).float().abs().sum()))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), os.pardir))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]


def test_op_opcheck():
    """torch.library.opcheck: schema, fake implementation, autograd registration agree with the real op."""
    q, k, v = rand(1, 64, 2, 64), rand(1, 64, 2, 64), rand(1, 64, 2, 64)
    torch.library.opcheck(torch.ops.flashlab.fwd.default, (q, k, v, True))  # as flash_attn_func calls it
    every = (q, k, v, True, 0.125, -1, -1, 0.0, 0.0, 0, None, None, None, 0, 0, "fa2", False)
    torch.library.opcheck(torch.ops.flashlab.fwd.default, every)


def test_flash_attn_func_passes_only_the_options_it_sets():
    """The op's defaults fill what flash_attn_func leaves off (a cheaper call); anything set is passed."""
    trim, defaults = torch_ops._without_trailing_defaults, torch_ops._FWD_DEFAULTS
    assert trim(defaults) == ()
    assert trim((True,) + defaults[1:]) == (True,)
    deterministic = list(inspect.signature(torch_ops._fwd_body).parameters).index("deterministic") - 3
    set_last = defaults[:deterministic] + (True,)
    assert trim(set_last + defaults[deterministic + 1:]) == set_last  # deterministic set: everything before it
    assert trim(defaults[:-3] + (3, [64], None)) == defaults[:-3] + (3, [64])  # a chunked mask: kind, values
    slopes = torch.ones(2, device=DEVICE)
    assert trim(defaults[:7] + (slopes,) + defaults[8:])[7] is slopes
    assert trim((False, 0.0, -1, 0) + defaults[4:]) == (False, 0.0, -1, 0)  # window (-1, 0): right set
    q = rand(1, 64, 2, 64, grad=False)
    out = flashlab.flash_attn_func(q, q, q, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2),
                                                           is_causal=True).transpose(1, 2)
    assert (out.float() - ref.float()).abs().max() < 2e-2


def test_input_errors_say_what_to_change():
    q = rand(1, 64, 2, 64, grad=False)
    with pytest.raises(TypeError, match=r"fa2 runs bf16 and fp16 on the GPU.*to\(torch.bfloat16\)"):
        flashlab.flash_attn_func(q.float(), q.float(), q.float())
    with pytest.raises(ValueError, match=r"is not contiguous .*\.contiguous\(\)"):
        flashlab.flash_attn_func(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2))
    with pytest.raises(ValueError, match=r"q is on cuda:0 but k is on cpu"):
        flashlab.flash_attn_func(q, q.cpu(), q)
    with pytest.raises(ValueError, match=r"impl='tiled-fa2' is a CPU implementation"):
        flashlab.flash_attn_func(q, q, q, impl="tiled-fa2")
    if torch.cuda.get_device_capability()[0] == 9:
        # the library's own message: a FlashlabError from the Python op, torch's RuntimeError (its base
        # class) from the C++ one
        with pytest.raises(RuntimeError, match=r"unsupported: ALiBi"):
            flashlab.flash_attn_func(q, q, q, alibi_slopes=torch.ones(2, device=DEVICE), impl="fa3")


def test_op_schemas_are_the_python_signatures():
    """The C++ schemas (csrc/ops.cpp) are what torch.library.custom_op infers from the Python bodies, so one
    set of fakes, CPU kernels and callers serves both registrations."""
    infer = getattr(torch.library, "infer_schema", None)
    if infer is None:
        from torch._library.infer_schema import infer_schema as infer
    for name, body in (("fwd", torch_ops._fwd_body), ("bwd", torch_ops._bwd_body)):
        registered = str(getattr(torch.ops.flashlab, name).default._schema)
        inferred = str(torch._C.parse_schema(f"flashlab::{name}" + infer(body, mutates_args=())))  # printed alike
        assert registered == inferred, torch_ops.BACKEND


def test_cpp_ops_active_and_free_of_python():
    """Where the C++ ops build they are the ones registered, and a forward on CUDA tensors, with or without a
    gradient to record, runs no Python function of flashlab's (no Python body, no Python setup_context)."""
    if torch_ops.BACKEND != "cpp":
        pytest.skip(f"the C++ ops are not active: {torch_ops.WHY_NOT_CPP}")
    for key in ("CUDA", "Autograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("flashlab::fwd", key), key
    package = os.path.dirname(os.path.abspath(flashlab.__file__))
    called = []

    def profile(frame, event, arg):
        if event == "call" and os.path.abspath(frame.f_code.co_filename).startswith(package):
            called.append(frame.f_code.co_name)

    q, k, v = rand(1, 64, 2, 64), rand(1, 64, 2, 64), rand(1, 64, 2, 64)
    op = torch.ops.flashlab.fwd.default
    args = (True,)  # causal; the other options from the schema's defaults
    sys.setprofile(profile)
    try:
        with torch.no_grad():
            op(q, k, v, *args)
        out, _ = op(q, k, v, *args)
    finally:
        sys.setprofile(None)
    assert called == [], f"flashlab's Python ran inside the C++ op: {called}"
    assert out.grad_fn is not None  # the C++ autograd recorded the call
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    assert dq.shape == q.shape and torch.isfinite(dq.float()).all()


def test_python_ops_in_a_subprocess():
    """The Python custom_op registration (the fallback) still passes the op's tests: this file again, in a
    process with FLASHLAB_TORCH_OPS=python."""
    if torch_ops.BACKEND != "cpp":
        pytest.skip(f"this process already runs the Python ops ({torch_ops.WHY_NOT_CPP})")
    env = dict(os.environ, FLASHLAB_TORCH_OPS="python",
               PYTHONPATH=os.path.join(os.path.dirname(__file__), os.pardir))
    selected = ("plain-d64 or gqa-odd-lengths or varlen or compile or opcheck or errors or cpu_tensors or schemas "
                "or alibi or mask_kwarg")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", __file__, "-k", selected]
    r = subprocess.run(command, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_fa2_alibi_forward_backward_against_sdpa():
    torch.manual_seed(3)
    q, k, v = rand(2, 190, 8, 64), rand(2, 300, 2, 64), rand(2, 300, 2, 64)
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / 8) for h in range(8)], device=DEVICE, dtype=torch.float32)
    out = flashlab.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes)
    ref = sdpa(q, k, v, causal=True, upcast=True, alibi=slopes.double())
    low = sdpa(q, k, v, causal=True, alibi=slopes)
    assert max_err(out, ref) <= 2 * max_err(low, ref) + 1e-5
    dout = torch.randn_like(out)
    for g, r, lo in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(ref, (q, k, v), dout.double()),
                        torch.autograd.grad(low, (q, k, v), dout)):
        assert max_err(g, r) <= 3 * max_err(lo, r) + 1e-5


def test_fa2_dropout_matches_the_cpu_implementations_mask():
    """The GPU and the CPU draw the same dropout mask (core's dropout.hpp): the GPU's O and gradients with
    dropout agree with the CPU implementation's on the same inputs, seed and p."""
    torch.manual_seed(4)
    q, k, v = rand(1, 130, 4, 64), rand(1, 200, 4, 64), rand(1, 200, 4, 64)
    out = flashlab.flash_attn_func(q, k, v, dropout_p=0.25, seed=9, causal=True)
    qc, kc, vc = (x.detach().cpu().float().requires_grad_() for x in (q, k, v))
    out_cpu = flashlab.flash_attn_func(qc, kc, vc, dropout_p=0.25, seed=9, causal=True)
    nodrop_low, nodrop_ref = sdpa(q, k, v, causal=True), sdpa(q, k, v, causal=True, upcast=True)
    noise = max_err(nodrop_low, nodrop_ref)  # bf16's error on this problem without dropout
    assert max_err(out.cpu(), out_cpu) <= 4 * noise + 1e-5
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_cpu = torch.autograd.grad(out_cpu, (qc, kc, vc), dout.cpu().float())
    for g, gc in zip(grads, grads_cpu):
        assert max_err(g.cpu(), gc) <= 0.05 * gc.abs().max().item()


def test_cpu_tensors_run_the_cpu_path_with_autograd():
    q = torch.randn(1, 50, 2, 16, requires_grad=True)
    out = flashlab.flash_attn_func(q, q, q, causal=True)
    ref = sdpa(q, q, q, causal=True)
    assert max_err(out, ref) < 1e-5
    (g,) = torch.autograd.grad(out.sum(), q)
    (g_ref,) = torch.autograd.grad(ref.sum(), q)
    assert max_err(g, g_ref) < 1e-4


def test_flash_attn_with_kvcache_appends_in_place_and_matches_sdpa():
    """Decoding (gpu/decode/): 2 queries a batch entry, causal, GQA 8:2, 3 new rows appended at ragged
    cache_seqlens in place, a paged cache; against SDPA in fp64 on the keys the append leaves."""
    torch.manual_seed(5)
    batch, hq, hk, d, page, pages = 3, 8, 2, 64, 16, 8
    lens = torch.tensor([5, 90, 17], dtype=torch.int32, device=DEVICE)
    q = torch.randn(batch, 2, hq, d, device=DEVICE, dtype=torch.bfloat16)
    kc = torch.randn(batch * pages, page, hk, d, device=DEVICE, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(batch * pages, device=DEVICE, dtype=torch.int32).reshape(batch, pages)
    kn = torch.randn(batch, 3, hk, d, device=DEVICE, dtype=torch.bfloat16)
    vn = torch.randn_like(kn)
    out = flashlab.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, block_table=table,
                                           causal=True, num_splits=3)
    for b in range(batch):
        n = int(lens[b]) + 3
        rows = torch.arange(n, device=DEVICE)
        phys = table[b, rows // page].long() * page + rows % page
        keys = kc.reshape(-1, hk, d)[phys]
        vals = vc.reshape(-1, hk, d)[phys]
        assert torch.equal(keys[-3:], kn[b]) and torch.equal(vals[-3:], vn[b])  # appended in place
        ref = sdpa(q[b:b + 1], keys[None], vals[None], causal=True, upcast=True)
        low = sdpa(q[b:b + 1], keys[None], vals[None], causal=True)
        assert max_err(out[b:b + 1], ref) <= 2 * max_err(low, ref) + 1e-5


# ---- masks through the C ABI v2 (flashlab_problem's mask fields) and a prepared device mask

def _masked(q, k, v, mask, causal=False, handle=None, entry="flashlab_forward_v1", grads=None, kernel=b"fa2"):
    """`kernel` (fa2, or fa3 forward only) through the raw C ABI on (b, s, h, d) tensors with a mask
    (ProblemArgs(mask=...)); returns o, lse."""
    import ctypes
    from flashlab import _abi
    from flashlab._problem import ProblemArgs
    b, s, h, d = q.shape
    problem = ProblemArgs(batch=b, heads_q=h, heads_kv=h, seqlen_q=s, seqlen_k=s, head_dim=d, dtype="bf16",
                          causal=causal, mask=mask)
    o, lse = torch.full_like(q, float("nan")), torch.empty(b, h, s, device=DEVICE, dtype=torch.float32)
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse = (x.data_ptr() for x in (q, k, v, o, lse))
    t.stream = torch.cuda.current_stream().cuda_stream
    t.mask = handle
    _abi.call(_abi.lib().flashlab_forward_v1, kernel, problem.ref, ctypes.byref(t))
    if grads is not None:  # (dout, dq, dk, dv)
        t.d_o, t.dq, t.dk, t.dv = (x.data_ptr() for x in grads)
        _abi.call(_abi.lib().flashlab_backward_v1, b"fa2", problem.ref, ctypes.byref(t))
    torch.cuda.synchronize()
    return o, lse


@pytest.mark.parametrize("d", [64, 128, 256])
def test_fa3_backward_dq_at_any_4_byte_address(d):
    """fa3's dQ conversion stores whole 16-byte chunks of rows where dq allows it, 4-byte pieces where its
    base is not 16-byte aligned (fa3_bwd.cu bwd_convert_kernel): the same bits either way."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3 needs an sm_90 GPU (H100/H200)")
    import ctypes
    torch.manual_seed(3)
    b, s, h = 2, 333, 4
    q, k, v, d_o = (torch.randn(b, s, h, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(4))
    problem = ProblemArgs(batch=b, heads_q=h, heads_kv=h, seqlen_q=s, seqlen_k=s, head_dim=d, dtype="bf16", causal=True)
    o, lse = torch.empty_like(q), torch.empty(b, h, s, device=DEVICE, dtype=torch.float32)
    raw = torch.empty(q.numel() + 2, device=DEVICE, dtype=torch.bfloat16)
    dqs = [torch.empty_like(q), raw[2:].view(q.shape)]  # the second 4 bytes past a 16-byte boundary
    assert dqs[1].data_ptr() % 16 == 4
    t = _abi.new_tensors()
    t.q, t.k, t.v, t.o, t.lse, t.d_o = (x.data_ptr() for x in (q, k, v, o, lse, d_o))
    t.stream = torch.cuda.current_stream().cuda_stream
    _abi.call(_abi.lib().flashlab_forward_v1, b"fa3", problem.ref, ctypes.byref(t))
    dk, dv = torch.empty_like(q), torch.empty_like(q)
    for dq in dqs:
        t.dq, t.dk, t.dv = dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
        _abi.call(_abi.lib().flashlab_backward_v1, b"fa3", problem.ref, ctypes.byref(t))
        torch.cuda.synchronize()
    assert torch.equal(dqs[0], dqs[1])
    assert dqs[0].abs().max().item() > 0


def _prepare(q, mask, causal=False, kernel=b"fa2"):
    import ctypes
    from flashlab import _abi
    from flashlab._problem import ProblemArgs
    b, s, h, d = q.shape
    problem = ProblemArgs(batch=b, heads_q=h, heads_kv=h, seqlen_q=s, seqlen_k=s, head_dim=d, dtype="bf16",
                          causal=causal, mask=mask)
    out = ctypes.c_void_p()
    _abi.call(_abi.lib().flashlab_mask_prepare_v2, kernel, problem.ref, torch.cuda.current_stream().cuda_stream,
              ctypes.byref(out))
    return out


def _allowed(kind, value, s, causal):
    """(s, s) bool on the GPU: mask.hpp's definitions (seqlen_q == seqlen_k)."""
    i = torch.arange(s, device=DEVICE)[:, None]
    j = torch.arange(s, device=DEVICE)[None, :]
    if kind == "prefix-lm":
        return (j < value) | (j <= i)
    if kind == "chunked":
        return (i // value == j // value) & (j <= i)
    doc = torch.repeat_interleave(torch.arange(len(value), device=DEVICE), torch.tensor(value, device=DEVICE))
    return (doc[i] == doc[j]) & ((j <= i) if causal else True)


MASKS = {
    "document": (("document", [300, 650, 50]), False),
    "document-causal": (("document", [300, 650, 50]), True),
    "prefix-lm": (("prefix-lm", 250), False),
    "chunked": (("chunked", 128), False),
}


@pytest.mark.parametrize("name", list(MASKS))
def test_fa2_masks_through_the_abi_against_sdpa(name):
    """Each interval mask on fa2, forward and backward, against SDPA with the same boolean mask; the
    prepared device mask gives the very same output as the one built per call."""
    (kind, value), causal = MASKS[name]
    torch.manual_seed(0)
    b, s, h, d = 2, 1000, 4, 64
    q, k, v, dout = (torch.randn(b, s, h, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(4))
    grads = [dout] + [torch.full_like(q, float("nan")) for _ in range(3)]
    o, _ = _masked(q, k, v, (kind, value), causal, grads=grads)
    allowed = _allowed(kind, value, s, causal)[None, None]
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (qt, kt, vt))
    ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=allowed)
    low = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed)
    tol = 2 * max_err(low, ref) + 1e-5
    assert max_err(o.transpose(1, 2), ref) <= tol
    ref.backward(dout.transpose(1, 2).double())
    low.backward(dout.transpose(1, 2))
    for name_g, g, r, lo in zip(("dQ", "dK", "dV"), grads[1:], (q64, k64, v64), (qt, kt, vt)):
        tol = 3 * max_err(lo.grad, r.grad) + 1e-5
        assert max_err(g.transpose(1, 2), r.grad) <= tol, name_g

    handle = _prepare(q, (kind, value), causal)
    try:
        o2, _ = _masked(q, k, v, (kind, value), causal, handle=handle.value)
        assert torch.equal(o2, o)
        from flashlab import _abi
        with pytest.raises(_abi.FlashlabError, match="tensors->mask was prepared for .* but this call is"):
            _masked(q, k, v, ("document", [500, 500]), False, handle=handle.value)
    finally:
        from flashlab import _abi
        _abi.lib().flashlab_mask_free(handle)


@pytest.mark.parametrize("name", list(MASKS) + ["dense"])
def test_fa3_masks_through_the_abi_against_sdpa(name):
    """fa3's forward with each mask against SDPA given the same boolean mask (rows that see a key; rows that
    see none give O = 0 and LSE = -inf, where SDPA gives NaN); a device mask prepared for fa3 gives the very
    same output. head_dim 128: fa3's 128 x 128 tiles, whose block lists differ from fa2's."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3 needs an sm_90 GPU (H100/H200)")
    torch.manual_seed(0)
    b, s, h, d = 2, 1000, 4, 128
    if name == "dense":  # holes, a dark band of keys 256..383 (one whole K/V block), dark rows 100..119
        i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
        allowed = ((i * 7 + j * 3) % 5 != 0) & ~((j >= 256) & (j < 384))
        allowed[100:120] = False
        mask, causal = ("dense", allowed.numpy()), False
        allowed = allowed.to(DEVICE)
    else:
        (kind, value), causal = MASKS[name]
        mask, allowed = (kind, value), _allowed(kind, value, s, causal)
    q, k, v = (torch.randn(b, s, h, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    o, lse = _masked(q, k, v, mask, causal, kernel=b"fa3")
    seen = allowed.any(-1)
    rows, dark = seen.nonzero().squeeze(1), (~seen).nonzero().squeeze(1)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    ref = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), attn_mask=allowed[None, None])
    low = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed[None, None])
    tol = 2 * max_err(low[:, :, rows], ref[:, :, rows]) + 1e-5
    assert max_err(o.transpose(1, 2)[:, :, rows], ref[:, :, rows]) <= tol
    assert torch.all(o.transpose(1, 2)[:, :, dark] == 0) and torch.all(lse[:, :, dark] == float("-inf"))

    handle = _prepare(q, mask, causal, kernel=b"fa3")
    try:
        o2, _ = _masked(q, k, v, mask, causal, handle=handle.value, kernel=b"fa3")
        assert torch.equal(o2, o)
    finally:
        from flashlab import _abi
        _abi.lib().flashlab_mask_free(handle)


def test_prepare_refuses_a_mask_the_kernel_cannot_take():
    from flashlab import _abi
    q = torch.randn(1, 64, 2, 64, device=DEVICE, dtype=torch.bfloat16)
    with pytest.raises(_abi.FlashlabError, match="standard cannot run this problem, so no mask is prepared for it: "
                                                 "unsupported: mask kind document"):
        _prepare(q, ("document", [32, 32]), kernel=b"standard")


# ---- masks through the public API: flash_attn_func(..., mask=(kind, value)) on the custom op

def sdpa_allowed(q, k, v, allowed, upcast=False):
    """SDPA on flash-attn's layout with a boolean mask broadcastable to (b, hq, sq, sk), GQA by repeating k, v."""
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    if upcast:
        qt, kt, vt = qt.double(), kt.double(), vt.double()
    group = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed).transpose(1, 2)


def _dense_per_entry(b, s):
    """(b, 1, s, s) bool on the GPU: holes that differ by batch entry, a band of keys dark for every query
    (a whole K/V block at fa2's and fa3's tiles); every row still sees a key (SDPA gives NaN for one that sees
    none)."""
    i, j = torch.arange(s, device=DEVICE)[:, None], torch.arange(s, device=DEVICE)[None, :]
    return torch.stack([((i * (7 + e) + j * 3) % 5 != 0) & ~((j >= 128) & (j < 256)) for e in range(b)])[:, None]


KWARG_MASKS = {  # seqlen 300: name -> (mask, causal)
    "document-causal": (("document", [100, 170, 30]), True),
    "prefix-lm": (("prefix-lm", 90), False),
    "chunked": (("chunked", 64), False),
    "dense-4d": (None, False),  # _dense_per_entry, a bool tensor on the GPU
}


@pytest.mark.parametrize("impl", ["fa2", "fa3"])
@pytest.mark.parametrize("name", list(KWARG_MASKS))
def test_mask_kwarg_forward_backward_against_sdpa(impl, name):
    """flash_attn_func(mask=...) on CUDA tensors against SDPA given the same boolean mask, forward and
    backward, GQA. fa3's backward takes the interval masks (prefix-lm, document, chunked); under a dense mask
    autograd runs fa2's (as for ALiBi and dropout)."""
    if impl == "fa3" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3 needs an sm_90 GPU (H100/H200)")
    torch.manual_seed(5)
    b, s, hq, hk, d = 2, 300, 4, 2, 128
    mask, causal = KWARG_MASKS[name]
    if mask is None:
        allowed = _dense_per_entry(b, s)
        mask = ("dense", allowed)
    else:
        allowed = _allowed(*mask, s, causal)[None, None]
    q, k, v = rand(b, s, hq, d), rand(b, s, hk, d), rand(b, s, hk, d)
    out = flashlab.flash_attn_func(q, k, v, causal=causal, mask=mask, impl=impl)
    ref, low = sdpa_allowed(q, k, v, allowed, upcast=True), sdpa_allowed(q, k, v, allowed)
    assert max_err(out, ref) <= 2 * max_err(low, ref) + 1e-5
    unmasked = flashlab.flash_attn_func(q, k, v, causal=causal, impl=impl)
    assert max_err(out, unmasked) > 0.05  # the mask reached the kernel
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_ref = torch.autograd.grad(ref, (q, k, v), dout.double())
    grads_low = torch.autograd.grad(low, (q, k, v), dout)
    for g_name, g, r, lo in zip(("dQ", "dK", "dV"), grads, grads_ref, grads_low):
        assert max_err(g, r) <= 3 * max_err(lo, r) + 1e-5, g_name


def test_mask_kwarg_under_compile_fullgraph():
    """A mask is plain Python numbers (and a tensor for dense): torch.compile(fullgraph=True) traces it
    into the op's arguments, no graph break, the same answer as eager."""
    q, k, v = rand(2, 256, 4, 64, grad=False), rand(2, 256, 2, 64, grad=False), rand(2, 256, 2, 64, grad=False)
    dense = _dense_per_entry(2, 256)
    for mask in (("chunked", 64), ("prefix-lm", [10, 200]), ("dense", dense)):
        f = torch.compile(lambda q, k, v: flashlab.flash_attn_func(q, k, v, mask=mask), fullgraph=True)
        torch.testing.assert_close(f(q, k, v), flashlab.flash_attn_func(q, k, v, mask=mask), rtol=0, atol=0)
        torch._dynamo.reset()


def test_mask_kwarg_opcheck():
    """opcheck with the mask arguments: schema, fake implementation and autograd agree with the real op."""
    q, k, v = rand(1, 128, 2, 64), rand(1, 128, 2, 64), rand(1, 128, 2, 64)
    op = torch.ops.flashlab.fwd.default
    base = (q, k, v, False, 0.125, -1, -1, 0.0, 0.0, 0, None, None, None, 0, 0, "fa2", False)
    torch.library.opcheck(op, base + (3, [32], None))                       # chunked
    torch.library.opcheck(op, base + (2, [50, 78], None))                   # document
    torch.library.opcheck(op, base + (4, None, _dense_per_entry(1, 128)))   # dense


def test_mask_kwarg_errors_say_what_is_wrong():
    q = rand(1, 64, 2, 64, grad=False)
    with pytest.raises(RuntimeError, match="document lengths 30,4 sum to 34, but seqlen is 64"):
        flashlab.flash_attn_func(q, q, q, mask=("document", [30, 4]))
    with pytest.raises(RuntimeError, match=r"the dense mask \(C ABI\) has shape \(64, 63\)"):
        flashlab.flash_attn_func(q, q, q, mask=("dense", torch.ones(64, 63, dtype=torch.bool, device=DEVICE)))
    with pytest.raises(ValueError, match=r"a dense mask has shape \(sq, sk\) or .*got \(64,\)"):
        flashlab.flash_attn_func(q, q, q, mask=("dense", torch.ones(64, dtype=torch.bool, device=DEVICE)))
    with pytest.raises(ValueError, match="mask kind 'sliding': expected one of prefix-lm, document, chunked, dense"):
        flashlab.flash_attn_func(q, q, q, mask=("sliding", 8))
    with pytest.raises(RuntimeError, match="prefix-lm is already causal after the prefix"):
        flashlab.flash_attn_func(q, q, q, causal=True, mask=("prefix-lm", 8))
    with pytest.raises(RuntimeError, match=r"unsupported: mask kind chunked \(fa2 and fa3 take mask functions\)"):
        flashlab.flash_attn_func(q, q, q, mask=("chunked", 16), impl="standard")
    cu = torch.tensor([0, 32, 64], dtype=torch.int32, device=DEVICE)
    with pytest.raises(RuntimeError, match=r"unsupported: mask kind chunked with varlen"):
        flashlab.flash_attn_varlen_func(q[0], q[0], q[0], cu, cu, 32, 32, mask=("chunked", 16))
    if torch.cuda.get_device_capability()[0] == 9:
        # fa3's backward asked directly under a dense mask (autograd would pick fa2's): the library's refusal,
        # with the way out; under a mask function it runs, and agrees with fa2's
        dense = torch.ones(64, 64, dtype=torch.bool, device=DEVICE).tril()
        op_args = (False, 0.0, -1, -1, 0.0, 0.0, 0, None, None, None, 0, 0, "fa3", False, 4, None, dense)
        out, lse = torch.ops.flashlab.fwd.default(q, q, q, *op_args)
        with pytest.raises(RuntimeError, match=r"unsupported: mask kind dense in the fa3 backward \(fa2's "
                                               r"backward takes it"):
            torch.ops.flashlab.bwd.default(torch.ones_like(out), q, q, q, out, lse, None, None, 0, 0, 0.0, 0.0,
                                           False, -1, -1, 0.0, None, 0, "fa3", False, 4, None, dense)
        op_args = (False, 0.0, -1, -1, 0.0, 0.0, 0, None, None, None, 0, 0, "fa3", False, 3, [16], None)
        out, lse = torch.ops.flashlab.fwd.default(q, q, q, *op_args)
        bwd_args = (None, None, 0, 0, 0.0, 0.0, False, -1, -1, 0.0, None, 0)
        grads = {impl: torch.ops.flashlab.bwd.default(torch.ones_like(out), q, q, q, out, lse, *bwd_args, impl,
                                                      False, 3, [16], None) for impl in ("fa3", "fa2")}
        for mine, theirs in zip(grads["fa3"], grads["fa2"]):
            assert max_err(mine, theirs) <= 0.02 * theirs.float().abs().max().item() + 1e-3


def test_mask_kwarg_cpu_tensors_match_the_numpy_path():
    """CPU torch tensors run the CPU implementation with the mask: the same O and gradients as numpy arrays
    through flash_attn_func / flash_attn_backward."""
    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 40, 2, 16, requires_grad=True) for _ in range(3))
    mask = ("prefix-lm", [5, 33])
    out, lse, _ = flashlab.flash_attn_func(q, k, v, mask=mask, return_attn_probs=True)
    arrays = [x.detach().numpy() for x in (q, k, v)]
    out_np, lse_np, _ = flashlab.flash_attn_func(*arrays, mask=mask, return_attn_probs=True)
    assert max_err(out, torch.from_numpy(out_np)) == 0 and max_err(lse, torch.from_numpy(lse_np)) == 0
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_np = flashlab.flash_attn_backward(dout.numpy(), *arrays, out_np, lse_np, mask=mask)
    for g, g_np in zip(grads, grads_np):
        assert max_err(g, torch.from_numpy(g_np)) == 0


def fp8_inputs(b, sq, sk, hq, hk, d, seed):
    torch.manual_seed(seed)
    xs = [torch.randn(b, s, h, d, device=DEVICE) for s, h in ((sq, hq), (sk, hk), (sk, hk))]
    quantized = [flashlab.quantize_fp8(x) for x in xs]
    dequantized = [x8.float() * descale for x8, descale in quantized]  # what the kernel computes on
    return quantized, dequantized


def fp8_baseline(q, k, v, causal, fp64):
    """Attention on the dequantized inputs: in fp64 (the oracle), or in fp32 with P~ = exp(S - m) rounded to
    e4m3 before P V and O to bf16, as reference::forward_fp8 (the harness's gpu-fa3-fp8 rule) computes it."""
    dt = torch.float64 if fp64 else torch.float32
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qt, kt, vt = (x.transpose(1, 2).to(dt) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(hq // hk, dim=1), vt.repeat_interleave(hq // hk, dim=1)
    s = qt @ kt.transpose(-1, -2) / d ** 0.5
    if causal:
        i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        s = s.masked_fill(torch.arange(sk, device=q.device)[None, :] > i, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    lse = (m + p.sum(-1, keepdim=True).log()).squeeze(-1)
    pv = p if fp64 else p.to(torch.float8_e4m3fn).to(dt)
    out = (pv @ vt) / p.sum(-1, keepdim=True)
    out = out.transpose(1, 2)
    return (out if fp64 else out.to(torch.bfloat16).to(dt)), lse


@pytest.mark.parametrize("shape,causal", [((2, 256, 256, 4, 4, 128), False), ((1, 97, 1025, 8, 2, 128), True),
                                          ((2, 130, 257, 2, 2, 256), True), ((1, 64, 64, 2, 1, 80), False)])
def test_fa3_fp8_forward_within_its_rule(shape, causal):
    """flash_attn_fp8_func on quantize_fp8's tensors, against the fp64 oracle on the dequantized inputs,
    within twice the error of the e4m3-P baseline (the harness's gpu-fa3-fp8 rule); LSE within 1e-3."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3's FP8 forward needs an sm_90 GPU (H100/H200)")
    quantized, (q, k, v) = fp8_inputs(*shape, seed=sum(shape))
    (q8, dq), (k8, dk), (v8, dv) = quantized
    out, lse = flashlab.flash_attn_fp8_func(q8, k8, v8, dq, dk, dv, causal=causal, return_softmax_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == q8.shape and lse.shape == (shape[0], shape[3], shape[1])
    ref, ref_lse = fp8_baseline(q, k, v, causal, fp64=True)
    low, _ = fp8_baseline(q, k, v, causal, fp64=False)
    tol = 2 * max_err(low, ref) + 1e-5
    assert max_err(out, ref) <= tol, f"O: {max_err(out, ref):.3e} > {tol:.3e}"
    assert max_err(lse, ref_lse) <= 1e-3
    # descales as one-element tensors give the same bits; a bf16 q is refused with the way out
    again = flashlab.flash_attn_fp8_func(q8, k8, v8, torch.tensor(dq), torch.tensor([dk]), dv, causal=causal)
    assert torch.equal(again, out)
    with pytest.raises(TypeError, match=r"q is torch.bfloat16: the FP8 forward takes torch.float8_e4m3fn"):
        flashlab.flash_attn_fp8_func(q.to(torch.bfloat16), k8, v8)
    p = ProblemArgs(batch=1, heads_q=1, heads_kv=1, seqlen_q=4, seqlen_k=4, head_dim=128, dtype="bf16")
    with pytest.raises(RuntimeError, match=r"fa3-fp8 is a forward only"):  # its backward, asked directly
        _abi.call(_abi.lib().flashlab_backward_v1, b"fa3-fp8", p.ref, ctypes.byref(_abi.new_tensors()))


@pytest.mark.parametrize("sq", [1, 16, 200])
def test_pack_gqa_kwarg_packed_and_unpacked_agree(sq):
    """flash_attn_func(impl="fa3", pack_gqa=True / False): both within the SDPA rule, their outputs within
    1e-2 and LSEs within 1e-5 of each other (a packed tile only regroups rows), gradients through fa3's
    backward; pack_gqa on another impl, or where a group cannot pack, is refused with the reason."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("fa3 needs an sm_90 GPU (H100/H200)")
    torch.manual_seed(sq)
    q, k, v = rand(2, sq, 16, 128), rand(2, 512, 2, 128), rand(2, 512, 2, 128)
    ref = sdpa(q, k, v, causal=True, upcast=True)
    tol = 2 * max_err(sdpa(q, k, v, causal=True), ref) + 1e-5
    runs = {}
    for pack in (True, False):
        out, lse, _ = flashlab.flash_attn_func(q, k, v, causal=True, impl="fa3", pack_gqa=pack, return_attn_probs=True)
        assert max_err(out, ref) <= tol, f"pack_gqa={pack}: {max_err(out, ref):.3e} > {tol:.3e}"
        runs[pack] = (out, lse, torch.autograd.grad(out, (q, k, v), torch.ones_like(out)))
    assert max_err(runs[True][0], runs[False][0]) <= 1e-2 and max_err(runs[True][1], runs[False][1]) <= 1e-5
    for g_packed, g_unpacked in zip(runs[True][2], runs[False][2]):
        assert max_err(g_packed, g_unpacked) <= 1e-2 * g_unpacked.float().abs().max().item() + 1e-3
    with pytest.raises(ValueError, match=r"pack_gqa is fa3's option on CUDA tensors .* impl='fa2'"):
        flashlab.flash_attn_func(q, k, v, impl="fa2", pack_gqa=True)
    q3, k3 = rand(1, 8, 6, 128), rand(1, 64, 2, 128)  # 3 query heads a kv head: 128 rows do not split in 3
    with pytest.raises(RuntimeError, match=r"pack_gqa with 3 query heads a kv head"):
        flashlab.flash_attn_func(q3, k3, k3, impl="fa3", pack_gqa=True)
