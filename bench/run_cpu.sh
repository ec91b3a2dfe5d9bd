#!/usr/bin/env bash
# Builds and runs the CPU benchmark, then writes its results:
#   bench/results/cpu-<date>-<cpu>-<cores>c.json   Google Benchmark's JSON
#   bench/results/cpu-<date>.md                     the summary table (summarize_cpu.py)
#
# Usage: bench/run_cpu.sh [--build-dir DIR] [--wait-idle SECONDS] [-- benchmark flags...]
#   --build-dir DIR      CMake build directory (default: build; configured if new)
#   --wait-idle SECONDS  wait up to this long for other processes to leave the
#                        cores alone before measuring (default 300; 0: don't wait)
#   flags after --       go to flashlab_bench_cpu, e.g. --benchmark_filter=forward
#
# Timings on a shared machine are only as good as its idle cores: the script
# waits for them, measures how busy the machine was besides the benchmark
# (the JSON has it per case, as others_cores) and writes it into the summary.
# Niceness does not help against another login session's work: with the
# kernel's autogroup scheduling each session gets an equal share of the CPU.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="build"
wait_idle=300
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --wait-idle) wait_idle="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run_cpu.sh: unknown argument '$1'; expected --build-dir DIR, --wait-idle SECONDS or -- <benchmark flags>" >&2
       exit 2 ;;
  esac
done
case "$build_dir" in /*) ;; *) build_dir="$repo/$build_dir" ;; esac

# ---- 1. build
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  echo "run_cpu: configuring $build_dir (Release)"
  cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
fi
echo "run_cpu: building flashlab_bench_cpu in $build_dir"
cmake --build "$build_dir" --target flashlab_bench_cpu -j "$(nproc)"
bin="$build_dir/bench/flashlab_bench_cpu"

# ---- 2. name the results after the date and the machine
date_utc="$(date -u +%Y-%m-%d)"
model="$(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
cores="$(nproc)"
slug="$(echo "${model:-unknown-cpu}" | tr 'A-Z' 'a-z' | sed -e 's/([^)]*)//g' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')"
# the code measured: the commit, and any uncommitted change in what the benchmark links
source_rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$repo" status --porcelain -- core reference tiled_cpu bench/bench_cpu.cpp 2>/dev/null | awk '{print $2}' | tr '\n' ' ')"
[ -n "$dirty" ] && source_rev="$source_rev with uncommitted changes in: $dirty"
mkdir -p "$repo/bench/results"
json="$repo/bench/results/cpu-$date_utc-$slug-${cores}c.json"
md="$repo/bench/results/cpu-$date_utc.md"

# ---- 3. wait for idle cores: busy CPU of everything else, in cores, over 2 s
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
others_busy_cores() {  # cores used by everything on the machine over 2 seconds (nothing of ours runs now)
  local a b hz
  hz="$(getconf CLK_TCK)"
  a="$(busy_jiffies)"; sleep 2; b="$(busy_jiffies)"
  awk -v a="$a" -v b="$b" -v hz="$hz" 'BEGIN{printf "%.2f", (b - a) / hz / 2}'
}
waited=0
idle_samples=0
while :; do
  busy="$(others_busy_cores)"
  if awk -v b="$busy" 'BEGIN{exit !(b < 0.25)}'; then
    idle_samples=$((idle_samples + 1))
    [ "$idle_samples" -ge 3 ] && break  # idle for 6 s in a row, not a pause between two compiles
    waited=$((waited + 2))
    continue
  fi
  idle_samples=0
  if [ "$waited" -ge "$wait_idle" ]; then
    echo "run_cpu: WARNING: other processes still use $busy cores after ${waited}s; measuring anyway (numbers will be low)" >&2
    break
  fi
  echo "run_cpu: other processes use $busy of $cores cores; waiting for idle (${waited}/${wait_idle}s)"
  sleep 8; waited=$((waited + 10))
done

# ---- 4. run; JSON goes to a temporary file and is renamed only when the run succeeded
echo "run_cpu: running $bin -> $json"
hz="$(getconf CLK_TCK)"
machine_before="$(busy_jiffies)"; t0="$(date +%s.%N)"
timefile="$(mktemp)"
trap 'rm -f "$timefile" "$json.tmp" "$md.tmp"' EXIT
TIMEFORMAT='%U %S'
{ time "$bin" --benchmark_min_time=0.2 --benchmark_out="$json.tmp" --benchmark_out_format=json \
    "${extra[@]}" 2>&3; } 3>&2 2>"$timefile"
machine_after="$(busy_jiffies)"; t1="$(date +%s.%N)"
background="$(awk -v a="$machine_before" -v b="$machine_after" -v hz="$hz" -v t0="$t0" -v t1="$t1" \
  -v own="$(cat "$timefile")" 'BEGIN{split(own, o, " "); printf "%.2f", ((b - a) / hz - o[1] - o[2]) / (t1 - t0)}')"
mv "$json.tmp" "$json"
echo "run_cpu: other processes used $background cores on average during the run"

# ---- 5. summary
python3 "$repo/bench/summarize_cpu.py" "$json" --background-cores "$background" --source "$source_rev" > "$md.tmp"
mv "$md.tmp" "$md"
echo "run_cpu: wrote $json"
echo "run_cpu: wrote $md"
