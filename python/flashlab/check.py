"""flashlab.check: one implementation against the fp64 oracle by the harness's rule (harness/check.hpp):
max|out - oracle| <= 2 x max|naive in the same precision - oracle| + 1e-5, every element, fresh random
inputs seeded by seed. Returns {"impl", "problem", "pass", "skipped", "fields": [{"field", "error",
"tolerance", "pass"}], "fwd_seconds", "bwd_seconds"}."""
import json

from . import _abi
from ._spec import problem_from_flags


def check(impl="tiled-fa2", seqlen=256, *, pass_="fwd", **flags):
    problem = problem_from_flags(seqlen, **flags)
    return json.loads(_abi.call_text(_abi.lib().flashlab_check, impl.encode(), problem.ref, pass_.encode()))


def implementations():
    """The implementations libflashlab.so knows: [{"name", "description", "memory", "has_backward", ...}]."""
    return json.loads(_abi.call_text(_abi.lib().flashlab_implementations))
