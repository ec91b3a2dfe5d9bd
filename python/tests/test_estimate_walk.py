"""flashlab.estimate and flashlab.walk say exactly what the CLI says: the estimate's records equal
`flashlab estimate --format json` parsed, and the walk's events equal `flashlab trace`'s lines."""
import json
import subprocess

import numpy as np
import pytest

import flashlab


def run_cli(cli, *args):
    return subprocess.run([cli, *args], check=True, capture_output=True, text=True).stdout


# (Python keyword arguments, the same problem as CLI flags)
ESTIMATES = [
    (dict(seqlen=4096), ["--seqlen", "4096"]),
    (dict(seqlen=[512, 1024, 2048], algo="fa2", hdim=128, causal=True),
     ["--seqlen", "512:2048:x2", "--algo", "fa2", "--hdim", "128", "--causal"]),
    (dict(seqlen=3000, batch=2, heads=16, kv_heads=4, pass_="fwd+bwd", gpu="a100-40gb", dtype="fp16"),
     ["--seqlen", "3000", "--batch", "2", "--heads", "16", "--kv-heads", "4", "--pass", "fwd+bwd", "--gpu",
      "a100-40gb", "--dtype", "fp16"]),
    (dict(seqlen=8192, hdim=128, algo="fa3", impl="flashlab", window=(256, 0), softcap=30.0),
     ["--seqlen", "8192", "--hdim", "128", "--algo", "fa3", "--impl", "flashlab", "--window", "256,0",
      "--softcap", "30"]),
]


@pytest.mark.parametrize("kwargs,flags", ESTIMATES)
def test_estimate_equals_cli_json(cli, kwargs, flags):
    records = flashlab.estimate(**kwargs)
    expected = json.loads(run_cli(cli, "estimate", "--format", "json", *flags))
    assert len(records) >= 1
    assert records == expected


def test_estimate_takes_numpy_sweeps():
    sweep = np.array([1024, 2048])
    assert flashlab.estimate(seqlen=sweep, algo="fa2") == flashlab.estimate(seqlen=[1024, 2048], algo="fa2")
    assert flashlab.estimate(seqlen=sweep[0], algo="fa2") == flashlab.estimate(seqlen=1024, algo="fa2")


def test_estimate_dataframe_needs_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            flashlab.estimate(seqlen=1024, as_dataframe=True)
    else:
        frame = flashlab.estimate(seqlen=[1024, 2048], algo="fa2", as_dataframe=True)
        assert list(frame["seqlen"]) == [1024, 2048]


# (Python keyword arguments, the same walk as CLI flags)
WALKS = [
    (dict(seqlen=96, causal=True, br=32, bc=32), ["--seqlen", "96", "--causal", "--br", "32", "--bc", "32"]),
    (dict(seqlen_q=70, seqlen_k=130, heads=4, kv_heads=2, order="fa1", br=16, bc=48, seed=3),
     ["--seqlen-q", "70", "--seqlen-k", "130", "--heads", "4", "--kv-heads", "2", "--order", "fa1", "--br", "16",
      "--bc", "48", "--seed", "3"]),
    (dict(seqlen=64, order="bwd", window=(20, 3), dtype="bf16"),
     ["--seqlen", "64", "--order", "bwd", "--window", "20,3", "--dtype", "bf16"]),
]


@pytest.mark.parametrize("kwargs,flags", WALKS)
def test_walk_equals_cli_trace(cli, kwargs, flags):
    seqlen = kwargs.pop("seqlen", 128)
    events = list(flashlab.walk(seqlen, **kwargs))
    expected = [json.loads(line) for line in run_cli(cli, "trace", *flags).splitlines()]
    assert len(events) > 10
    assert events == expected


def test_walk_of_own_tensors_moves_the_same_bytes_with_other_statistics():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 80, 1, 16)).astype(np.float32) for _ in range(3))
    own = list(flashlab.walk(80, hdim=16, q=q, k=k, v=v, br=32, bc=32))
    rand = list(flashlab.walk(80, hdim=16, br=32, bc=32))
    transfers = lambda evs: [e for e in evs if e["event"] == "transfer"]  # noqa: E731
    stats = lambda evs: [e for e in evs if e["event"] == "row_stats"]  # noqa: E731
    assert transfers(own) == transfers(rand)
    assert stats(own) != stats(rand)
    # the last row statistics of row 0 give its LSE = m + log(l), which the forward returns
    _, lse, _ = flashlab.flash_attn_func(q, k, v, return_attn_probs=True)
    last = [e for e in stats(own) if e["row"] == 0][-1]
    assert abs(last["m_new"] + np.log(last["l_new"]) - lse[0, 0, 0]) < 1e-5
