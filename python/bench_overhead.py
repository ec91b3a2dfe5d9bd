"""The custom op's per-call overhead over a direct C ABI call, on a GPU (issue 16: under 10 us).

Ways to run the same fa2 forward on the same tensors, each timed as the host time per call over many
back-to-back calls of a tiny problem (so the kernel itself is short and the launch queue does not fill):
  abi      flashlab_forward_v1 through ctypes, structs built once (what any binding pays at least)
  op       torch.ops.flashlab.fwd.default(q, k, v, True): the custom op as flash_attn_func calls it for
           causal=True (the options it does not set left to the schema's defaults): dispatcher, checks
           inside, outputs allocated
  op_all   the same with the 17 arguments before the mask's three passed (each costs its conversion from Python)
  packet   torch.ops.flashlab.fwd(q, k, v, True) (the overload packet, which picks the overload at each call)
  func     flashlab.flash_attn_func (flash-attn's signature: Python checks, then the op)
  alloc    the two torch.empty calls of the op's outputs alone, from Python (for scale, not subtracted)
The ways take turns, round after round, and each keeps its best round, so a drift of the machine (clocks,
another process) falls on all of them alike. overhead = op - abi and func - abi. Prints a table and, with --json, one JSON object. The op is whichever
registration torch_ops made (torch_ops.BACKEND): the C++ ops (csrc/ops.cpp) when they build, else the Python
custom_op; --ops picks one (it sets FLASHLAB_TORCH_OPS before flashlab is imported).

    FLASHLAB_LIBRARY=build/capi/libflashlab.so python3 python/bench_overhead.py --ops cpp
    FLASHLAB_LIBRARY=build/capi/libflashlab.so python3 python/bench_overhead.py --ops python
"""
import argparse
import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BACKEND_NAMES = {"cpp": "C++ ops", "python": "Python custom_op"}


def per_call_us(fns, calls, rounds, sync):
    """{name: fn} -> {name: best us per call}: the functions take turns, `rounds` rounds of `calls` calls
    each; the best round counts (the machine's noise only ever adds)."""
    for fn in fns.values():
        for _ in range(50):
            fn()
    sync()
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - t0) / calls * 1e6)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seqlen", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--ops", choices=["python", "cpp"], default=None,
                    help="the registration to time (default: C++ when it builds, else Python)")
    args = ap.parse_args()
    if args.ops:  # read when torch_ops is first imported, below
        os.environ["FLASHLAB_TORCH_OPS"] = args.ops
    import torch
    import flashlab
    from flashlab import _abi, torch_ops
    b, s, h, d = 1, args.seqlen, 1, 64  # one CTA: the kernel takes a few us, below the host time measured
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)

    lib = _abi.lib()
    problem = torch_ops._problem(b, h, h, s, s, d, d, "bf16", True, -1, -1, 0.0, 0.0, None, 0.0, 0, None, None)
    tensors = _abi.new_tensors()
    tensors.q, tensors.k, tensors.v, tensors.o, tensors.lse = (x.data_ptr() for x in (q, k, v, o, lse))
    tensors.stream = torch.cuda.current_stream().cuda_stream
    err = ctypes.create_string_buffer(256)
    fn, pref, tref = lib.flashlab_forward_v1, problem.ref, ctypes.byref(tensors)

    def abi():
        if fn(b"fa2", pref, tref, err, 256) != 0:
            raise RuntimeError(err.value.decode())

    op, packet = torch.ops.flashlab.fwd.default, torch.ops.flashlab.fwd
    every = (True, 0.0, -1, -1, 0.0, 0.0, 0, None, None, None, 0, 0, "fa2", False)  # the schema's order
    rows = per_call_us({
        "abi": abi,
        "op": lambda: op(q, k, v, True),
        "op_all": lambda: op(q, k, v, *every),
        "packet": lambda: packet(q, k, v, True),
        "func": lambda: flashlab.flash_attn_func(q, k, v, causal=True),
        "alloc": lambda: (torch.empty_like(q), torch.empty(b, h, s, device="cuda", dtype=torch.float32)),
    }, args.calls, args.rounds, torch.cuda.synchronize)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "ops": BACKEND_NAMES[torch_ops.BACKEND], "why_not_cpp": torch_ops.WHY_NOT_CPP, "shape": [b, s, h, d],
              "us_per_call": rows, "op_overhead_us": rows["op"] - rows["abi"],
              "func_overhead_us": rows["func"] - rows["abi"]}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['device']}, torch {result['torch']}, fa2 forward (batch, seqlen, heads, dim) = {tuple(result['shape'])}")
    why = f" (C++ not used: {result['why_not_cpp']})" if result["why_not_cpp"] else ""
    print(f"  op registered as: {result['ops']}{why}")
    for name, us in rows.items():
        print(f"  {name:6s} {us:8.2f} us/call")
    print(f"  overhead of the op over the C ABI:       {result['op_overhead_us']:6.2f} us (target < 10)")
    print(f"  overhead of flash_attn_func over the ABI: {result['func_overhead_us']:6.2f} us")


if __name__ == "__main__":
    main()
