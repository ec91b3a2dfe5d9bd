#!/bin/sh
# flashlab-viz --decode under Xvfb: a paged cache of three ragged entries with an append, GQA 4:1 packed
# rows and three splits, shot mid-walk (split 1 reading K_3) and after the combine; a contiguous cache
# with one split (no combine). Each PNG and dump checked by flashlab_viz_decode_check against its own run
# of the tiled decode.
# usage: decode_screenshot_test.sh FLASHLAB_VIZ FLASHLAB_VIZ_DECODE_CHECK WORKDIR
set -eu
viz=$1 check=$2 dir=$3
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "skipped: no xvfb-run (install xvfb and xauth to run the visualizer's screenshot test)"
  exit 0
fi
rm -rf "$dir" && mkdir -p "$dir"
run() {  # name, then flashlab-viz --decode flags
  name=$1; shift
  echo "== flashlab-viz --decode --screenshot $name.png --dump $name.json $*"
  xvfb-run -a -s "-screen 0 1600x1000x24" "$viz" --decode --screenshot "$dir/$name.png" --dump "$dir/$name.json" "$@"
  "$check" "$dir/$name.png" "$dir/$name.json" "$@"
}
paged="--cache-seqlens 40,90,17 --append 2 --page-size 16 --heads 8 --kv-heads 2 --q-len 2 --causal --num-splits 3 --bc 16 --walk-batch 1"
run paged_mid $paged --steps 4
run paged_combined $paged --steps 7
run contiguous --cache-seqlens 100,33 --heads 4 --kv-heads 1 --num-splits 1 --bc 32 --steps 2
