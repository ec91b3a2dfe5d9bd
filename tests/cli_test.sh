#!/usr/bin/env bash
# The flashlab command as a user meets it: good problems pass, bad input gets
# a one-line error naming the problem, a non-zero exit, and no output file.
set -u
flashlab=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

ok() {  # ok NAME REGEX -- ARGS: exit 0 and output matching REGEX
  local name=$1 regex=$2; shift 3
  local out
  if out=$("$flashlab" "$@" 2>&1) && grep -qE -- "$regex" <<<"$out"; then
    passed=$((passed + 1)); echo "ok     $name"
  else
    failed=$((failed + 1)); echo "FAILED $name: flashlab $*"; echo "$out" | tail -5
  fi
}

refused() {  # refused NAME REGEX -- ARGS: non-zero exit, one error line matching REGEX, nothing in $work/out
  local name=$1 regex=$2; shift 3
  local out status
  out=$("$flashlab" "$@" 2>&1); status=$?
  if [ $status -ne 0 ] && grep -qE -- "$regex" <<<"$out" && [ -z "$(ls -A "$work/out" 2>/dev/null)" ]; then
    passed=$((passed + 1)); echo "ok     $name (exit $status: $(head -1 <<<"$out"))"
  else
    failed=$((failed + 1)); echo "FAILED $name (exit $status): flashlab $*"; echo "$out" | tail -5
  fi
}

ok "the issue's awkward problem passes for every implementation" "all implementations pass" -- \
  check --seqlen-q 333 --seqlen-k 1000 --hdim 80 --heads 8 --kv-heads 2 --causal --window 128,0 --softcap 30 --dtype bf16 --pass fwd+bwd
ok "MQA, dropout, ALiBi, fp16, seqlen 1" "all implementations pass" -- \
  check --seqlen-q 1 --seqlen-k 97 --hdim 59 --heads 4 --kv-heads 1 --alibi --dropout 0.1 --dtype fp16 --pass fwd+bwd
ok "large logits" "all implementations pass" -- check --seqlen 200 --logit-scale 1000 --dtype bf16 --pass fwd+bwd
ok "check as JSON" '"pass": true' -- check --seqlen 64 --format json
ok "tour" "all implementations pass" -- tour
ok "step, non-interactive" "online softmax per row" -- step --seqlen 48 --causal --non-interactive 3
ok "step backward" "store dK" -- step --seqlen 32 --order bwd --non-interactive 4
ok "step FA1 backward (Algorithm 4)" "load  dQ" -- step --seqlen 32 --order fa1-bwd --non-interactive 2
ok "trace as CSV" "^transfer,0,0,fa2" -- trace --seqlen 64 --format csv
ok "trace as JSON lines" '"event":"row_stats"' -- trace --seqlen 64 --order fa1
ok "trace --q-from-end puts the ragged Q block first" "^transfer,0,0,fa2,0,,,,Q,load,0,36," -- \
  trace --seqlen 100 --causal --br 64 --bc 32 --q-from-end --format csv
ok "run writes o, lse and gradients" "dq.npy" -- run --impl tiled-fa1 --seqlen 40 --pass fwd+bwd --out "$work/run"
ok "run reads its own outputs back as inputs" "o.npy" -- run --impl tiled-fa2 --q "$work/run/o.npy" --k "$work/run/o.npy" --v "$work/run/o.npy" --out "$work/run2"

if [ "${2:-}" != "sanitized" ]; then  # memory is only meaningful without the sanitizers' shadow memory
  out=$("$flashlab" run --impl tiled-fa2 --seqlen 65536 --hdim 64 --out "$work/big" 2>&1)
  mib=$(grep -oE 'peak resident memory [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  if [ -n "$mib" ] && [ "$mib" -lt 256 ]; then
    passed=$((passed + 1)); echo "ok     tiled FA2 forward at N = 65536, d = 64 peaks at $mib MiB (< 256)"
  else
    failed=$((failed + 1)); echo "FAILED tiled FA2 at N = 65536: $out"
  fi
fi

# The simulator: the FlashAttention paper's Fig. 2 (A100, GPT-2 medium, forward + backward).
fig2=$("$flashlab" estimate --gpu a100-40gb --batch 64 --heads 16 --seqlen 1024 --hdim 64 --dtype fp16 --pass fwd+bwd --algo all --format json 2>&1)
if python3 - "$fig2" <<'PY'
import json, sys
rows = {r["algo"]: (r["hbm_read_bytes"] + r["hbm_write_bytes"]) / 1e9 for r in json.loads(sys.argv[1])}
print(f"       standard {rows['standard']:.1f} GB, fa1 {rows['fa1']:.2f} GB, fa2 {rows['fa2']:.2f} GB")
sys.exit(0 if 30 <= rows["standard"] <= 45 and 4.0 <= rows["fa1"] <= 4.8 else 1)
PY
then passed=$((passed + 1)); echo "ok     estimate reproduces Fig. 2's HBM traffic"
else failed=$((failed + 1)); echo "FAILED estimate Fig. 2: $fig2"; fi
ok "estimate sweeps as CSV" "^fa2,h100-sxm,fwd,65536" -- estimate --seqlen 512:65536:x2 --algo fa2 --format csv
ok "estimate lists the GPUs" "rtx-4090" -- estimate --list-gpus
ok "estimate draws an SVG" "estimates in" -- estimate --seqlen 1024:8192:x2 --plot "$work/roof.svg"
ok "estimate draws the replayed CTA timeline" "estimates in" -- estimate --seqlen 4096 --causal --algo fa2 --timeline "$work/timeline.svg"
ok "estimate writes the timeline as JSON" "estimates in" -- estimate --seqlen 2048 --algo fa2 --timeline "$work/timeline.json"
if grep -q "fa2 forward: " "$work/timeline.svg" && python3 -c "import json,sys; k=json.load(open(sys.argv[1]))['kernels'][0]; sys.exit(0 if k['ctas'] and k['slots'] > 0 else 1)" "$work/timeline.json"
then passed=$((passed + 1)); echo "ok     the timeline files hold the replayed CTAs"
else failed=$((failed + 1)); echo "FAILED the timeline files"; fi
ok "estimate leaves fa3 out of 'all' on an A100, saying why" "fa3 left out: .*wgmma" -- estimate --gpu a100-80gb --algo all
ok "estimate models cuDNN's and flashlab's kernels" "^fa3,h100-sxm" -- estimate --algo all --impl cudnn --format csv
ok "estimate models flashlab's fa3 with gpu/shapes.hpp's tiles" "fa3 +8192 +128x80" -- estimate --algo fa3 --impl flashlab --hdim 256 --causal --seqlen 8192
ok "estimate models flashlab's fa3 backward with fa3_backward_shape's tiles" "fa3 +8192 +64x128" -- estimate --algo fa3 --impl flashlab --hdim 128 --causal --seqlen 8192 --pass bwd
ok "estimate models flashlab's fa3 forward + backward" "pass fwd\+bwd" -- estimate --algo fa3 --impl flashlab --hdim 64 --seqlen 4096 --pass fwd+bwd
ok "estimate --algo all models flashlab's fa3 backward at d = 256 (the split kernel's 64 x 64 tiles)" "^fa3 +4096 +64x64" -- \
  estimate --algo all --impl flashlab --pass bwd --hdim 256 --seqlen 4096
ok "estimate --algo all leaves flashlab's fa3 backward out at d = 100, saying why" "fa3 left out: flashlab's fa3 backward" -- \
  estimate --algo all --impl flashlab --pass fwd+bwd --hdim 100 --seqlen 4096
ok "estimate with the textbook LRU L2 to compare" "^fa2,h100-sxm" -- estimate --algo fa2 --causal --seqlen 16384 --l2-replacement lru --format csv
grep -q "<svg" "$work/roof.svg" && passed=$((passed + 1)) && echo "ok     the SVG is there" || { failed=$((failed + 1)); echo "FAILED no SVG"; }

# The kernels' tile shapes (gpu/shapes.hpp): a head dim fa2 pads, and the backward's tiles by the GPU's shared memory.
ok "shapes pads d = 96 to fa2's d = 128 kernel, 128 x 64 tiles" "^fa2 +fwd +96 +128 +128 +64 +4 +128 " -- shapes --algo fa2 --hdim 96
ok "shapes: decode's split kernel at d = 128, 16 packed rows, three warps of 32-key blocks, two stages" \
  "^decode +fwd +128 +128 +16 +96 +3 +96 +2 " -- shapes --algo decode --hdim 128
refused "shapes: decode has no backward" "decode has no backward kernel" -- shapes --algo decode --pass bwd
ok "shapes: fa2's d = 256 forward is the warp-pair kernel" "^fa2 +fwd +256 +256 +64 +64 .* yes .*fa2_fwd_pairs" -- shapes --hdim 256
ok "shapes: fa2's d = 256 backward on an A100 takes 32-row steps" "^fa2 +bwd +256 +256 +32 +64 +8 +256 .*dkdv" -- \
  shapes --pass bwd --hdim 256 --gpu a100-80gb
shapes_json=$("$flashlab" shapes --algo fa2 --pass fwd+bwd --hdim 64,256 --json 2>&1)
if python3 -c "
import json, sys
rows = json.loads(sys.argv[1])
fwd = {r['head_dim']: r for r in rows if r['pass'] == 'fwd'}
assert (fwd[64]['block_m'], fwd[64]['block_n'], fwd[64]['threads']) == (128, 128, 128), fwd[64]
assert fwd[256]['warp_pairs'] and fwd[256]['block_m'] == 64, fwd[256]
assert [r['kernel'].split()[0] for r in rows if r['pass'] == 'bwd' and r['head_dim'] == 64] == ['dkdv_kernel', 'dq_kernel']
" "$shapes_json"
then passed=$((passed + 1)); echo "ok     shapes as JSON: fa2 at d = 64 and 256, forward and backward"
else failed=$((failed + 1)); echo "FAILED shapes as JSON: $shapes_json"; fi

# The lessons (lessons/): the path, a lesson's exercises, grading against the library's answer.
ok "lesson lists the path, every lesson with its file" "14  Draw the roofline.*lessons/14-draw-the-roofline.md" -- lesson
ok "lesson --list as JSON" '"written": true' -- lesson --list --format json
ok "lesson 1 prints its exercises" "Exercise 2" -- lesson 1
ok "a right answer is right" "^right: " -- lesson 2 --answer 256
out=$("$flashlab" lesson 1 --exercise 2 --answer 100 2>&1); status=$?
if [ $status -eq 1 ] && grep -q "^wrong: " <<<"$out" && grep -q "ridge = peak" <<<"$out"; then
  passed=$((passed + 1)); echo "ok     a wrong answer is wrong, exits 1 and shows the working"
else failed=$((failed + 1)); echo "FAILED a wrong answer (exit $status): $out"; fi
if [ "${2:-}" != "sanitized" ] && command -v xvfb-run >/dev/null 2>&1 && [ -x "$(dirname "$flashlab")/flashlab-viz" ]; then
  if xvfb-run -a -s "-screen 0 1600x1000x24" "$flashlab" viz --lesson 4 --steps 3 --screenshot "$work/lesson4.png" \
       --dump "$work/lesson4.json" >/dev/null 2>&1 &&
     grep -q '"problem": "batch 1, heads 1, seqlen 512, hdim 32' "$work/lesson4.json" &&
     [ -s "$work/lesson4.png" ]
  then passed=$((passed + 1)); echo "ok     viz --lesson 4 renders lesson 4's problem headless"
  else failed=$((failed + 1)); echo "FAILED viz --lesson 4 --screenshot"; fi
else
  echo "skipped: viz --lesson 4 --screenshot (no xvfb-run, no flashlab-viz, or sanitized)"
fi

mkdir -p "$work/out"
printf 'not a numpy file' > "$work/bad.npy"
refused "heads not a multiple of kv-heads" "multiple of kv-heads" -- check --heads 6 --kv-heads 4
refused "negative seqlen" "seqlen_q must be positive" -- run --seqlen -5 --out "$work/out"
refused "unknown dtype" "unknown dtype" -- check --dtype fp8
refused "malformed window" "--window takes two integers" -- check --window 12
refused "dropout of 1" "dropout probability" -- check --dropout 1
refused "unknown implementation" "unknown implementation 'nope'" -- run --impl nope --out "$work/out"
refused "malformed .npy" "malformed .npy file" -- run --q "$work/bad.npy" --k "$work/bad.npy" --v "$work/bad.npy" --out "$work/out"
refused "the reference refuses a 65536^2 problem, naming the bytes" "would need [0-9]+ bytes" -- \
  run --impl reference --seqlen 65536 --out "$work/out"
refused "unknown subcommand" "" -- frobnicate
refused "unknown GPU" "unknown GPU 'b200'" -- estimate --gpu b200
refused "bad preset override" "no field 'l3_bytes'" -- estimate --set l3_bytes=1
refused "bad sweep" "must be A:B:xK" -- estimate --seqlen 512:1024
refused "tiles that do not fit in shared memory" "shared memory" -- estimate --algo fa2 --block-m 1024 --block-n 1024 --hdim 256
refused "a tile height that is not positive" "block-m" -- estimate --algo fa2 --block-m -5
refused "fa3 on a GPU without wgmma" "fa3: FlashAttention-3 needs Hopper's wgmma" -- estimate --gpu a100-80gb --algo fa3
refused "flashlab's fa3 backward at d = 100, which its kernel does not compile" "fa3 --impl flashlab --pass bwd: head dim 100 is not compiled" -- \
  estimate --algo fa3 --impl flashlab --hdim 100 --pass bwd
refused "flashlab's fa3 backward on a GPU without wgmma" "fa3: FlashAttention-3 needs Hopper's wgmma" -- estimate --gpu a100-80gb --algo fa3 --impl flashlab --pass bwd
refused "a timeline over a sweep" "single --seqlen" -- estimate --seqlen 512:4096:x2 --timeline "$work/out/t.svg"
refused "a timeline of an unknown format" "must end in .svg or .json" -- estimate --timeline "$work/out/t.png"
refused "an unknown kernel" "unknown kernel 'triton'" -- estimate --impl triton
refused "an unknown L2 policy" "l2-replacement" -- estimate --l2-replacement fifo
printf '{"name": "x"' > "$work/bad_gpu.json"
refused "malformed GPU file" "not valid JSON" -- estimate --gpu-file "$work/bad_gpu.json"
refused "shapes: a head dim fa2 does not take" "head dim 100 is not supported: fa2 takes head dims that are multiples of 8" -- \
  shapes --algo fa2 --hdim 64,100
refused "shapes: an unknown algorithm" "unknown algorithm 'fa4' \(expected one of standard, fa1-minimal, fa2, fa3, decode, or all\)" -- \
  shapes --algo fa4
refused "shapes: a backward fa1-minimal does not have" "fa1-minimal has no backward kernel" -- shapes --algo fa1-minimal --pass bwd
refused "shapes: fa2's backward on a GPU without the shared memory for it" "needs 164864 bytes of shared memory per block" -- \
  shapes --pass bwd --hdim 128 --gpu l4

refused "a lesson outside the path" "there is no lesson 15: the path has lessons 1 to 14" -- lesson 15
refused "an answer that is not a number" "--answer: 'abc' is not a number" -- lesson 2 --answer abc
refused "an answer with a unit stuck to it" "--answer: '256rows' is not a number" -- lesson 2 --answer 256rows
refused "a lesson with two exercises needs --exercise" "has 2 exercises: say which with --exercise 1..2" -- lesson 1 --answer 30
refused "an exercise the lesson does not have" "--exercise 3: lesson 1 has exercises 1..2" -- lesson 1 --exercise 3 --answer 30
refused "viz --lesson of a lesson outside the path" "there is no lesson 15" -- viz --lesson 15
refused "viz --lesson of a lesson without a visualizer problem" "lesson 1 has no visualizer problem" -- viz --lesson 1
refused "viz --lesson without a number" "--lesson: 'x' is not a lesson number" -- viz --lesson x

# Decoding against a KV cache (issue 15): every CPU implementation against the oracle, the split-KV walk's events,
# and a bad cache description refused with what was wrong.
ok "check --decode: ragged paged cache, q_len 4 causal, append + rotary, GQA 8:1, 3 splits" "all implementations pass" -- \
  check --decode --cache-seqlens 5,900,17 --heads 8 --kv-heads 1 --q-len 4 --causal --append 4 --rotary half --page-size 16 --num-splits 3 --dtype bf16
ok "check --decode: a 64k paged cache, interleaved rotary, 8 splits" "tiled-split-kv +O .* pass" -- \
  check --decode --cache-len 65536 --hdim 32 --page-size 256 --num-splits 8 --rotary interleaved --append 1 --dtype bf16
ok "check --decode as JSON" '"impl": "tiled-split-kv"' -- check --decode --cache-seqlens 300 --format json
ok "trace --decode names each split" '"split":2' -- trace --decode --cache-seqlens 40 --num-splits 3 --bc 16 --hdim 8
ok "trace --decode shows the combine" '"event":"combine"' -- trace --decode --cache-seqlens 40 --num-splits 3 --bc 16 --hdim 8
ok "estimate --decode: flash-attn's heuristic splits a batch-1 64k cache" "speedup of split-KV [2-9]\.[0-9]+x" -- \
  estimate --decode --batch 1 --heads 32 --kv-heads 8 --hdim 128 --cache-len 65536
ok "estimate --decode as JSON" '"heuristic_splits": 29' -- estimate --decode --batch 1 --heads 32 --kv-heads 8 --hdim 128 --cache-len 65536 --format json
ok "estimate --decode --impl flashlab: the kernel's own rule, 14 splits on an H200" \
  "splits +14 \(flashlab's rule, gpu/shapes.hpp decode_splits_for" -- \
  estimate --decode --impl flashlab --gpu h200 --batch 1 --heads 32 --kv-heads 8 --hdim 128 --cache-len 8192
refused "estimate --decode: cuDNN's decode kernel is not modelled" "not modelled" -- \
  estimate --decode --impl cudnn --batch 1 --heads 32 --kv-heads 8 --hdim 128 --cache-len 8192
refused "estimate --decode: a bad cache" "block table is too short" -- estimate --decode --page-size 256 --cache-seqlens 900 --max-pages 2
ok "step --decode walks the splits, the pages and the combine" "combine of Q block 0" -- \
  step --decode --cache-seqlens 40,7 --page-size 8 --num-splits 2 --hdim 8 --q-len 2 --causal --non-interactive 9
ok "step --decode names each key block's physical pages" "keys 0\.\.15 in pages [0-9]+ [0-9]+" -- \
  step --decode --cache-seqlens 40 --page-size 8 --num-splits 2 --hdim 8 --non-interactive 1
refused "check --decode is forward only" "forward pass only" -- check --decode --pass bwd
refused "decode: a page index out of range" "block_table\[[0-9]+\]\[[0-9]+\] = [0-9]+ is not a page: expected 0 .. 9" -- \
  check --decode --page-size 16 --cache-seqlens 100,200 --num-pages 10
refused "decode: cache_seqlens beyond the cache" "cache_seqlens\[0\] = 900 keys do not fit in the cache's cache_len = 512" -- \
  check --decode --cache-len 512 --cache-seqlens 900
refused "decode: a block table too short" "the block table is too short" -- check --decode --page-size 256 --cache-seqlens 900 --max-pages 2
refused "decode: rotary without appended keys" "needs new_len > 0" -- check --decode --rotary half
# A length or count given as 0 is the user's, refused as such, never read as "unset" and replaced by a default.
refused "a zero sequence length is refused, not defaulted" "seqlen_q must be positive, got 0" -- check --seqlen 0
refused "a zero key length is refused, not defaulted" "seqlen_k must be positive, got 0" -- check --seqlen-q 5 --seqlen-k 0
refused "zero kv heads are refused, not read as MHA" "kv-heads must be positive, got 0" -- check --heads 4 --kv-heads 0
refused "decode: a negative cache length is refused, not defaulted" "--cache-len must be positive, got -1" -- \
  estimate --decode --cache-len -1
refused "decode: zero block table columns are refused, not defaulted" "--max-pages must be positive, got 0" -- \
  check --decode --page-size 16 --max-pages 0
refused "estimate --decode: more splits than the kernels take" "num_splits 129: the split-KV kernels take at most 128" -- \
  estimate --decode --impl flashlab --num-splits 129
refused "decode: an unknown rotary layout" "unknown rotary layout 'diag'" -- check --decode --rotary diag --append 1
refused "decode: one seqlen list for a different batch" "cache_seqlens has 2 entries; expected one per batch entry \(3\)" -- \
  check --decode --cache-seqlens 1,2 --batch 3

# Mask functions (core/include/flashlab/mask.hpp): every CPU implementation runs each kind, forward and
# backward; the GPU ones say why they do not; estimate, step and trace take the same flags.
mask_npy() {  # mask_npy PATH DESCR SHAPE RULE: a .npy whose element (..., i, j) is the Python expression RULE
  python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, rule = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")], sys.argv[4]
hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)))
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
n = 1
for s in shape: n *= s
sq, sk = shape[-2], shape[-1]
data = bytes(1 if eval(rule, {}, {"i": (e // sk) % sq, "j": e % sk}) else 0 for e in range(n))
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + data)
PY
}
ok "check --mask document (the issue's example), fwd+bwd" "all implementations pass" -- \
  check --seqlen 1024 --mask document --doc-lengths 300,700,24 --heads 2 --dtype bf16 --pass fwd+bwd
ok "check --mask document --causal" "all implementations pass" -- \
  check --seqlen 1024 --mask document --doc-lengths 300,700,24 --causal --dtype fp16 --pass fwd+bwd
ok "check --mask prefix-lm, one prefix per batch entry, seqlen_q < seqlen_k" "all implementations pass" -- \
  check --seqlen-q 300 --seqlen-k 512 --batch 2 --mask prefix-lm --prefix 128,0 --dtype bf16 --pass fwd+bwd
ok "check --mask chunked" "all implementations pass" -- check --seqlen 700 --mask chunked --chunk 256 --dtype bf16 --pass fwd+bwd
ok "GPU implementations name the mask kind they lack" "gpu-standard +unsupported: mask kind chunked" -- \
  check --seqlen 700 --mask chunked --chunk 256 --dtype bf16
mask_npy "$work/dense.npy" '|b1' 200,300 "(i * 7 + j * 3) % 5 != 0 and not 64 <= j < 128"
ok "check --mask dense from a .npy (holes, fwd+bwd)" "all implementations pass" -- \
  check --seqlen-q 200 --seqlen-k 300 --mask dense --mask-file "$work/dense.npy" --dtype bf16 --pass fwd+bwd
ok "fa2 and fa3 take a dense mask (skipped without a device), standard refuses it by name" "gpu-standard +unsupported: mask kind dense" -- \
  check --seqlen-q 200 --seqlen-k 300 --mask dense --mask-file "$work/dense.npy" --dtype bf16
mask_npy "$work/dense4.npy" '|u1' 2,3,200,300 "(i + 2 * j) % 7 != 0"
ok "check --mask dense, one mask per (batch, head), uint8" "all implementations pass" -- \
  check --batch 2 --heads 3 --seqlen-q 200 --seqlen-k 300 --mask dense --mask-file "$work/dense4.npy" --pass fwd+bwd
ok "estimate --mask document: FLOPs are the block mask's density times the unmasked ones" \
  "fa2: block mask density 0.1250 at 128x64 tiles" -- \
  estimate --gpu h100-sxm --batch 2 --heads 16 --hdim 128 --dtype bf16 --seqlen 16384 --algo fa2 --mask document \
  --doc-lengths 2048,2048,2048,2048,2048,2048,2048,2048
ok "step --mask document draws the block mask (partial tiles)" "^  %  " -- \
  step --seqlen 256 --mask document --doc-lengths 100,100,56 --causal --br 32 --bc 32 --non-interactive 2
ok "trace --mask prefix-lm skips the tiles past the prefix" '"event":"tile_skipped","h":0,"i":0,"j":2,' -- \
  trace --seqlen 128 --mask prefix-lm --prefix 40 --br 32 --bc 32 --order fa1
refused "document lengths that do not cover the sequence" "document lengths 300,700,23 sum to 1023, but seqlen is 1024" -- \
  check --seqlen 1024 --mask document --doc-lengths 300,700,23
refused "a document length list that is not numbers" "--doc-lengths takes integers separated by commas" -- \
  check --seqlen 1024 --mask document --doc-lengths 300,x
refused "a prefix longer than the keys" "prefix 300 of batch entry 0 must be in \[0, seqlen_k = 256\]" -- \
  check --seqlen 256 --mask prefix-lm --prefix 300
refused "prefix-lm with --causal" "prefix-lm is already causal after the prefix" -- \
  check --seqlen 256 --mask prefix-lm --prefix 30 --causal
refused "a mask parameter without its kind" "document lengths were given but the mask is none; use --mask document" -- \
  check --seqlen 256 --doc-lengths 128,128
refused "an unknown mask kind" "unknown mask kind 'diagonal'" -- check --seqlen 256 --mask diagonal
mask_npy "$work/small.npy" '|b1' 100,300 "True"
refused "a dense mask of the wrong shape" "has shape \(100, 300\); expected \(seqlen_q, seqlen_k\) = \(200, 300\)" -- \
  check --seqlen-q 200 --seqlen-k 300 --mask dense --mask-file "$work/small.npy"
mask_npy "$work/ints.npy" '<i4' 200,300 "True"
refused "a dense mask of the wrong dtype" "dtype '<i4' is not supported; expected '\|b1'" -- \
  check --seqlen-q 200 --seqlen-k 300 --mask dense --mask-file "$work/ints.npy"
refused "a mask function with --decode" "--window, --mask, --alibi and --dropout are not implemented" -- \
  check --decode --mask chunked --chunk 64
refused "a dense mask that is not there" "cannot open" -- \
  check --seqlen 200 --mask dense --mask-file "$work/missing.npy"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
