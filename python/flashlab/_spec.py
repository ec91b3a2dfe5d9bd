"""A problem spelled as the command line spells it (core's ProblemSpec): --batch, --heads, --kv-heads,
--seqlen (or --seqlen-q/--seqlen-k), --hdim, --causal, --window, --softcap, --alibi, --dropout, --seed,
--dtype. estimate(), walk() and check() take these names as keyword arguments, so a Python call and
a `flashlab` command with the same flags describe the same problem."""
from ._problem import ProblemArgs


def problem_from_flags(seqlen, *, batch=1, heads=1, kv_heads=None, seqlen_q=None, seqlen_k=None, hdim=64,
                       causal=False, window=(-1, -1), softcap=0.0, alibi=False, dropout=0.0, seed=0, dtype="fp32"):
    return ProblemArgs(batch=batch, heads_q=heads, heads_kv=heads if kv_heads is None else kv_heads,
                       seqlen_q=seqlen if seqlen_q is None else seqlen_q,  # a 0 given is refused, not defaulted
                       seqlen_k=seqlen if seqlen_k is None else seqlen_k, head_dim=hdim, dtype=dtype,
                       causal=causal, window_size=window, softcap=softcap, alibi=alibi, dropout_p=dropout,
                       seed=seed)
