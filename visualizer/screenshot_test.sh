#!/bin/sh
# The visualizer's must-show command under Xvfb: a PNG of the state after 12
# computed tiles of a causal N=1024, d=64 forward, and the dump of the panels'
# numbers, both checked by flashlab_viz_check against its own Stepper run.
# Then other walks, and mask functions, whose every tile centre is checked
# against the block mask.
# usage: screenshot_test.sh FLASHLAB_VIZ FLASHLAB_VIZ_CHECK WORKDIR
set -eu
viz=$1 check=$2 dir=$3
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "skipped: no xvfb-run (install xvfb and xauth to run the visualizer's screenshot test)"
  exit 0
fi
rm -rf "$dir" && mkdir -p "$dir"
run() {  # name, steps, then more flashlab-viz flags
  name=$1 steps=$2; shift 2
  echo "== flashlab-viz --screenshot $name.png --dump $name.json --steps $steps $*"
  xvfb-run -a -s "-screen 0 1600x1000x24" "$viz" --screenshot "$dir/$name.png" --dump "$dir/$name.json" \
    --steps "$steps" "$@"
  "$check" "$dir/$name.png" "$dir/$name.json" "$steps"
}
run must_show 12 --seqlen 1024 --hdim 64 --causal
run fa1_vs_fa2 30 --seqlen 512 --hdim 32 --br 32 --bc 32 --causal --order fa1 --compare
run backward 7 --seqlen 256 --hdim 32 --br 32 --bc 32 --causal --order bwd
run q_from_end 10 --seqlen 1000 --hdim 64 --br 192 --bc 128 --causal --q-from-end  # fa3's d = 64 tiles
run document_mask 30 --seqlen 1024 --hdim 64 --br 64 --bc 64 --mask document --doc-lengths 300,200,400,124 --causal
run prefix_lm_fa1 20 --seqlen 512 --hdim 32 --br 32 --bc 32 --mask prefix-lm --prefix 100 --order fa1
# A dense mask with holes: keys 64..127 masked for every query (K/V blocks 2 and 3 skipped inside each line).
if command -v python3 >/dev/null 2>&1; then
  python3 - "$dir/holes.npy" <<'PY'
import struct, sys
n = 256
hdr = "{'descr': '|b1', 'fortran_order': False, 'shape': (%d, %d), }" % (n, n)
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
bits = bytes(0 if 64 <= j < 128 or (i * 3 + j) % 7 == 0 else 1 for i in range(n) for j in range(n))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bits)
PY
  run dense_holes 9 --seqlen 256 --hdim 32 --br 32 --bc 32 --mask dense --mask-file "$dir/holes.npy"
fi
