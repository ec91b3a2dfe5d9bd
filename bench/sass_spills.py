#!/usr/bin/env python3
"""What a kernel's SASS holds: its tensor-core instructions and its local-memory spills, per kernel.

Runs where cuobjdump is (the GPU machine's CUDA toolkit). For every kernel of a library (or object file)
whose name contains PATTERN it prints the count of HGMMA / QGMMA instructions (wgmma), of HMMA
(mma.sync), of spill instructions (STL / LDL) in all, and of those between the kernel's first and last
tensor-core instruction: the main loop, where a spill costs every tile (a persistent kernel's span also
holds its epilogues; the producer's and the prologue's spills fall outside it).

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
    ap.add_argument("--show", action="store_true", help="print the spill instructions inside the main loop")
    ap.add_argument("--csv", help="also write the rows to this CSV")
    args = ap.parse_args()
    found = [(n, lines) for n, lines in kernels(args.library) if args.pattern in n]
    if not found:
        sys.exit(f"sass_spills.py: no kernel of {args.library} has '{args.pattern}' in its name")
    rows = []
    for (name, lines), pretty in zip(found, demangle([n for n, _ in found])):
        tensor = [i for i, l in enumerate(lines) if re.search(r"\b(HGMMA|QGMMA|HMMA)\b", l)]
        spills = [i for i, l in enumerate(lines) if re.search(r"\b(STL|LDL)(\.\w+)*\b", l)]
        inner = [i for i in spills if tensor and tensor[0] <= i <= tensor[-1]]
        row = {"kernel": pretty,
               "gmma": sum(1 for l in lines if re.search(r"\b[HQ]GMMA\b", l)),
               "hmma": sum(1 for l in lines if re.search(r"\bHMMA\b", l)),
               "spills": len(spills), "spills_in_loop": len(inner)}
        rows.append(row)
        print(f"gmma {row['gmma']:4d}  hmma {row['hmma']:4d}  spills {row['spills']:4d}  in loop "
              f"{row['spills_in_loop']:4d}  {pretty[:150]}")
        if args.show:
            for i in inner:
                print("        " + lines[i].strip()[:100])
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
