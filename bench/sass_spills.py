#!/usr/bin/env python3
"""What a kernel's SASS holds: its tensor-core instructions and its local-memory spills, per kernel.

Runs where cuobjdump is (the GPU machine's CUDA toolkit). For every kernel of a library (or object file)
whose name contains PATTERN it prints the count of HGMMA / QGMMA instructions (wgmma), of HMMA
(mma.sync), and of spill instructions (STL / LDL): in all; between the kernel's first and last
tensor-core instruction ("between MMAs": where the main loop is, in a kernel laid out as ours are); and
inside a loop that issues tensor-core instructions ("in MMA loops": the span from a backward branch's
target to the branch; for a persistent kernel that is its loop over tiles too, so a spill there may cost
a tile rather than a step). Both are read from addresses, not from the control flow: a guide to where
to look, with --show printing each spill's address and the innermost such loop around it.

    python3 bench/sass_spills.py build/gpu/libflashlab_gpu_c.so [PATTERN] [--show] [--csv OUT.csv]

PATTERN defaults to "flashlab"; --show prints the spill instructions inside the loop.
"""
import argparse
import csv
import re
import subprocess
import sys


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    short = re.compile(r"flashlab::gpu::(fa3::)?|\(anonymous namespace\)::|CUtensorMap_st|(Backward|Attention)Params")
    return [short.sub("", n) for n in out[:len(names)]]


def kernels(path):
    """(mangled name, SASS lines) of every function cuobjdump lists."""
    try:
        out = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("sass_spills.py: cuobjdump not found (it comes with the CUDA toolkit on the GPU machine)")
    except subprocess.CalledProcessError as e:
        sys.exit(f"sass_spills.py: cuobjdump could not read {path}: {e.stderr.strip()}")
    for part in re.split(r"\n\s+Function : ", out)[1:]:
        name, body = part.split("\n", 1)
        yield name.strip(), body.split("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("library")
    ap.add_argument("pattern", nargs="?", default="flashlab")
    ap.add_argument("--show", action="store_true", help="print each spill in a loop with an MMA: its address and loop")
    ap.add_argument("--csv", help="also write the rows to this CSV")
    args = ap.parse_args()
    found = [(n, lines) for n, lines in kernels(args.library) if args.pattern in n]
    if not found:
        sys.exit(f"sass_spills.py: no kernel of {args.library} has '{args.pattern}' in its name")
    rows = []
    for (name, lines), pretty in zip(found, demangle([n for n, _ in found])):
        addr = [int(m.group(1), 16) if (m := re.search(r"/\*([0-9a-f]{4,})\*/", l)) else None for l in lines]
        tensor = [addr[i] for i, l in enumerate(lines) if re.search(r"\b(HGMMA|QGMMA|HMMA)\b", l)]
        spills = [i for i, l in enumerate(lines) if re.search(r"\b(STL|LDL)(\.\w+)*\b", l)]
        # Loops: a branch to an address before its own; those issuing a tensor-core instruction.
        loops = [(int(m.group(1), 16), addr[i]) for i, l in enumerate(lines)
                 if addr[i] is not None and (m := re.search(r"\bBRA\b[^;]*?0x([0-9a-f]+)", l)) and int(m.group(1), 16) < addr[i]]
        loops = sorted({(a, b) for a, b in loops if any(a <= t <= b for t in tensor)})
        in_loops = [i for i in spills if any(a <= addr[i] <= b for a, b in loops)]
        between = [i for i in spills if tensor and tensor[0] <= addr[i] <= tensor[-1]]
        row = {"kernel": pretty,
               "gmma": sum(1 for l in lines if re.search(r"\b[HQ]GMMA\b", l)),
               "hmma": sum(1 for l in lines if re.search(r"\bHMMA\b", l)),
               "spills": len(spills), "spills_between_mmas": len(between), "spills_in_mma_loops": len(in_loops)}
        rows.append(row)
        print(f"gmma {row['gmma']:4d}  hmma {row['hmma']:4d}  spills {row['spills']:4d}  between MMAs "
              f"{len(between):4d}  in MMA loops {len(in_loops):4d}  {pretty[:150]}")
        if args.show:
            for i in in_loops:
                a, b = min(((a, b) for a, b in loops if a <= addr[i] <= b), key=lambda r: r[1] - r[0])
                text = lines[i].split("*/", 1)[1].split(";", 1)[0].strip()
                print(f"        {text:32s} at {addr[i]:#x}, loop {a:#x}-{b:#x}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
