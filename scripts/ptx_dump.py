#!/usr/bin/env python3
"""Write the PTX of every gpu/*.cu with the build's own nvcc flags, to show a refactor left the kernels alone.

  python3 scripts/ptx_dump.py BUILD_DIR OUT_DIR      # OUT_DIR/<arch>/<file>.ptx, raw and .code.ptx
  python3 scripts/ptx_dump.py compare BEFORE AFTER   # file by file, then kernel by kernel

Each translation unit of compile_commands.json that ends in .cu is compiled again with -ptx, once per
virtual architecture (compute_80 and compute_90a), in place of the build's --generate-code. The build
passes -lineinfo, so the raw PTX carries `.file` (paths) and `.loc` (line numbers) directives, which
move whenever a comment grows or shrinks, and a .debug_str section naming the inlined functions those
`.loc`s point at; FILE.code.ptx is the same PTX without the two directives and that section: the
instructions, registers and kernels' names, which is what a comment-only or pure-refactor change must
leave identical.

`compare` says for each architecture and file whether the .code.ptx files are identical; where they
are not, it splits both into their kernels and functions (.entry / .func) and says which are the same,
which differ (with the count of differing lines) and which exist on one side only (a template
instantiation added or removed). Three names in PTX are not code and are compared without their
numbers: branch labels and local-memory depots are numbered by the function's place in the file
($L__BB12_3, __local_depot12), so they all move when an instantiation is added or removed before them,
and nvcc names an anonymous namespace with a hash of the translation unit
(_GLOBAL__N__<hash>_10_fa2_fwd_cu_<hash>), which any change to the file's code moves, a kernel's own
or not. A kernel that still differs is shown with the count of differing lines, and the count once
register numbers are dropped too (%r12 -> %r): a small second count is a reordered or fused
instruction or two, a large one a different kernel. It exits 1 if any kernel present on both sides
differs beyond the three numbered names.
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
    out, in_debug = [], False
    for line in ptx_text.splitlines(keepends=True):
        if re.match(r"\s*\.section\s+\.debug", line):
            in_debug = True
        elif in_debug and re.match(r"\s*}", line):
            in_debug = False
            continue
        if in_debug or re.match(r"\s*\.(loc|file)\b", line):
            continue
        out.append(line)
    return "".join(out)


def functions(code_text):
    """{name: text} for each .entry / .func of a .code.ptx, plus '(module header)' for what precedes them."""
    parts, name, lines = {}, "(module header)", []
    for line in code_text.splitlines(keepends=True):
        m = re.match(r"(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)", line)
        if m and not line.rstrip().endswith(";"):  # a definition, not a prototype
            parts[name] = parts.get(name, "") + "".join(lines)
            name, lines = m.group(1), []
        lines.append(line)
    parts[name] = parts.get(name, "") + "".join(lines)
    return parts


def renumbered(text):
    """The PTX with the names that only number things (labels, depots, the namespace hash) made equal."""
    text = re.sub(r"\$L__BB\d+_", "$L__BB#_", text)
    text = re.sub(r"__local_depot\d+", "__local_depot#", text)
    return re.sub(r"(_GLOBAL__N__)[0-9a-f]{8}(_\d+_\w+?_cu_)[0-9a-f]{8}", r"\1#\2#", text)


def compare(before, after):
    import difflib
    differing = 0
    for arch in ARCHS:
        names = sorted({f for d in (before, after) for f in os.listdir(os.path.join(d, arch))
                        if f.endswith(".code.ptx")})
        for f in names:
            paths = [os.path.join(d, arch, f) for d in (before, after)]
            if not all(os.path.exists(p) for p in paths):
                print(f"{arch} {f}: only in {'after' if os.path.exists(paths[1]) else 'before'}")
                continue
            a, b = (open(p).read() for p in paths)
            if a == b:
                print(f"{arch} {f}: identical ({a.count(chr(10))} lines)")
                continue
            fa = {renumbered(n): renumbered(t) for n, t in functions(a).items()}
            fb = {renumbered(n): renumbered(t) for n, t in functions(b).items()}
            same = [n for n in fa if n in fb and fa[n] == fb[n]]
            changed = [n for n in fa if n in fb and fa[n] != fb[n]]
            gone = [n for n in fa if n not in fb]
            new = [n for n in fb if n not in fa]
            print(f"{arch} {f}: differs; {len(same)} functions identical (labels, depots and namespace hash "
                  f"renumbered), {len(changed)} changed, {len(gone)} only before, {len(new)} only after")
            def diff_lines(x, y):
                return sum(1 for l in difflib.unified_diff(x.splitlines(), y.splitlines(), n=0)
                           if l[:1] in "+-" and not l.startswith(("+++", "---")))

            def registers_renamed(t):  # %r12 -> %r: what is left is the instruction stream's shape
                return re.sub(r"%(r|rd|rs|f|fd|p|h|hh)\d+", r"%\1", t)

            for n in changed:
                d, r = diff_lines(fa[n], fb[n]), diff_lines(registers_renamed(fa[n]), registers_renamed(fb[n]))
                print(f"    changed ({d} lines +/-, {r} with registers renamed): {n}")
                differing += n != "(module header)"
            for n in gone:
                print(f"    only before: {n}")
            for n in new:
                print(f"    only after:  {n}")
    return differing


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(1 if compare(sys.argv[2], sys.argv[3]) else 0)
    if len(sys.argv) != 3:
        sys.exit("usage: ptx_dump.py BUILD_DIR OUT_DIR (BUILD_DIR holds compile_commands.json), or ptx_dump.py compare BEFORE AFTER")
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
