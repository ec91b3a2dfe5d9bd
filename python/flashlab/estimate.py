"""flashlab.estimate: the simulator's records (`flashlab estimate --format json`) as Python dicts.

    flashlab.estimate(seqlen=4096, hdim=128, causal=True, gpu="h100-sxm", algo="all")
    flashlab.estimate(seqlen=[512, 1024, 2048], algo="fa2", as_dataframe=True)   # needs pandas

One record per (seqlen, algorithm), the CLI's fields: algo, gpu, pass, seqlen_q, seqlen_k, head_dim, flops,
hbm/l2/sram bytes, seconds, bound, speedup_vs_standard, ... (simulator/report.cpp writes them)."""
import json

from . import _abi
from ._spec import problem_from_flags


def estimate(seqlen=4096, *, gpu="h100-sxm", algo="all", pass_="fwd", impl="upstream", dtype="bf16",
             as_dataframe=False, **flags):
    """Records for one sequence length or a list of them (a sweep, as --seqlen A:B:xK). `flags` are the
    problem's command-line names (batch, heads, kv_heads, hdim, causal, window, softcap, alibi, dropout,
    seqlen_q, seqlen_k). pass_ is --pass: fwd | bwd | fwd+bwd."""
    seqlens = [int(n) for n in seqlen] if hasattr(seqlen, "__iter__") else [int(seqlen)]
    records = []
    for n in seqlens:
        problem = problem_from_flags(n, dtype=dtype, **flags)
        text = _abi.call_text(_abi.lib().flashlab_estimate, problem.ref, gpu.encode(), algo.encode(), pass_.encode(),
                              impl.encode())
        records.extend(json.loads(text))
    if not as_dataframe:
        return records
    try:
        import pandas
    except ImportError:
        raise ImportError("as_dataframe=True needs pandas (apt-get install python3-pandas); without it, "
                          "estimate() returns a list of dicts") from None
    return pandas.DataFrame.from_records(records)
