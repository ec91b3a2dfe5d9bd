#!/usr/bin/env python3
"""Compare fa2's PTX before and after a refactor, kernel by kernel, ignoring what only names change:
the anonymous namespace's per-file hash and the basic-block label numbers (which follow the kernel's
position in the file).

Usage: python3 bench/ptx_compare.py BEFORE_DIR AFTER_DIR AFTER_WITH_EXPERIMENTS_DIR
Each folder holds fa2_fwd.ptx, fa2_bwd.ptx and fa2_fwd_pairs.ptx, made with the build's nvcc flags
(build/compile_commands.json) and `-arch=compute_90a -ptx`; the third with -DFLASHLAB_SHAPE_EXPERIMENTS=1.
"""
import re, sys
def norm(path):
    t = open(path).read()
    return re.sub(r'_GLOBAL__N__[0-9a-f]+_\d+_(\w+?)_cu_[0-9a-f]+', r'_GLOBAL__N__X_\1', t)
def entries(t):
    out, cur, name = {}, None, None
    for line in t.split('\n'):
        m = re.match(r'(?:\.visible )?\.entry (\S+?)\(', line)
        if m: name, cur = m.group(1), []
        if cur is not None: cur.append(re.sub(r'\$L__BB\d+_', '$L__BB_', line))
        if cur is not None and line == '}':
            out[name] = '\n'.join(cur); cur = None
    return out
before, after, exp = sys.argv[1:4]
def unnumbered(body):  # virtual register numbers only: the same instructions on the same operands
    return re.sub(r'%(r|rd|f|fd|p|rs|h|hh)\d+', r'%\1', body)
for f in ['fa2_fwd', 'fa2_bwd', 'fa2_fwd_pairs']:
    b, a, x = norm(f'{before}/{f}.ptx'), norm(f'{after}/{f}.ptx'), norm(f'{exp}/{f}.ptx')
    eb, ea = entries(b), entries(a)
    same = sum(1 for k in ea if k in eb and ea[k] == eb[k])
    renamed = sum(1 for k in ea if k in eb and ea[k] != eb[k] and unnumbered(ea[k]) == unnumbered(eb[k]))
    print(f"{f}: with FLASHLAB_SHAPE_EXPERIMENTS the PTX is {'identical' if b == x else 'different'}; default build: "
          f"{len(ea)} kernels, {same} identical to before, {renamed} identical but for register numbers, "
          f"{len(ea) - same - renamed} changed; {len([k for k in eb if k not in ea])} kernels no longer built")
