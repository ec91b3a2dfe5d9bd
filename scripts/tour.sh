#!/usr/bin/env bash
# Sets up, builds and runs the main job: `flashlab tour` (pass it any problem flags).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target flashlab
./build/cli/flashlab tour "$@"
