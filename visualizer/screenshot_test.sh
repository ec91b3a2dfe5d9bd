#!/bin/sh
# The visualizer's must-show command under Xvfb: a PNG of the state after 12
# computed tiles of a causal N=1024, d=64 forward, and the dump of the panels'
# numbers, both checked by flashlab_viz_check against its own Stepper run.
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
