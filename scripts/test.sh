#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build's suite (doctest
# cases and the CLI checks under CTest), then the CPU suite again in a second
# build under AddressSanitizer + UndefinedBehaviorSanitizer, compiled for a generic x86-64
# (no -march=native) so the portable vector paths are tested too.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh

echo "== Release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHLAB_SANITIZE=ON -DFLASHLAB_BUILD_BENCH=OFF -DFLASHLAB_NATIVE=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
