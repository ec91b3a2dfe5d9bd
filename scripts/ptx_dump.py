#!/usr/bin/env python3
"""Write the PTX of every gpu/*.cu with the build's own nvcc flags, to show a refactor left the kernels alone.

  python3 scripts/ptx_dump.py BUILD_DIR OUT_DIR          # OUT_DIR/<arch>/<file>.ptx, raw and .code.ptx
  diff -r /work/ptx-before /work/ptx-after                 # then compare two dumps

Each translation unit of compile_commands.json that ends in .cu is compiled again with -ptx, once per
virtual architecture (compute_80 and compute_90a), in place of the build's --generate-code. The build
passes -lineinfo, so the raw PTX carries `.file` (paths) and `.loc` (line numbers) directives, which
move whenever a comment grows or shrinks; FILE.code.ptx is the same PTX with those two directives
dropped: the instructions, registers and kernels' names, which is what a comment-only or pure-refactor
change must leave identical.
"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ARCHS = ["compute_80", "compute_90a"]


def ptx_command(entry, arch, out_path):
    args = shlex.split(entry["command"])
    kept = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a.startswith("--generate-code") or a.startswith("-gencode") or a == "-c":
            continue
        kept.append(a)
    return kept + ["-arch=" + arch, "-ptx", "-o", out_path]


def code_only(ptx_text):
    return "".join(line for line in ptx_text.splitlines(keepends=True)
                   if not re.match(r"\s*\.(loc|file)\b", line))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ptx_dump.py BUILD_DIR OUT_DIR (BUILD_DIR holds compile_commands.json)")
    build, out = sys.argv[1], sys.argv[2]
    entries = [e for e in json.load(open(os.path.join(build, "compile_commands.json")))
               if e["file"].endswith(".cu")]
    if not entries:
        sys.exit(f"{build}/compile_commands.json names no .cu file: configure with nvcc present first")
    jobs = []
    for arch in ARCHS:
        os.makedirs(os.path.join(out, arch), exist_ok=True)
        for e in entries:
            name = os.path.basename(e["file"])
            jobs.append((e, arch, os.path.abspath(os.path.join(out, arch, name + ".ptx"))))

    def run(job):
        e, arch, path = job
        subprocess.run(ptx_command(e, arch, path), cwd=e["directory"], check=True)
        with open(path) as f:
            text = f.read()
        with open(path[:-4] + ".code.ptx", "w") as f:
            f.write(code_only(text))
        return f"{arch} {os.path.basename(e['file'])}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        for i, done in enumerate(pool.map(run, jobs), 1):
            print(f"[{i}/{len(jobs)}] {done}", flush=True)


if __name__ == "__main__":
    main()
